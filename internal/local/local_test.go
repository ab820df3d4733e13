package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/pkg/app"
	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/redrive"
)

const testTemplate = "../../template.yaml"

// syncBuffer collects the console output of a runtime.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, cfg Config) (*Runtime, *lineplatform.Platform) {
	t.Helper()
	if cfg.Template == "" {
		cfg.Template = testTemplate
	}
	cfg.Addr = "127.0.0.1:0"
	if cfg.Bot == nil {
		cfg.Bot = func(c config.Worker) *bot.Router { return app.New(app.Config{Probes: c.Probes}) }
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	out := &syncBuffer{}
	cfg.Out = out
	if os.Getenv("LOCAL_TEST_LOGS") != "" {
		cfg.Logs = os.Stderr
	}
	rt, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt.Close()
		if t.Failed() {
			t.Logf("console:\n%s", out.String())
		}
	})
	return rt, lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret))
}

type sentMessage struct {
	To       string            `json:"to"`
	Via      string            `json:"via"`
	RetryKey string            `json:"retryKey"`
	Messages []json.RawMessage `json:"messages"`
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
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

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func messages(t *testing.T, rt *Runtime) []sentMessage {
	var out []sentMessage
	getJSON(t, rt.URL()+"/_local/line/messages", &out)
	return out
}

func findMessage(t *testing.T, rt *Runtime, to, via, contains string) (sentMessage, bool) {
	for _, m := range messages(t, rt) {
		if m.To == to && (via == "" || m.Via == via) {
			for _, raw := range m.Messages {
				if strings.Contains(string(raw), contains) {
					return m, true
				}
			}
		}
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
		eventually(t, 10*time.Second, "the echo", func() bool { _, ok := findMessage(t, rt, user, "reply", `"hello"`); return ok })
		eventually(t, 5*time.Second, "outcome ok", func() bool { e, _ := event(t, rt, id); return e.Outcome == "ok" && e.Type == "message" })
	})

	t.Run("a redelivered event has its effect once", func(t *testing.T) {
		ev := lp.Text(user, "once please")
		id := deliver(t, lp, ev)
		eventually(t, 10*time.Second, "the echo", func() bool { _, ok := findMessage(t, rt, user, "", "once please"); return ok })
		redelivered, err := lineplatform.MarkRedelivery(ev)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := lp.Deliver(context.Background(), redelivered); err != nil || !d.Delivered {
			t.Fatalf("%+v %v", d, err)
		}
		eventually(t, 10*time.Second, "the duplicate to be processed", func() bool {
			var evs []eventView
			getJSON(t, rt.URL()+"/_local/events", &evs)
			return strings.Contains(fmt.Sprint(evs), id)
		})
		time.Sleep(500 * time.Millisecond)
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

	t.Run("probe:panic sends the operator a crash card", func(t *testing.T) {
		id := deliver(t, lp, lp.Text(user, "probe:panic"))
		eventually(t, 10*time.Second, "the crash card", func() bool {
			m, ok := findMessage(t, rt, DefaultOperator, "push", "[CRASH]")
			return ok && strings.Contains(string(m.Messages[0]), id)
		})
	})

	t.Run("probe:fail ends in the DLQ, raises the alarm, notifies, and redrive brings it back", func(t *testing.T) {
		id := deliver(t, lp, lp.Text(user, "probe:fail"))
		eventually(t, 30*time.Second, "dead-lettered", func() bool {
			e, _ := event(t, rt, id)
			return e.Outcome == "dead-lettered" && e.ReceiveCount == 5
		})
		// The DLQ holds it, and the probe:panic event, which panicked on every receive.
		eventually(t, 10*time.Second, "the DLQ to hold it", func() bool { return getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 2 })
		if !getQueue(t, rt, "linegate-InteractiveDLQ.fifo").DeadLetter || getQueue(t, rt, "linegate-InteractiveQueue.fifo").DeadLetter {
			t.Fatal("deadLetter flags wrong")
		}
		eventually(t, 10*time.Second, "the DLQ alarm", func() bool { return getAlarm(t, rt, "linegate-interactive-dlq") == StateAlarm })
		eventually(t, 10*time.Second, "the alarm card", func() bool {
			_, ok := findMessage(t, rt, DefaultOperator, "push", "linegate-interactive-dlq")
			return ok
		})

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
		// and the worker dead-letters them again after their retries.
		eventually(t, 10*time.Second, "the redriven events to run and fail again", func() bool {
			e, _ := event(t, rt, id)
			return e.Outcome == "dead-lettered" && getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 2
		})
		if _, err := redrive.Run(ctx, sqs.NewFromConfig(cfg), "linegate-InteractiveQueue.fifo", redrive.Options{}); err == nil {
			t.Fatal("redrive from a queue that is no DLQ: want an error")
		}
	})

	t.Run("slow shows the loading animation, then answers", func(t *testing.T) {
		deliver(t, lp, lp.Text(user, "slow report"))
		eventually(t, 20*time.Second, "the slow answer", func() bool { _, ok := findMessage(t, rt, user, "", "Done with report"); return ok })
		if len(rt.LINE().Loading()) == 0 {
			t.Fatal("no loading animation was shown")
		}
	})

	t.Run("follow and postback reach the background and interactive queues", func(t *testing.T) {
		deliver(t, lp, lp.Follow(user))
		deliver(t, lp, lp.Postback(user, "action=buy"))
		eventually(t, 10*time.Second, "greeting and postback answer", func() bool {
			_, a := findMessage(t, rt, user, "", "Thanks for adding me")
			_, b := findMessage(t, rt, user, "", "You chose: action=buy")
			return a && b
		})
	})

	t.Run("bad signature is refused and nothing reaches a worker", func(t *testing.T) {
		bad := lineplatform.New(rt.WebhookURL(), []byte("wrong-secret"))
		d, _ := bad.Deliver(context.Background(), bad.Text(user, "forged"))
		if d.Attempts[0].Status != 401 {
			t.Fatalf("status %d", d.Attempts[0].Status)
		}
		time.Sleep(300 * time.Millisecond)
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
	eventually(t, 20*time.Second, "dead-lettered after 2 receives", func() bool {
		e, _ := event(t, rt, id)
		return e.Outcome == "dead-lettered" && e.ReceiveCount == 2
	})
}

// The second backend: the same pipeline against moto_server through the real
// SDK clients, resources created there from the template.
func TestEndpointBackendAgainstMoto(t *testing.T) {
	ep := motoserver.Start(t)
	rt, lp := start(t, Config{TimeScale: 1, EndpointURL: ep})
	user := "U3333333333333333333333333333333c"
	id := deliver(t, lp, lp.Text(user, "hello moto"))
	eventually(t, 30*time.Second, "the echo through moto's EventBridge and SQS", func() bool {
		_, ok := findMessage(t, rt, user, "reply", "hello moto")
		return ok
	})
	eventually(t, 5*time.Second, "outcome ok", func() bool { e, _ := event(t, rt, id); return e.Outcome == "ok" })
	// A crash report travels worker → SNS (moto) → inbox queue → notifier.
	deliver(t, lp, lp.Text(user, "probe:panic"))
	eventually(t, 30*time.Second, "the crash card through moto's SNS", func() bool {
		_, ok := findMessage(t, rt, DefaultOperator, "push", "[CRASH]")
		return ok
	})
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
