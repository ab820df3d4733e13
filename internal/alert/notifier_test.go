package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/testmetrics"
)

const (
	opUser  = "U4af4980629a0e3c1b2d5f6e7a8b9c0d1"
	opGroup = "C0123456789abcdef0123456789abcdef"
	opRoom  = "Rfedcba9876543210fedcba9876543210"
)

// pushCall is one Push as the fake saw it, messages as LINE would get them.
type pushCall struct {
	To       string          `json:"to"`
	RetryKey string          `json:"retryKey"`
	Messages json.RawMessage `json:"messages"`
}

type fakePusher struct {
	mu       sync.Mutex
	calls    []pushCall
	fail     map[string]error // by operator
	failCall map[int]error    // by call index (0-based)
}

func (f *fakePusher) Push(_ context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error {
	b, err := json.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("fake: marshal: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, pushCall{To: to, RetryKey: retryKey, Messages: b})
	if err := f.failCall[len(f.calls)-1]; err != nil {
		return err
	}
	return f.fail[to]
}

func (f *fakePusher) to(op string) []pushCall {
	var out []pushCall
	for _, c := range f.calls {
		if c.To == op {
			out = append(out, c)
		}
	}
	return out
}

func newTestNotifier(t *testing.T, ops []string, opts ...Option) (*Notifier, *fakePusher, *bytes.Buffer) {
	t.Helper()
	p := &fakePusher{}
	logs := &bytes.Buffer{}
	opts = append([]Option{WithLogger(slog.New(slog.NewJSONHandler(logs, nil)))}, opts...)
	n, err := New(p, ops, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return n, p, logs
}

func loadEvent(t *testing.T, name string) events.SNSEvent {
	t.Helper()
	b := golden.Read(t, filepath.Join("testdata", name+".json"))
	var ev events.SNSEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// messagesOf decodes the messages of a push into generic JSON.
func messagesOf(t *testing.T, c pushCall) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(c.Messages, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var goldenCases = []string{
	"alarm-alarm", "alarm-ok", "alarm-insufficient",
	"crash-trace", "crash-notrace", "oversized",
	"sdk-alarm-single-metric", "sdk-alarm-multiple-metrics",
}

func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			n, p, _ := newTestNotifier(t, []string{opUser})
			if err := n.Handle(context.Background(), loadEvent(t, name)); err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(p.calls, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", name+".golden.json"), got)
		})
	}
}

// dig walks generic JSON: dig(v, "contents", "header", "backgroundColor").
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: %T is not an object", k, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: not an array with that index: %v", k, v)
			}
			v = a[k]
		}
	}
	return v
}

// texts collects every "text" of a Flex tree, in order.
func texts(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["text"].(string); ok && x["type"] == "text" {
			out = append(out, s)
		}
		for _, k := range []string{"header", "hero", "body", "footer", "contents"} {
			out = append(out, texts(x[k])...)
		}
	case []any:
		for _, e := range x {
			out = append(out, texts(e)...)
		}
	}
	return out
}

