// Package events_test runs every sample event in this folder through the core
// it is meant for, with the settings in env.json, and checks the outcome the
// sample is documented to produce, so the files given to `sam local invoke`
// can never rot.
package events_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/cloud/pattern"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/ingress"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/template"
)

// outcome is what a sample is documented to produce. The table lives in
// expected.json, shared with internal/samcli, which checks the same outcomes
// with the real SAM CLI: `sam build`, then `sam local invoke` of each sample
// against linegate local.
type outcome struct {
	Status    int      `json:"status"`    // webhook: HTTP status
	Published int      `json:"published"` // webhook: events handed to the bus
	Failures  []string `json:"failures"`  // worker/notifier: messageIds reported as batch item failures
	Messages  int      `json:"messages"`  // worker/notifier: messages sent through the LINE API
	Cards     int      `json:"cards"`     // notifier: cards in the push (0: not checked)
	Count     int      `json:"count"`     // notifier: the coalesced count on the card (0: not checked)
}

// expected lists every sample. A new file here must be added to
// expected.json, or TestEverySampleIsCovered fails.
var expected = func() map[string]outcome {
	b, err := os.ReadFile("expected.json")
	if err != nil {
		panic(err)
	}
	var m map[string]outcome
	if err := json.Unmarshal(b, &m); err != nil {
		panic(fmt.Sprintf("expected.json: %v", err))
	}
	return m
}()

func env(t *testing.T, function string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("env.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("env.json: %v", err)
	}
	vars, ok := all[function]
	if !ok {
		t.Fatalf("env.json has no %s section", function)
	}
	return vars
}

func getenv(vars map[string]string, extra map[string]string) config.Getenv {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		return vars[k]
	}
}

func TestEverySampleIsCovered(t *testing.T) {
	files, _ := filepath.Glob("*.json")
	for _, f := range files {
		if f == "env.json" || f == "expected.json" {
			continue
		}
		if _, ok := expected[f]; !ok {
			t.Errorf("%s has no expected outcome in samples_test.go", f)
		}
	}
	for f := range expected {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("expected sample %s is missing", f)
		}
	}
}

type countingPublisher struct{ n int }

func (c *countingPublisher) Start(_ context.Context, e []eventbus.Entry) *eventbus.Publication {
	c.n += len(e)
	return eventbus.Accepted(len(e))
}

