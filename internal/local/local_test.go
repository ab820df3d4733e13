package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/redrive"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/internal/testio"
	"github.com/linegate/linegate/pkg/bot"
)

const testTemplate = "../../template.yaml"

// syncBuffer collects the console output of a runtime.
type syncBuffer = testio.Buffer

func start(t *testing.T, cfg Config) (*Runtime, *lineplatform.Platform) {
	t.Helper()
	if cfg.Template == "" {
		cfg.Template = testTemplate
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Bot == nil {
		cfg.Bot = func(config.Worker) *bot.Router { return testbot.New() }
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	out, _ := cfg.Out.(*syncBuffer)
	if out == nil {
		out = &syncBuffer{}
		cfg.Out = out
	}
	if os.Getenv("LOCAL_TEST_LOGS") != "" {
		cfg.Logs = os.Stderr
	}
	rt, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Token() != "" {
		tokens.Store(rt.URL(), rt.Token())
	}
	t.Cleanup(func() {
		tokens.Delete(rt.URL())
		rt.Close()
		if t.Failed() {
			t.Logf("console:\n%s", out.String())
		}
	})
	return rt, lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret), lineplatform.WithTimeout(deliveryTimeout))
}

// deliveryTimeout is how long the tests' LINE platform waits for the
// webhook's answer. LINE waits 2 s (lineplatform.DefaultTimeout), but the
// tests are not about the webhook's speed: on a loaded 2-core machine under
// the race detector an answer can take longer, and a test that failed for
// it would test the machine.
const deliveryTimeout = 30 * time.Second

// deliverAccepted delivers ev as LINE does with redelivery on: a 5xx (a
// slow endpoint backend missing the webhook's publish deadline on a loaded
// machine) is redelivered, and the test needs only that some attempt was
// accepted.
func deliverAccepted(t *testing.T, rt *Runtime, ev json.RawMessage) string {
	t.Helper()
	p := lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret), lineplatform.WithTimeout(deliveryTimeout), lineplatform.WithRedelivery(10, time.Second))
	d, err := p.Deliver(context.Background(), ev)
	if err != nil || !d.Delivered {
		t.Fatalf("delivery, with redelivery: %+v %v", d, err)
	}
	return d.WebhookEventIDs[0]
}

type sentMessage struct {
	To       string            `json:"to"`
	Via      string            `json:"via"`
	RetryKey string            `json:"retryKey"`
	Messages []json.RawMessage `json:"messages"`
}

// tokens are the tokens of the runtimes started with one, by base URL, so
// the helpers' requests carry them.
var tokens sync.Map

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens.Range(func(base, tok any) bool {
		if strings.HasPrefix(url, base.(string)+"/") {
			req.Header.Set("X-Linegate-Token", tok.(string))
		}
		return true
	})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// eventually polls cond until it holds or the timeout passes; then it fails
// naming what it waited for and what the runtime had recorded.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	eventuallySaw(t, timeout, what, cond, nil)
}