func TestAlarmCards(t *testing.T) {
	tests := []struct {
		event, color, badge, change, resource, time, uri, alt string
	}{
		{"alarm-alarm", "#D93025", "ALARM", "OK → ALARM", "linegate-InteractiveDLQ-8XKQ2M1ZP0A4", "2026-03-14 10:02:03 JST",
			"https://ap-northeast-1.console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1#alarmsV2:alarm/linegate-InteractiveDLQ-NotEmpty",
			"[ALARM] linegate-InteractiveDLQ-NotEmpty: OK → ALARM"},
		{"alarm-ok", "#1E8E3E", "OK", "ALARM → OK", "linegate-WorkerFunction-Ab12Cd34Ef56", "2026-03-14 10:32:05 JST",
			"https://ap-northeast-1.console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1#alarmsV2:alarm/linegate-Worker-Errors",
			"[OK] linegate-Worker-Errors: ALARM → OK"},
		{"alarm-insufficient", "#80868B", "INSUFFICIENT_DATA", "OK → INSUFFICIENT_DATA", "linegate-webhook", "2026-03-14 11:00:01 JST",
			"https://ap-northeast-1.console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1#alarmsV2:alarm/linegate-Webhook-5XX",
			"[INSUFFICIENT_DATA] linegate-Webhook-5XX: OK → INSUFFICIENT_DATA"},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			n, p, _ := newTestNotifier(t, []string{opUser})
			if err := n.Handle(context.Background(), loadEvent(t, tt.event)); err != nil {
				t.Fatal(err)
			}
			if len(p.calls) != 1 {
				t.Fatalf("%d pushes, want 1", len(p.calls))
			}
			msgs := messagesOf(t, p.calls[0])
			if len(msgs) != 1 || msgs[0]["type"] != "flex" {
				t.Fatalf("messages = %v, want one flex message", msgs)
			}
			m := msgs[0]
			if got := dig(t, m, "contents", "header", "backgroundColor"); got != tt.color {
				t.Errorf("header colour = %v, want %s", got, tt.color)
			}
			if got := m["altText"]; got != tt.alt {
				t.Errorf("altText = %q, want %q", got, tt.alt)
			}
			all := strings.Join(texts(m["contents"]), "\n")
			for _, want := range []string{tt.badge, tt.change, tt.resource, tt.time} {
				if !strings.Contains(all, want) {
					t.Errorf("card texts lack %q:\n%s", want, all)
				}
			}
			if got := dig(t, m, "contents", "footer", "contents", 0, "action", "uri"); got != tt.uri {
				t.Errorf("button uri = %v, want %s", got, tt.uri)
			}
		})
	}
}

func TestCrashCards(t *testing.T) {
	t.Run("with trace", func(t *testing.T) {
		n, p, _ := newTestNotifier(t, []string{opUser})
		if err := n.Handle(context.Background(), loadEvent(t, "crash-trace")); err != nil {
			t.Fatal(err)
		}
		m := messagesOf(t, p.calls[0])[0]
		if got, want := dig(t, m, "contents", "footer", "contents", 0, "action", "uri"),
			"https://ap-northeast-1.console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1#xray:traces/1-5759e988-bd862e3fe1be46a994272793"; got != want {
			t.Errorf("trace uri = %v, want %s", got, want)
		}
		all := texts(m["contents"])
		joined := strings.Join(all, "\n")
		for _, want := range []string{"CRASH", "runtime error: index out of range [5] with length 0", "message",
			"01FZ74A0TDDPYRVKNK77XKC3ZR", "linegate-WorkerFunction-Ab12Cd34Ef56", "2026-03-14 10:02:03 JST"} {
			if !strings.Contains(joined, want) {
				t.Errorf("card lacks %q:\n%s", want, joined)
			}
		}
		stack := all[len(all)-1]
		lines := strings.Split(stack, "\n")
		if lines[0] != "github.com/Example2/LineGateBot/internal/handlers.(*Handler).OnMessage-fm.(*Handler).OnMessage.func1" ||
			lines[1] != "  handlers/h.go:11" {
			t.Errorf("stack should start at the panicking frame, got:\n%s", stack)
		}
		if strings.Contains(stack, "runtime/debug") || strings.Contains(stack, "panic.go") {
			t.Errorf("stack shows recovery frames:\n%s", stack)
		}
	})
	t.Run("without trace", func(t *testing.T) {
		n, p, _ := newTestNotifier(t, []string{opUser})
		if err := n.Handle(context.Background(), loadEvent(t, "crash-notrace")); err != nil {
			t.Fatal(err)
		}
		m := messagesOf(t, p.calls[0])[0]
		if footer := dig(t, m, "contents").(map[string]any)["footer"]; footer != nil {
			t.Errorf("footer = %v, want none without a trace ID", footer)
		}
		if got := m["altText"]; got != "[CRASH] linegate-WorkerFunction-Ab12Cd34Ef56: assignment to entry in nil map" {
			t.Errorf("altText = %q", got)
		}
	})
}