func samples(prefix string) []string {
	var out []string
	for name := range expected {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func read(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestWebhookSamples(t *testing.T) {
	cfg, err := config.LoadWebhook(getenv(env(t, "WebhookFunction"), nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range samples("webhook-") {
		t.Run(name, func(t *testing.T) {
			want := expected[name]
			var req events.APIGatewayProxyRequest
			read(t, name, &req)
			pub := &countingPublisher{}
			h, err := ingress.New(pub, ingress.WithSecrets(cfg.Secret.Value))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := h.APIGateway(context.Background(), req)
			if resp.StatusCode != want.Status || pub.n != want.Published {
				t.Fatalf("status %d published %d, want %d and %d (%s)", resp.StatusCode, pub.n, want.Status, want.Published, resp.Body)
			}
		})
	}
}

func TestWorkerSamples(t *testing.T) {
	for _, name := range samples("worker-") {
		t.Run(name, func(t *testing.T) {
			want := expected[name]
			line := linemock.New(linemock.WithAcceptUnknownReplyTokens())
			srv := httptest.NewServer(line)
			defer srv.Close()
			cfg, err := config.LoadWorker(getenv(env(t, "WorkerFunction"), map[string]string{
				"LINE_API_BASE_URL": srv.URL, "IDEMPOTENCY_TABLE": "local",
			}))
			if err != nil {
				t.Fatal(err)
			}
			p, err := workerfn.New(context.Background(), cfg, app.NewWith(app.Config{Probes: cfg.Probes}), workerfn.Deps{Store: idempotency.NewMemory()}, compose.Common{})
			if err != nil {
				t.Fatal(err)
			}
			var ev events.SQSEvent
			read(t, name, &ev)
			resp, err := p.Handle(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			if !slices.Equal(failed, want.Failures) {
				t.Fatalf("failures %v, want %v", failed, want.Failures)
			}
			if n := len(line.Messages()); n != want.Messages {
				t.Fatalf("%d messages sent, want %d", n, want.Messages)
			}
		})
	}
}

// The notifier samples are ops queue batches (SQS records whose bodies are
// SNS notifications): each pushes one card per problem to the operator, the
// burst one card with its count, and the same batch delivered again (an SQS
// redelivery) pushes nothing new: the retry key is derived from the SNS
// MessageIds and LINE answers 409.
func TestNotifierSamples(t *testing.T) {
	for _, name := range samples("notifier-") {
		t.Run(name, func(t *testing.T) {
			want := expected[name]
			line := linemock.New()
			srv := httptest.NewServer(line)
			defer srv.Close()
			cfg, err := config.LoadNotifier(getenv(env(t, "NotifierFunction"), map[string]string{"LINE_API_BASE_URL": srv.URL}))
			if err != nil {
				t.Fatal(err)
			}
			n, err := notifierfn.New(context.Background(), cfg, "ap-northeast-1", notifierfn.Deps{}, compose.Common{})
			if err != nil {
				t.Fatal(err)
			}
			var ev events.SQSEvent
			read(t, name, &ev)
			for delivery := 1; delivery <= 2; delivery++ {
				resp, err := n.HandleQueue(context.Background(), ev)
				if err != nil {
					t.Fatalf("delivery %d: %v", delivery, err)
				}
				failed := []string{}
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				if !slices.Equal(failed, want.Failures) {
					t.Fatalf("delivery %d: failures %v, want %v", delivery, failed, want.Failures)
				}
			}
			msgs := line.Messages()
			if len(msgs) != want.Messages {
				t.Fatalf("%d pushes recorded after two deliveries, want %d", len(msgs), want.Messages)
			}
			if msgs[0].To != cfg.Operators[0] || msgs[0].Via != "push" || msgs[0].RetryKey == "" {
				t.Fatalf("push %+v", msgs[0])
			}
			if line.Calls()[linemock.Call{Path: "/v2/bot/message/push", Status: 409}] != 1 {
				t.Fatalf("the second delivery should be answered 409: %v", line.Calls())
			}
			if want.Cards > 0 && len(msgs[0].Messages) != want.Cards {
				t.Fatalf("%d cards, want %d", len(msgs[0].Messages), want.Cards)
			}
			if want.Count > 0 && !strings.Contains(string(msgs[0].Messages[0]), fmt.Sprintf("×%d", want.Count)) {
				t.Fatalf("card lacks the count ×%d: %s", want.Count, msgs[0].Messages[0])
			}
		})
	}
}

// topology is template.yaml as linegate local evaluates it.
func topology(t *testing.T) *template.Topology {
	t.Helper()
	top, err := template.Load(filepath.Join("..", "template.yaml"), local.TemplateParams(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// queueOf is the logical id of the queue whose name is the last part of an
// SQS ARN, allowing CloudFormation's random suffix
// (linegate-InteractiveQueue-8XKQ2M1ZP0A4).
func queueOf(top *template.Topology, arn string) string {
	// A deployed queue is named <stack>-<LogicalId>-<suffix>[.fifo].
	name := strings.TrimSuffix(arn[strings.LastIndex(arn, ":")+1:], ".fifo")
	for _, q := range top.Queues {
		if qn := strings.TrimSuffix(q.Name, ".fifo"); name == qn || strings.HasPrefix(name, qn+"-") {
			return q.LogicalID
		}
	}
	return ""
}

// TestSQSSamplesAgreeWithTheTemplate checks what SQS and EventBridge would
// really hand the worker: md5OfBody is the body's MD5 (so no two samples
// share one), and the queue a record came from is the one the template's
// rules route its event to.
func TestSQSSamplesAgreeWithTheTemplate(t *testing.T) {
	top := topology(t)
	workers, _ := filepath.Glob("worker-*.json")
	notifiers, _ := filepath.Glob("notifier-*.json")
	seen := map[string]string{}
	for _, f := range append(workers, notifiers...) {
		var ev events.SQSEvent
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, r := range ev.Records {
			sum := md5.Sum([]byte(r.Body))
			if want := hex.EncodeToString(sum[:]); r.Md5OfBody != want {
				t.Errorf("%s record %d: md5OfBody %s, the body's MD5 is %s", f, i, r.Md5OfBody, want)
			}
			if other, dup := seen[r.Md5OfBody]; dup {
				t.Errorf("%s record %d has the same body as %s", f, i, other)
			}
			seen[r.Md5OfBody] = f
			if slices.Contains(expected[f].Failures, r.MessageId) {
				continue // a poison record: sent by hand, nothing would route it
			}
			from := queueOf(top, r.EventSourceARN)
			if from == "" {
				t.Errorf("%s record %d: eventSourceARN %s is no queue of the template", f, i, r.EventSourceARN)
				continue
			}
			if routed := routes(t, top, r.Body, strings.HasPrefix(f, "notifier-")); len(routed) != 1 || routed[0] != from {
				t.Errorf("%s record %d comes from %s, but the template routes it to %v", f, i, from, routed)
			}
		}
	}
}

// routes lists the queues the template delivers body to: the targets of the
// rules whose pattern matches a bus event, or the queues subscribed to the
// topic an SNS notification came from.
func routes(t *testing.T, top *template.Topology, body string, fromTopic bool) []string {
	t.Helper()
	var routed []string
	if fromTopic {
		var n struct{ TopicArn string }
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			t.Fatalf("not an SNS notification: %v", err)
		}
		name := n.TopicArn[strings.LastIndex(n.TopicArn, ":")+1:]
		for _, s := range top.Subscriptions {
			// A deployed topic is named <stack>-<LogicalId>-<suffix>.
			if strings.Contains(name, "-"+s.Topic+"-") {
				routed = append(routed, s.Queue)
			}
		}
		return routed
	}
	// An event with a chat goes from the webhook straight to its chat queue
	// (docs/adr/0001); the bus's rules route the rest.
	var d struct {
		Detail struct{ Chat string } `json:"detail"`
	}
	if json.Unmarshal([]byte(body), &d) == nil && d.Detail.Chat != "" {
		for _, f := range top.Functions {
			if u := f.Env["CHAT_QUEUE_URL"]; u != "" {
				routed = append(routed, queueOf(top, u[strings.LastIndex(u, "/")+1:]))
			}
		}
		return routed
	}
	for _, rule := range top.Rules {
		p, err := pattern.Compile(rule.Pattern)
		if err != nil {
			t.Fatalf("rule %s: %v", rule.LogicalID, err)
		}
		if p.Match([]byte(body)) {
			for _, tg := range rule.Targets {
				routed = append(routed, tg.QueueLogicalID)
			}
		}
	}
	return routed
}

// TestSNSSamplesAgreeWithTheTemplate checks the notifier's samples: the alarm
// is one of the template's (name, threshold, comparison), and a crash report
// has the subject the worker publishes it with.
func TestSNSSamplesAgreeWithTheTemplate(t *testing.T) {
	top := topology(t)
	read := func(name string) map[string]any {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(b, &ev); err != nil || len(ev.Records) != 1 {
			t.Fatalf("%s: %v (%d records)", name, err, len(ev.Records))
		}
		var n map[string]any // the SNS notification the OpsQueue holds
		if err := json.Unmarshal([]byte(ev.Records[0].Body), &n); err != nil {
			t.Fatalf("%s: body is not an SNS notification: %v", name, err)
		}
		return n
	}
	// The worker publishes a crash report with the subject "linegate crash:
	// <event type>" (internal/worker); SNS's notification carries that subject, and
	// none at all for a message published without one, never "".
	crash := read("notifier-crash-report.json")
	var report struct{ EventType string }
	if err := json.Unmarshal([]byte(crash["Message"].(string)), &report); err != nil {
		t.Fatal(err)
	}
	if s, want := crash["Subject"], "linegate crash: "+report.EventType; s != want {
		t.Errorf("crash report Subject = %#v, want %q as the worker publishes it", s, want)
	}
	alarm := read("notifier-alarm.json")
	var msg struct {
		AlarmName string
		Trigger   struct {
			ComparisonOperator string
			Threshold          float64
			MetricName         string
		}
	}
	if err := json.Unmarshal([]byte(alarm["Message"].(string)), &msg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range top.Alarms {
		if a.Name != msg.AlarmName {
			continue
		}
		found = true
		if a.Threshold != msg.Trigger.Threshold || a.ComparisonOperator != msg.Trigger.ComparisonOperator || a.MetricName != msg.Trigger.MetricName {
			t.Errorf("alarm %s: sample says %s %s %v, the template %s %s %v", a.Name,
				msg.Trigger.MetricName, msg.Trigger.ComparisonOperator, msg.Trigger.Threshold, a.MetricName, a.ComparisonOperator, a.Threshold)
		}
	}
	if !found {
		t.Errorf("the sample's alarm %q is not in the template", msg.AlarmName)
	}
	if subj, _ := alarm["Subject"].(string); !strings.Contains(subj, `"`+msg.AlarmName+`"`) {
		t.Errorf("alarm Subject %q does not name %s", subj, msg.AlarmName)
	}
}