// eventuallySaw is eventually with saw describing, on failure, what the test
// saw last.
func eventuallySaw(t *testing.T, timeout time.Duration, what string, cond func() bool, saw func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			got := ""
			if saw != nil {
				got = "; saw:\n" + saw()
			}
			t.Fatalf("timed out after %v waiting for %s%s", timeout, what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMessage waits for a message to `to` (via reply or push, "" for
// either) containing contains, and fails listing every message the local
// LINE API received when none came.
func waitMessage(t *testing.T, rt *Runtime, timeout time.Duration, to, via, contains string) sentMessage {
	t.Helper()
	var m sentMessage
	eventuallySaw(t, timeout, fmt.Sprintf("a %s message to %s containing %q", orDefault(via, "reply or push"), to, contains),
		func() bool { var ok bool; m, ok = findMessage(t, rt, to, via, contains); return ok },
		func() string { return describeMessages(messages(t, rt)) })
	return m
}

// waitEvent waits for the event's /_local/events entry to satisfy ok, and
// fails showing the entry it saw last.
func waitEvent(t *testing.T, rt *Runtime, timeout time.Duration, id, what string, ok func(eventView) bool) {
	t.Helper()
	var last eventView
	eventuallySaw(t, timeout, "event "+id+": "+what, func() bool { last, _ = event(t, rt, id); return ok(last) },
		func() string { return fmt.Sprintf("%+v", last) })
}

func describeMessages(ms []sentMessage) string {
	if len(ms) == 0 {
		return "  (no message at all)"
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  to=%s via=%s messages=%s\n", m.To, m.Via, bytes.Join(rawBytes(m.Messages), []byte(" ")))
	}
	return b.String()
}

func rawBytes(ms []json.RawMessage) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

func messages(t *testing.T, rt *Runtime) []sentMessage {
	var out []sentMessage
	getJSON(t, rt.URL()+"/_local/line/messages", &out)
	return out
}

// sentMatching is the sends to `to` (by via, unless "") that hold a message
// containing contains, in the order the local LINE API took them.
func sentMatching(t *testing.T, rt *Runtime, to, via, contains string) []sentMessage {
	var out []sentMessage
	for _, m := range messages(t, rt) {
		if m.To == to && (via == "" || m.Via == via) && slices.ContainsFunc(m.Messages, func(raw json.RawMessage) bool {
			return strings.Contains(string(raw), contains)
		}) {
			out = append(out, m)
		}
	}
	return out
}

func findMessage(t *testing.T, rt *Runtime, to, via, contains string) (sentMessage, bool) {
	if ms := sentMatching(t, rt, to, via, contains); len(ms) > 0 {
		return ms[0], true
	}
	return sentMessage{}, false
}

func event(t *testing.T, rt *Runtime, id string) (eventView, bool) {
	var evs []eventView
	getJSON(t, rt.URL()+"/_local/events", &evs)
	for _, e := range evs {
		if e.WebhookEventID == id {
			return e, true
		}
	}
	return eventView{}, false
}

func getQueue(t *testing.T, rt *Runtime, name string) queueViewJSON {
	var qs []queueViewJSON
	getJSON(t, rt.URL()+"/_local/queues", &qs)
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no queue %s in /_local/queues", name)
	return queueViewJSON{}
}

type queueViewJSON struct {
	Name       string `json:"name"`
	Visible    int    `json:"visible"`
	InFlight   int    `json:"inFlight"`
	DeadLetter bool   `json:"deadLetter"`
}

func getAlarm(t *testing.T, rt *Runtime, name string) string {
	var as []alarmView
	getJSON(t, rt.URL()+"/_local/alarms", &as)
	for _, a := range as {
		if a.Name == name {
			return a.State
		}
	}
	t.Fatalf("no alarm %s in /_local/alarms", name)
	return ""
}

func deliver(t *testing.T, p *lineplatform.Platform, ev json.RawMessage) string {
	t.Helper()
	d, err := p.Deliver(context.Background(), ev)
	if err != nil || !d.Delivered || d.Attempts[0].Status != 200 {
		t.Fatalf("delivery: %+v %v", d, err)
	}
	return d.WebhookEventIDs[0]
}

// The README's walkthrough, automatically: hello → echo; slow → loading then
// an answer; probe:panic → the operator's crash card; probe:fail → retries,
// DLQ, alarm, the operator's alarm card; then a redrive empties the DLQ.
func TestWalkthrough(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 120})
	const user = "U1111111111111111111111111111111a"

	t.Run("hello is echoed by reply", func(t *testing.T) {
		id := deliver(t, lp, lp.Text(user, "hello"))
		waitMessage(t, rt, 10*time.Second, user, "reply", `"hello"`)
		waitEvent(t, rt, 5*time.Second, id, "outcome ok", func(e eventView) bool { return e.Outcome == "ok" && e.Type == "message" })
	})

	t.Run("a redelivered event has its effect once", func(t *testing.T) {
		ev := lp.Text(user, "once please")
		id := deliver(t, lp, ev)
		waitMessage(t, rt, 10*time.Second, user, "", "once please")
		redelivered, err := lineplatform.MarkRedelivery(ev)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := lp.Deliver(context.Background(), redelivered); err != nil || !d.Delivered {
			t.Fatalf("%+v %v", d, err)
		}
		// The chat queue drops the redelivery (its deduplication id is the
		// webhookEventId, remembered 5 minutes, scaled here); past that window
		// the idempotency table would skip it as a duplicate. Either way: one
		// effect.
		waitEvent(t, rt, 10*time.Second, id, "the redelivery accepted, dropped or skipped, the outcome still ok", func(e eventView) bool {
			dropped := e.ReceiveCount == 1 && e.Duplicates == 0
			skipped := e.ReceiveCount == 2 && e.Duplicates == 1
			return e.Outcome == "ok" && e.Deliveries == 2 && (dropped || skipped)
		})
		fence(t, rt, lp, user, 10*time.Second) // a queued copy of the redelivery has run by now
		n := 0
		for _, m := range messages(t, rt) {
			for _, raw := range m.Messages {
				if strings.Contains(string(raw), "once please") {
					n++
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d echoes of a redelivered event, want 1", n)
		}
	})

	var panicID string
	t.Run("probe:panic sends the operator a crash card", func(t *testing.T) {
		panicID = deliver(t, lp, lp.Text(user, "probe:panic"))
		waitMessage(t, rt, 10*time.Second, DefaultOperator, "push", panicID)
	})

	t.Run("probe:fail ends in the DLQ, raises the alarm, notifies, and redrive brings it back", func(t *testing.T) {
		id := deliver(t, lp, lp.Text(user, "probe:fail"))
		waitEvent(t, rt, 30*time.Second, id, "dead-lettered after 5 receives", func(e eventView) bool {
			return e.Outcome == "dead-lettered" && e.ReceiveCount == 5 && e.DeadLetterQueue == "linegate-InteractiveDLQ.fifo"
		})
		// The DLQ holds it, and the probe:panic event, which panicked on every receive.
		eventually(t, 10*time.Second, "the DLQ to hold it", func() bool { return getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 2 })
		if !getQueue(t, rt, "linegate-InteractiveDLQ.fifo").DeadLetter || getQueue(t, rt, "linegate-InteractiveQueue.fifo").DeadLetter {
			t.Fatal("deadLetter flags wrong")
		}
		eventually(t, 10*time.Second, "the DLQ alarm", func() bool { return getAlarm(t, rt, "linegate-interactive-dlq") == StateAlarm })
		waitMessage(t, rt, 10*time.Second, DefaultOperator, "push", "linegate-interactive-dlq")

		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()), Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The worker dead-lettered them itself, so SQS knows no source queue
		// to move them back to: the redrive names it.
		res, err := redrive.Run(ctx, sqs.NewFromConfig(cfg), "linegate-InteractiveDLQ.fifo", redrive.Options{Wait: true, PollEvery: 50 * time.Millisecond,
			Destination: "linegate-InteractiveQueue.fifo"})
		if err != nil || res.Moved != 2 || res.Status != "COMPLETED" {
			t.Fatalf("redrive: %+v %v", res, err)
		}
		if q := getQueue(t, rt, "linegate-InteractiveDLQ.fifo"); q.Visible != 0 {
			t.Fatalf("DLQ still holds %d", q.Visible)
		}
		// Back in the chat queue they run again, fail again (they are probes),
		// and the worker dead-letters them again after their retries; the
		// redriven probe:panic does so without paging again: its crash marker
		// holds for 24 h.
		eventually(t, 30*time.Second, "the redriven events to run and fail again", func() bool {
			e, _ := event(t, rt, id)
			p, _ := event(t, rt, panicID)
			return e.Outcome == "dead-lettered" && p.Outcome == "dead-lettered" && e.ReceiveCount > 5 &&
				getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 2
		})
		crashCards := 0
		for _, m := range messages(t, rt) {
			for _, raw := range m.Messages {
				if m.To == DefaultOperator && strings.Contains(string(raw), "[CRASH") && strings.Contains(string(raw), panicID) {
					crashCards++
				}
			}
		}
		if crashCards != 1 {
			t.Fatalf("%d crash cards for the redriven panic %s; want the first one only", crashCards, panicID)
		}
		if _, err := redrive.Run(ctx, sqs.NewFromConfig(cfg), "linegate-InteractiveQueue.fifo", redrive.Options{}); err == nil {
			t.Fatal("redrive from a queue that is no DLQ: want an error")
		}
	})

	t.Run("slow shows the loading animation, then answers", func(t *testing.T) {
		deliver(t, lp, lp.Text(user, "probe:slow 500ms"))
		waitMessage(t, rt, 20*time.Second, user, "", testbot.SlowReply)
		var loading []struct {
			ChatID  string `json:"chatId"`
			Seconds int    `json:"loadingSeconds"`
		}
		getJSON(t, rt.URL()+"/_local/line/loading", &loading)
		if len(loading) == 0 || loading[len(loading)-1].ChatID != user || loading[len(loading)-1].Seconds != 5 {
			t.Fatalf("/_local/line/loading = %+v, want the animation shown to %s", loading, user)
		}
	})

	t.Run("follow and postback reach the background and interactive queues", func(t *testing.T) {
		deliver(t, lp, lp.Follow(user))
		deliver(t, lp, lp.Postback(user, "action=buy"))
		waitMessage(t, rt, 10*time.Second, user, "", testbot.FollowReply)
		waitMessage(t, rt, 10*time.Second, user, "", testbot.PostbackReply+"action=buy")
	})

	t.Run("bad signature is refused and nothing reaches a worker", func(t *testing.T) {
		bad := lineplatform.New(rt.WebhookURL(), []byte("wrong-secret"))
		d, _ := bad.Deliver(context.Background(), bad.Text(user, "forged"))
		if d.Attempts[0].Status != 401 {
			t.Fatalf("status %d", d.Attempts[0].Status)
		}
		fence(t, rt, lp, user, 10*time.Second) // had it been queued, it would have run before this
		if _, ok := findMessage(t, rt, user, "", "forged"); ok {
			t.Fatal("a forged webhook had an effect")
		}
	})
}

// An edit to the template changes what linegate local does: with
// maxReceiveCount 2 a failing event is dead-lettered after two receives.
func TestTemplateEditChangesBehaviour(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 120, Params: map[string]string{"MaxReceiveCount": "2"}})
	id := deliver(t, lp, lp.Text("U2222222222222222222222222222222b", "probe:fail"))
	waitEvent(t, rt, 20*time.Second, id, "dead-lettered after 2 receives", func(e eventView) bool {
		return e.Outcome == "dead-lettered" && e.ReceiveCount == 2
	})
}