func TestTimeZoneAndRegionOptions(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser}, WithTimeZone(time.UTC), WithRegion("us-west-2"))
	if err := n.Handle(context.Background(), loadEvent(t, "alarm-alarm")); err != nil {
		t.Fatal(err)
	}
	m := messagesOf(t, p.calls[0])[0]
	if all := strings.Join(texts(m["contents"]), "\n"); !strings.Contains(all, "2026-03-14 01:02:03 UTC") {
		t.Errorf("time not shown in UTC:\n%s", all)
	}
	uri := dig(t, m, "contents", "footer", "contents", 0, "action", "uri").(string)
	if !strings.HasPrefix(uri, "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2#") {
		t.Errorf("uri = %s, want the configured region", uri)
	}
}

func TestRegionFallbacks(t *testing.T) {
	ev := loadEvent(t, "crash-trace")
	var r map[string]any
	if err := json.Unmarshal([]byte(ev.Records[0].SNS.Message), &r); err != nil {
		t.Fatal(err)
	}
	r["region"] = "evil.example.com/#"
	b, _ := json.Marshal(r)
	ev.Records[0].SNS.Message = string(b)
	n, p, _ := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	uri := dig(t, messagesOf(t, p.calls[0])[0], "contents", "footer", "contents", 0, "action", "uri").(string)
	if !strings.HasPrefix(uri, "https://ap-northeast-1.console.aws.amazon.com/") {
		t.Errorf("uri = %s, want the topic ARN's region instead of an invalid one", uri)
	}

	// The aws-lambda-go sample has placeholder ARNs: no region, no button.
	n, p, _ = newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), loadEvent(t, "sdk-alarm-single-metric")); err != nil {
		t.Fatal(err)
	}
	if footer := dig(t, messagesOf(t, p.calls[0])[0], "contents").(map[string]any)["footer"]; footer != nil {
		t.Errorf("footer = %v, want none without a region", footer)
	}
}

func TestSecretsNeverReachThePusher(t *testing.T) {
	token := strings.Repeat("Ab3+xY9/", 21) + "zz=" // shaped like a channel access token
	secrets := []string{token, "AKIAIOSFODNN7EXAMPLE", "8f3c0d6b2a9e4f1c7b5d0e2a4c6f8b1d", "sk-bearer-value"}
	built := crash.New(fmt.Sprintf("LINE 401 with token %s", token),
		[]byte("goroutine 1 [running]:\nmain.f()\n\t/src/main.go:3 +0x1d\n"), crash.WithTime(time.Now()))
	builtBody, err := built.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// A report from an older worker that did not scrub: the notifier scrubs again.
	raw, _ := json.Marshal(map[string]any{
		"error": "panic: token " + token + " key AKIAIOSFODNN7EXAMPLE secret 8f3c0d6b2a9e4f1c7b5d0e2a4c6f8b1d",
		"stack": "goroutine 1 [running]:\nmain.f({0x1, 0x2})\n\tAuthorization: Bearer sk-bearer-value\n\t/src/main.go:3 +0x1d\n",
		"time":  "2026-03-14T01:02:03Z",
	})
	attrs := map[string]any{crash.AttributeKind: map[string]any{"Type": "String", "Value": crash.KindCrash}}
	ev := events.SNSEvent{Records: []events.SNSEventRecord{
		{SNS: events.SNSEntity{MessageID: "m1", Message: string(builtBody), MessageAttributes: attrs}},
		{SNS: events.SNSEntity{MessageID: "m2", Message: string(raw), MessageAttributes: attrs}},
	}}
	n, p, logs := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 1 || len(messagesOf(t, p.calls[0])) != 2 {
		t.Fatalf("pushes = %d, want one push of two cards", len(p.calls))
	}
	for _, s := range secrets {
		if bytes.Contains(p.calls[0].Messages, []byte(s)) {
			t.Errorf("secret %q reached the pusher:\n%s", s, p.calls[0].Messages)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("secret %q was logged", s)
		}
	}
	if !bytes.Contains(p.calls[0].Messages, []byte(crash.Redacted)) {
		t.Error("no redaction marker: the test did not exercise scrubbing")
	}
}

func TestSeveralOperatorsGetTheSameCardsUnderDifferentKeys(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser, opGroup, opRoom, opUser})
	if err := n.Handle(context.Background(), loadEvent(t, "alarm-alarm")); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 3 {
		t.Fatalf("%d pushes, want 3 (one per distinct operator)", len(p.calls))
	}
	keys := map[string]bool{}
	for i, op := range []string{opUser, opGroup, opRoom} {
		c := p.calls[i]
		if c.To != op {
			t.Errorf("push %d to %s, want %s", i, c.To, op)
		}
		if !bytes.Equal(c.Messages, p.calls[0].Messages) {
			t.Errorf("operator %s got different messages", op)
		}
		keys[c.RetryKey] = true
	}
	if len(keys) != 3 {
		t.Errorf("retry keys %v are not distinct per operator", keys)
	}
}

// burst returns an SNS event of n ALARM records with distinct message IDs.
func burst(t *testing.T, n int, idPrefix string) events.SNSEvent {
	t.Helper()
	base := loadEvent(t, "alarm-alarm").Records[0]
	var ev events.SNSEvent
	for i := range n {
		r := base
		r.SNS.MessageID = fmt.Sprintf("%s-%02d", idPrefix, i)
		r.SNS.Message = strings.Replace(base.SNS.Message, "linegate-InteractiveDLQ-NotEmpty", fmt.Sprintf("alarm-%02d", i), 2)
		ev.Records = append(ev.Records, r)
	}
	return ev
}

func TestBurstIsCoalescedIntoPushesOfFive(t *testing.T) {
	m := &testmetrics.Recorder{}
	n, p, _ := newTestNotifier(t, []string{opUser, opGroup}, WithMetrics(m))
	if err := n.Handle(context.Background(), burst(t, 12, "burst")); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{opUser, opGroup} {
		calls := p.to(op)
		if len(calls) != 3 {
			t.Fatalf("operator %s: %d pushes, want 3", op, len(calls))
		}
		var names []string
		for i, c := range calls {
			msgs := messagesOf(t, c)
			if want := []int{5, 5, 2}[i]; len(msgs) != want {
				t.Errorf("push %d carries %d messages, want %d", i, len(msgs), want)
			}
			for _, msg := range msgs {
				names = append(names, texts(msg["contents"])[1])
			}
		}
		for i, name := range names {
			if want := fmt.Sprintf("alarm-%02d", i); name != want {
				t.Errorf("card %d is %q, want %q (record order)", i, name, want)
			}
		}
	}
	if m.Total(MetricRecords) != 12 || m.Total(MetricAlarms) != 12 || m.Total(MetricPushes) != 6 || m.Observations(MetricPushDuration) != 6 {
		t.Errorf("metrics = %v", m.Counts())
	}
}

func TestRetryKeys(t *testing.T) {
	run := func(ev events.SNSEvent) []string {
		n, p, _ := newTestNotifier(t, []string{opUser, opGroup})
		if err := n.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, c := range p.calls {
			keys = append(keys, c.RetryKey)
		}
		return keys
	}
	first := run(burst(t, 7, "msg"))
	redelivered := run(burst(t, 7, "msg"))
	other := run(burst(t, 7, "other"))
	if len(first) != 4 {
		t.Fatalf("%d pushes, want 4 (2 chunks × 2 operators)", len(first))
	}
	seen := map[string]bool{}
	for i := range first {
		if first[i] != redelivered[i] {
			t.Errorf("push %d: key %s on redelivery, want %s", i, redelivered[i], first[i])
		}
		if first[i] == other[i] {
			t.Errorf("push %d: other SNS messages got the same key %s", i, first[i])
		}
		u, err := uuid.Parse(first[i])
		if err != nil || u.Version() != 5 {
			t.Errorf("key %q is not a UUID v5: %v", first[i], err)
		}
		seen[first[i]] = true
	}
	if len(seen) != 4 {
		t.Errorf("keys %v are not distinct across chunks and operators", first)
	}
}