// The second backend: the same pipeline against moto_server through the real
// SDK clients, resources created there from the template.
func TestEndpointBackendAgainstMoto(t *testing.T) {
	ep := motoserver.Start(t)
	rt, lp := start(t, Config{TimeScale: 1, EndpointURL: ep})
	user := "U3333333333333333333333333333333c"
	id := deliverAccepted(t, rt, lp.Text(user, "hello moto"))
	waitMessage(t, rt, 30*time.Second, user, "reply", "hello moto")
	waitEvent(t, rt, 5*time.Second, id, "outcome ok", func(e eventView) bool { return e.Outcome == "ok" })
	// A crash report travels worker → SNS (moto) → inbox queue → notifier.
	deliverAccepted(t, rt, lp.Text(user, "probe:panic"))
	waitMessage(t, rt, 30*time.Second, DefaultOperator, "push", "[CRASH]")
	// The resources exist on the endpoint, created from template.yaml.
	cfg := motoserver.Config(ep)
	out, err := sqs.NewFromConfig(cfg).ListQueues(context.Background(), &sqs.ListQueuesInput{})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(out.QueueUrls, " ")
	for _, q := range []string{"linegate-InteractiveQueue.fifo", "linegate-InteractiveDLQ.fifo", "linegate-LongQueue", "linegate-BackgroundQueue", "linegate-RuleTargetDLQ"} {
		if !strings.Contains(joined, q) {
			t.Fatalf("queue %s not created on the endpoint: %v", q, out.QueueUrls)
		}
	}
}

// A second start against the same endpoint reuses what the first created
// (the bus answers ResourceAlreadyExists, queues and topics are returned
// as they are) instead of failing.
func TestEndpointBackendSecondStartOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	first, _ := start(t, Config{TimeScale: 1, EndpointURL: ep})
	first.Close()
	second, lp := start(t, Config{TimeScale: 1, EndpointURL: ep})
	user := "U4444444444444444444444444444444d"
	deliverAccepted(t, second, lp.Text(user, "hello again"))
	eventually(t, 30*time.Second, "the echo after a second start", func() bool {
		_, ok := findMessage(t, second, user, "reply", "hello again")
		return ok
	})
}