func TestMalformedRecordsAreSkipped(t *testing.T) {
	crashAttr := map[string]any{crash.AttributeKind: map[string]any{"Type": "String", "Value": crash.KindCrash}}
	tests := []struct {
		name, body string
		attrs      map[string]any
		wantLog    string
	}{
		{"not json", "user said: my secret diary text", nil, "not a JSON object"},
		{"empty", "", nil, "not a JSON object"},
		{"broken json", `{"AlarmName": "x", `, nil, "CloudWatch alarm JSON"},
		{"json but not an alarm", `{"hello":"user said: my secret diary text"}`, nil, "missing AlarmName, NewStateValue"},
		{"alarm without state", `{"AlarmName":"a"}`, nil, "missing NewStateValue"},
		{"crash that fails parse", `{"stack":"user said: my secret diary text"}`, crashAttr, "missing error, time"},
		{"crash not json", `user said: my secret diary text`, crashAttr, "invalid crash report"},
		{"unknown kind", `{"error":"x","time":"2026-03-14T01:02:03Z"}`,
			map[string]any{crash.AttributeKind: map[string]any{"Type": "String", "Value": "metrics"}}, `unknown linegate-kind \"metrics\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			n, p, logs := newTestNotifier(t, []string{opUser}, WithMetrics(m))
			ev := events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
				MessageID: "bad-1", Message: tt.body, MessageAttributes: tt.attrs}}}}
			if err := n.Handle(context.Background(), ev); err != nil {
				t.Fatalf("Handle = %v, want nil: retrying garbage helps nobody", err)
			}
			if len(p.calls) != 0 {
				t.Errorf("%d pushes for a malformed record", len(p.calls))
			}
			out := logs.String()
			if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "bad-1") || !strings.Contains(out, tt.wantLog) {
				t.Errorf("log lacks an error naming the record and %q:\n%s", tt.wantLog, out)
			}
			if strings.Contains(out, "secret diary") {
				t.Errorf("message text was logged:\n%s", out)
			}
			if m.Total(MetricMalformed) != 1 {
				t.Errorf("malformed count = %v, want 1", m.Total(MetricMalformed))
			}
		})
	}
}

func TestMalformedRecordDoesNotBlockTheOthers(t *testing.T) {
	ev := loadEvent(t, "alarm-alarm")
	ev.Records = append([]events.SNSEventRecord{{SNS: events.SNSEntity{MessageID: "bad", Message: "garbage"}}}, ev.Records...)
	n, p, _ := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 1 || len(messagesOf(t, p.calls[0])) != 1 {
		t.Fatalf("pushes = %+v, want one push with the one good card", p.calls)
	}
}

func TestPushFailureForOneOperator(t *testing.T) {
	errLINE := errors.New("line: 500 internal error")
	m := &testmetrics.Recorder{}
	n, p, logs := newTestNotifier(t, []string{opUser, opGroup}, WithMetrics(m))
	p.fail = map[string]error{opUser: errLINE}
	err := n.Handle(context.Background(), burst(t, 6, "f"))
	if !errors.Is(err, errLINE) {
		t.Fatalf("Handle = %v, want the push error so SNS retries", err)
	}
	if !strings.Contains(err.Error(), opUser) || strings.Contains(err.Error(), opGroup) {
		t.Errorf("error %q should name the failing operator only", err)
	}
	if got := len(p.to(opUser)); got != 2 {
		t.Errorf("failing operator: %d attempts, want 2 (every chunk still tried)", got)
	}
	if got := len(p.to(opGroup)); got != 2 {
		t.Errorf("other operator: %d pushes, want 2", got)
	}
	if m.Total(MetricPushErrors) != 2 || m.Total(MetricPushes) != 2 {
		t.Errorf("metrics = %v", m.Counts())
	}
	if !strings.Contains(logs.String(), "push failed") {
		t.Errorf("failure not logged:\n%s", logs)
	}
}

func TestEmptyEvent(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), events.SNSEvent{}); err != nil || len(p.calls) != 0 {
		t.Errorf("Handle(empty) = %v with %d pushes, want nil and none", err, len(p.calls))
	}
}

func TestNew(t *testing.T) {
	p := &fakePusher{}
	tests := []struct {
		name    string
		p       pusher
		ops     []string
		opts    []Option
		wantErr error
		wantOps []string
	}{
		{"ok", p, []string{opUser, opGroup, opRoom}, nil, nil, []string{opUser, opGroup, opRoom}},
		{"trims and dedupes", p, []string{" " + opUser, opUser, ""}, nil, nil, []string{opUser}},
		{"no operators", p, nil, nil, ErrNoOperators, nil},
		{"only blanks", p, []string{"", " "}, nil, ErrNoOperators, nil},
		{"lower-case prefix", p, []string{"u4af4980629a0e3c1b2d5f6e7a8b9c0d1"}, nil, ErrBadOperator, nil},
		{"upper-case hex", p, []string{"U4AF4980629A0E3C1B2D5F6E7A8B9C0D1"}, nil, ErrBadOperator, nil},
		{"too short", p, []string{opUser[:32]}, nil, ErrBadOperator, nil},
		{"unknown prefix", p, []string{"X" + opUser[1:]}, nil, ErrBadOperator, nil},
		{"one bad among good", p, []string{opUser, "nobody"}, nil, ErrBadOperator, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := New(tt.p, tt.ops, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && strings.Join(n.operators, ",") != strings.Join(tt.wantOps, ",") {
				t.Errorf("operators = %v, want %v", n.operators, tt.wantOps)
			}
		})
	}
	if _, err := New(nil, []string{opUser}); err == nil {
		t.Error("New(nil pusher) succeeded")
	}
	if _, err := New(p, []string{opUser}, WithRegion("evil.com/#")); err == nil {
		t.Error("New accepted a region that is not a region name")
	}
	n, err := New(p, []string{opUser})
	if err != nil {
		t.Fatal(err)
	}
	if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).In(n.loc).Zone(); off != 9*3600 {
		t.Errorf("default zone offset = %d, want +9h (Asia/Tokyo)", off)
	}
}

// buttonsOf returns the label and data of every postback button of a pushed
// Flex card.
func buttonsOf(t *testing.T, c pushCall) map[string]string {
	t.Helper()
	var msgs []struct {
		Contents struct {
			Footer struct {
				Contents []struct {
					Action struct {
						Type  string `json:"type"`
						Label string `json:"label"`
						Data  string `json:"data"`
					} `json:"action"`
				} `json:"contents"`
			} `json:"footer"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(c.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Contents.Footer.Contents {
			if b.Action.Type == "postback" {
				out[b.Action.Label] = b.Action.Data
			}
		}
	}
	return out
}

// A DLQ alarm card carries Redrive, Silence 1 h and Acknowledge, each with
// data the stack signed for exactly that action and target; an OK card and
// an alarm on another queue carry no Redrive.
func TestDLQAlarmCardCarriesSignedButtons(t *testing.T) {
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), nil)
	const dlq = "linegate-InteractiveDLQ-8XKQ2M1ZP0A4"
	tests := []struct {
		name    string
		event   string
		dlqs    []string
		want    map[string][2]string // label -> action, target
		without []string
	}{
		{"dlq alarm", "alarm-alarm", []string{dlq}, map[string][2]string{
			"Redrive":     {postback.Redrive, dlq},
			"Silence 1 h": {postback.Silence, "linegate-InteractiveDLQ-NotEmpty"},
			"Acknowledge": {postback.Ack, "linegate-InteractiveDLQ-NotEmpty"},
		}, nil},
		{"alarm on another queue", "alarm-alarm", []string{"other"}, map[string][2]string{
			"Silence 1 h": {postback.Silence, "linegate-InteractiveDLQ-NotEmpty"},
		}, []string{"Redrive"}},
		{"back to OK", "alarm-ok", []string{dlq}, nil, []string{"Redrive", "Silence 1 h", "Acknowledge"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, p, _ := newTestNotifier(t, []string{opUser}, WithButtons(signer, time.Hour, tt.dlqs))
			if err := n.Handle(context.Background(), loadEvent(t, tt.event)); err != nil {
				t.Fatal(err)
			}
			got := buttonsOf(t, p.calls[0])
			for label, at := range tt.want {
				c, err := signer.Verify(got[label])
				if err != nil || c.Action != at[0] || c.Target != at[1] {
					t.Errorf("%s button: %+v, %v; want %s on %s", label, c, err, at[0], at[1])
				}
			}
			for _, label := range tt.without {
				if _, ok := got[label]; ok {
					t.Errorf("unexpected %s button", label)
				}
			}
		})
	}
	// Without a key there are no buttons at all.
	n, p, _ := newTestNotifier(t, []string{opUser})
	_ = n.Handle(context.Background(), loadEvent(t, "alarm-alarm"))
	if b := buttonsOf(t, p.calls[0]); len(b) != 0 {
		t.Fatalf("buttons without a signer: %v", b)
	}
}

func heldEvent() events.SNSEvent {
	return events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
		MessageID: "m-held", Message: "LINE refused a push at 2026-12-01T00:00:00Z: the channel's monthly message limit is reached.",
		Timestamp:         time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		MessageAttributes: map[string]any{"linegate-kind": map[string]any{"Type": "String", "Value": KindHeld}},
	}}}}
}

// The held notice becomes a card with Resend held; when LINE cannot carry
// it (the quota is spent) the notifier does not fail, since email does.
func TestHeldNoticeCard(t *testing.T) {
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), nil)
	n, p, _ := newTestNotifier(t, []string{opUser}, WithButtons(signer, time.Hour, nil))
	if err := n.Handle(context.Background(), heldEvent()); err != nil {
		t.Fatal(err)
	}
	if c, err := signer.Verify(buttonsOf(t, p.calls[0])["Resend held"]); err != nil || c.Action != postback.ResendHeld {
		t.Fatalf("Resend held button: %+v %v", c, err)
	}
	if !strings.Contains(string(p.calls[0].Messages), "monthly") {
		t.Errorf("card %s", p.calls[0].Messages)
	}
	p.fail = map[string]error{opUser: lineapi.ErrMonthlyLimit}
	if err := n.Handle(context.Background(), heldEvent()); err != nil {
		t.Fatalf("held notice refused for the monthly limit: %v, want nil (email carries it)", err)
	}
	if err := n.Handle(context.Background(), loadEvent(t, "alarm-alarm")); !errors.Is(err, lineapi.ErrMonthlyLimit) {
		t.Fatalf("alarm card refused for the monthly limit: %v, want the error (retried, then the failure queue)", err)
	}
}

// A notice with the same ID gets the same retry key (LINE delivers it once),
// another ID another key.
func TestNoticeRetryKeys(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser})
	nt := Notice{ID: "quota:2026-12:warn:2026-12-01", Level: "WARN", Badge: "QUOTA", Title: "Push quota", Headline: "85% used"}
	_ = n.Notify(context.Background(), nt)
	_ = n.Notify(context.Background(), nt)
	nt.ID = "quota:2026-12:alarm:2026-12-01"
	_ = n.Notify(context.Background(), nt)
	if len(p.calls) != 3 || p.calls[0].RetryKey != p.calls[1].RetryKey || p.calls[0].RetryKey == p.calls[2].RetryKey {
		t.Fatalf("retry keys %v", p.calls)
	}
	if err := n.Notify(context.Background(), Notice{}); err == nil {
		t.Fatal("a notice without an ID was pushed")
	}
}

// A crash of a named channel's event says which channel on its card; one of
// the default channel's has no Channel row (the golden cards above).
func TestCrashCardNamesItsChannel(t *testing.T) {
	ev := loadEvent(t, "crash-trace")
	var rep map[string]any
	if err := json.Unmarshal([]byte(ev.Records[0].SNS.Message), &rep); err != nil {
		t.Fatal(err)
	}
	rep["channel"] = "brand-tw"
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	ev.Records[0].SNS.Message = string(b)
	n, p, _ := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	all := texts(messagesOf(t, p.calls[0])[0]["contents"])
	if i := slices.Index(all, "Channel"); i < 0 || i+1 >= len(all) || all[i+1] != "brand-tw" {
		t.Fatalf("the card does not name channel brand-tw:\n%s", strings.Join(all, "\n"))
	}

	n, p, _ = newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), loadEvent(t, "crash-trace")); err != nil {
		t.Fatal(err)
	}
	if all := texts(messagesOf(t, p.calls[0])[0]["contents"]); slices.Contains(all, "Channel") {
		t.Fatalf("a default channel's crash card has a Channel row:\n%s", strings.Join(all, "\n"))
	}
}
