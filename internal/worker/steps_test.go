package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/testmessenger"
	"github.com/linegate/linegate/internal/testsns"
	"github.com/linegate/linegate/pkg/bot"
)

// Each step of the pipeline on its own: a record in the state the steps
// before it leave, and a next handler standing in for the steps after it.

// decodedRecord is a record as decode leaves it.
func decodedRecord(t *testing.T, msg string, receive int, raw json.RawMessage) *record {
	t.Helper()
	m := message(msg, receive, raw)
	_, detail, err := envelope.Decode([]byte(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	h, err := bot.Peek(detail.Event)
	if err != nil {
		t.Fatal(err)
	}
	r := &record{msg: m, detail: detail, head: h, result: Result{MessageID: msg, ReceiveCount: receive}}
	r.result.WebhookEventID, r.result.Type = h.WebhookEventID, h.Type
	return r
}

// nextStep stands in for the steps after the one under test: it counts its
// calls, keeps the context it was given, and runs do (when set).
type nextStep struct {
	calls int
	ctx   context.Context
	do    func(ctx context.Context, r *record) error
}

func (n *nextStep) handler(ctx context.Context, r *record) error {
	n.calls++
	n.ctx = ctx
	if n.do == nil {
		return nil
	}
	return n.do(ctx, r)
}

// is reports whether got is want: nil when want is nil, else wrapping want.
func is(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

func returns(err error) func(context.Context, *record) error {
	return func(context.Context, *record) error { return err }
}

// logLines decodes the JSON log lines written to b.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func jsonLogger(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }

type ctxKey string

func TestTraceStep(t *testing.T) {
	const upstream = "Root=1-6749f1a2-3b8c4d5e6f7a8b9c0d1e2f3a;Parent=53995c3f42cd8ad8;Sampled=1"
	errHandler := errors.New("handler failed")
	tests := []struct {
		name      string
		upstream  string
		undecoded bool // the record fails before decode learnt its head
		do        func(ctx context.Context, r *record) error
		wantEnd   error // the error the span ends with
		wantPanic any   // the panic the span records instead
		wantNotes map[string]any
	}{
		// The link to upstream is the tracer's (StartSpan gets the header).
		{name: "handled", upstream: upstream, wantNotes: map[string]any{"upstream": upstream,
			"webhookEventId": "01TR", "eventType": "message", "sourceType": "user"}},
		{name: "no upstream trace", wantNotes: map[string]any{"upstream": "",
			"webhookEventId": "01TR", "eventType": "message", "sourceType": "user"}},
		{name: "failed", upstream: upstream, do: returns(errHandler), wantEnd: errHandler},
		{name: "panicked", upstream: upstream, wantPanic: "kaboom", do: func(_ context.Context, r *record) error {
			r.panicked = &panicked{value: "kaboom", stack: []byte("goroutine 1")}
			return ErrPanic
		}},
		{name: "undecodable: nothing to annotate", upstream: upstream, undecoded: true, do: returns(envelope.ErrMalformed),
			wantEnd: envelope.ErrMalformed, wantNotes: map[string]any{"upstream": upstream}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodedRecord(t, "m1", 1, textEvent("01TR", "hi", time.Now(), ""))
			r.msg.Attributes[telemetry.SQSTraceAttribute] = tt.upstream
			if tt.undecoded {
				r.head = bot.Head{}
			}
			var span *recordingSpan
			start := func(ctx context.Context, name, up string) (context.Context, Span) {
				span = &recordingSpan{annotations: map[string]any{"upstream": up}}
				return context.WithValue(ctx, ctxKey("span"), name), span
			}
			traceID := func(ctx context.Context) string { return "trace-of-" + ctx.Value(ctxKey("span")).(string) }
			next := &nextStep{do: tt.do}
			err := trace(start, traceID)(next.handler)(context.Background(), r)

			if next.calls != 1 || next.ctx.Value(ctxKey("span")) != "record" {
				t.Fatalf("next ran %d times, with the span's context: %v", next.calls, next.ctx != nil && next.ctx.Value(ctxKey("span")) != nil)
			}
			if r.result.TraceID != "trace-of-record" {
				t.Fatalf("Result.TraceID %q, want the id read from the span's context", r.result.TraceID)
			}
			want := tt.wantEnd
			if tt.wantPanic != nil {
				want = ErrPanic
			}
			if !is(err, want) {
				t.Fatalf("returned %v, want next's error %v", err, want)
			}
			if span.ended != 1 || span.endErr != tt.wantEnd || span.panicked != tt.wantPanic {
				t.Fatalf("span ended %d times with error %v, panic %v; want once with %v, %v", span.ended, span.endErr, span.panicked, tt.wantEnd, tt.wantPanic)
			}
			if tt.wantNotes != nil && !maps.Equal(span.annotations, tt.wantNotes) {
				t.Fatalf("annotations %v, want %v", span.annotations, tt.wantNotes)
			}
		})
	}
}

// fakeMetrics records every observation.
type fakeMetrics struct {
	mu        sync.Mutex
	counts    map[string]float64
	durations map[string][]time.Duration
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{counts: map[string]float64{}, durations: map[string][]time.Duration{}}
}

func (m *fakeMetrics) Count(name string, n float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts[name] += n
}

func (m *fakeMetrics) Duration(name string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.durations[name] = append(m.durations[name], d)
}

func TestAccountStep(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	errHandler := errors.New("handler failed")
	tests := []struct {
		name        string
		do          func(ctx context.Context, r *record) error
		want        Outcome
		wantCounts  map[string]float64
		wantLatency bool
		wantLog     string
	}{
		{name: "handled", do: func(_ context.Context, r *record) error {
			r.event = &bot.Event{Timestamp: t0.Add(-3 * time.Second)}
			return nil
		}, want: OutcomeOK, wantCounts: map[string]float64{}, wantLatency: true, wantLog: "record processed"},
		{name: "handled, event without a timestamp", do: func(_ context.Context, r *record) error {
			r.event = &bot.Event{Timestamp: time.UnixMilli(0)}
			return nil
		}, want: OutcomeOK, wantCounts: map[string]float64{}, wantLog: "record processed"},
		{name: "duplicate", do: func(_ context.Context, r *record) error {
			r.result.Outcome = OutcomeDuplicate
			return nil
		}, want: OutcomeDuplicate, wantCounts: map[string]float64{"DuplicatesSkipped": 1}, wantLog: "record processed"},
		{name: "failed", do: returns(errHandler), want: OutcomeFailed, wantCounts: map[string]float64{"RecordsFailed": 1}, wantLog: "record failed"},
		{name: "panicked", do: func(_ context.Context, r *record) error {
			r.result.Panicked = true
			return ErrPanic
		}, want: OutcomeFailed, wantCounts: map[string]float64{"RecordsFailed": 1, "HandlerPanics": 1}, wantLog: "record failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			clock := func() time.Time { return now }
			do := tt.do
			next := &nextStep{do: func(ctx context.Context, r *record) error {
				now = now.Add(250 * time.Millisecond) // the record takes 250 ms
				return do(ctx, r)
			}}
			m := newFakeMetrics()
			var logs bytes.Buffer
			var seen []Result
			r := decodedRecord(t, "m1", 2, textEvent("01AC", "planted text 5150", t0, ""))
			err := account(m, jsonLogger(&logs), func(res Result) { seen = append(seen, res) }, clock)(next.handler)(context.Background(), r)

			if next.calls != 1 || r.result.Outcome != tt.want {
				t.Fatalf("next ran %d times, outcome %q; want once, %q", next.calls, r.result.Outcome, tt.want)
			}
			if (err != nil) != (tt.want == OutcomeFailed) || !errors.Is(r.result.Err, err) {
				t.Fatalf("returned %v, Result.Err %v", err, r.result.Err)
			}
			if len(seen) != 1 || seen[0].Outcome != tt.want || seen[0].Duration != 250*time.Millisecond || seen[0].WebhookEventID != "01AC" {
				t.Fatalf("observer saw %+v, want one %s result of 250ms", seen, tt.want)
			}
			if !maps.Equal(m.counts, tt.wantCounts) {
				t.Fatalf("counts %v, want %v", m.counts, tt.wantCounts)
			}
			if got := m.durations["RecordDuration"]; len(got) != 0 {
				t.Fatalf("RecordDuration %v recorded: a record's duration is its line's durationMs and Lambda's Duration", got)
			}
			if got := m.durations["EndToEndLatency"]; tt.wantLatency != (len(got) == 1) || tt.wantLatency && got[0] != 3250*time.Millisecond {
				t.Fatalf("EndToEndLatency %v, want it (%v) measured from the event's timestamp", got, tt.wantLatency)
			}
			lines := logLines(t, &logs)
			if len(lines) != 1 || lines[0]["msg"] != tt.wantLog || lines[0]["outcome"] != string(tt.want) || lines[0]["webhookEventId"] != "01AC" ||
				lines[0]["receiveCount"] != 2.0 || lines[0]["durationMs"] != 250.0 {
				t.Fatalf("log %v, want one %q line", lines, tt.wantLog)
			}
			if tt.want == OutcomeFailed && (lines[0]["error"] != err.Error() || lines[0]["level"] != "WARN") {
				t.Fatalf("failure logged as %v", lines[0])
			}
			if strings.Contains(logs.String(), "planted text") {
				t.Fatalf("the event's text reached the log: %s", logs.String())
			}
		})
	}
}

func TestDecodeStep(t *testing.T) {
	good := message("m1", 1, textEvent("01DE", "hi", time.Now(), ""))
	tests := []struct {
		name     string
		body     string
		withCtx  bool
		wantErr  error
		wantHead bot.Head
		wantCtx  string // the event id the steps after decode see in their context
		wantID   string // the webhookEventId in the Result of a record that failed
	}{
		{name: "event", body: good.Body, withCtx: true, wantHead: bot.Head{Type: "message", WebhookEventID: "01DE", SourceType: bot.SourceUser}, wantCtx: "01DE"},
		{name: "no event context", body: good.Body, wantHead: bot.Head{Type: "message", WebhookEventID: "01DE", SourceType: bot.SourceUser}},
		{name: "event without webhookEventId", body: message("m1", 1, json.RawMessage(`{"type":"follow","source":{"type":"group","groupId":"C1"}}`)).Body,
			withCtx: true, wantHead: bot.Head{Type: "follow", SourceType: bot.SourceGroup}},
		{name: "not json", body: "not json", withCtx: true, wantErr: envelope.ErrMalformed},
		{name: "no detail", body: `{"version":"0","detail-type":"message"}`, withCtx: true, wantErr: envelope.ErrMalformed},
		{name: "event without a type", body: message("m1", 1, json.RawMessage(`{"webhookEventId":"x"}`)).Body, withCtx: true, wantErr: bot.ErrEvent, wantID: "x"},
		{name: "event with a bad source", body: message("m1", 1, json.RawMessage(`{"type":"message","webhookEventId":"01BAD","source":5}`)).Body,
			withCtx: true, wantErr: bot.ErrEvent, wantID: "01BAD"},
		{name: "event not an object", body: message("m1", 1, json.RawMessage(`[1]`)).Body, withCtx: true, wantErr: envelope.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eventContext func(context.Context, string) context.Context
			if tt.withCtx {
				eventContext = func(ctx context.Context, id string) context.Context {
					return context.WithValue(ctx, ctxKey("event"), id)
				}
			}
			r := &record{msg: good, result: Result{MessageID: "m1"}}
			r.msg.Body = tt.body
			next := &nextStep{}
			err := decode(eventContext)(next.handler)(context.Background(), r)

			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || next.calls != 0 || r.result.Type != "" {
					t.Fatalf("err %v, next ran %d times, type %q; want %v and nothing run", err, next.calls, r.result.Type, tt.wantErr)
				}
				if r.result.WebhookEventID != tt.wantID {
					t.Fatalf("webhookEventId of the failed record %q, want %q (salvaged when there is one)", r.result.WebhookEventID, tt.wantID)
				}
				return
			}
			if err != nil || next.calls != 1 {
				t.Fatalf("err %v, next ran %d times", err, next.calls)
			}
			if r.head != tt.wantHead || r.result.Type != tt.wantHead.Type || r.result.WebhookEventID != tt.wantHead.WebhookEventID ||
				r.detail.Destination != "Ubot" || len(r.detail.Event) == 0 {
				t.Fatalf("head %+v result %+v detail %+v, want %+v", r.head, r.result, r.detail, tt.wantHead)
			}
			if got, _ := next.ctx.Value(ctxKey("event")).(string); got != tt.wantCtx {
				t.Fatalf("event id in the context %q, want %q", got, tt.wantCtx)
			}
		})
	}
}

func TestIdempotentStep(t *testing.T) {
	errHandler := errors.New("handler failed")
	errStore := errors.New("ProvisionedThroughputExceededException")
	const claim, complete, release = "claim 01ID 30s", "complete 01ID 72h0m0s", "release 01ID"
	tests := []struct {
		name      string
		before    func(s *idempotency.Memory) // the store's state before the record
		store     flakyStore
		raw       json.RawMessage
		undecoded bool
		next      error
		wantErr   error
		want      Outcome // set by the step itself ("" leaves it to settle)
		wantNext  bool
		wantCalls []string
		wantAfter error  // a later Claim of the key
		wantLog   string // a log line's message
	}{
		{name: "new event: handled, then completed", wantNext: true, wantCalls: []string{claim, complete}, wantAfter: idempotency.ErrCompleted},
		{name: "completed before: duplicate, nothing runs", before: completed("01ID"), want: OutcomeDuplicate,
			wantCalls: []string{claim}, wantAfter: idempotency.ErrCompleted},
		{name: "claimed elsewhere: retried later", before: claimed("01ID"), wantErr: idempotency.ErrInProgress,
			wantCalls: []string{claim}, wantAfter: idempotency.ErrInProgress},
		{name: "store down at the claim", store: flakyStore{claimErr: errStore}, wantErr: errStore, wantCalls: []string{claim}},
		{name: "handler failed: claim released", next: errHandler, wantErr: errHandler, wantNext: true,
			wantCalls: []string{claim, release}, wantAfter: nil},
		{name: "release fails: logged, the claim expires", store: flakyStore{releaseErr: errStore}, next: errHandler, wantErr: errHandler,
			wantNext: true, wantCalls: []string{claim, release}, wantAfter: idempotency.ErrInProgress, wantLog: "release claim"},
		{name: "completion fails after the effect: still handled", store: flakyStore{completeErr: errStore}, wantNext: true,
			wantCalls: []string{claim, complete}, wantAfter: idempotency.ErrInProgress, wantLog: "mark completed"},
		{name: "event without webhookEventId: keyed by its bytes", raw: json.RawMessage(`{"type":"follow"}`), wantNext: true,
			wantCalls: []string{"claim " + idempotency.Key("", []byte(`{"type":"follow"}`)) + " 30s",
				"complete " + idempotency.Key("", []byte(`{"type":"follow"}`)) + " 72h0m0s"}},
		{name: "not decoded: refused", undecoded: true, wantErr: errNotDecoded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := tt.store
			mem := idempotency.NewMemory()
			if tt.before != nil {
				tt.before(mem)
			}
			store.Store = mem
			raw := tt.raw
			if raw == nil {
				raw = textEvent("01ID", "hi", time.Now(), "")
			}
			r := decodedRecord(t, "m1", 1, raw)
			if tt.undecoded {
				r.head, r.detail = bot.Head{}, envelope.Detail{}
			}
			var logs bytes.Buffer
			next := &nextStep{do: returns(tt.next)}
			err := idempotent(&store, 30*time.Second, 72*time.Hour, jsonLogger(&logs), nil)(next.handler)(context.Background(), r)

			if !is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if (next.calls == 1) != tt.wantNext || r.result.Outcome != tt.want {
				t.Fatalf("next ran %d times, outcome %q; want ran %v, %q", next.calls, r.result.Outcome, tt.wantNext, tt.want)
			}
			if strings.Join(store.calls, "; ") != strings.Join(tt.wantCalls, "; ") {
				t.Fatalf("store calls %q, want %q", store.calls, tt.wantCalls)
			}
			if tt.wantCalls != nil && tt.raw == nil {
				if after := mem.Claim(context.Background(), "01ID", time.Minute); !is(after, tt.wantAfter) {
					t.Fatalf("a later claim of the key: %v, want %v", after, tt.wantAfter)
				}
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Fatalf("log %q does not say %q", logs.String(), tt.wantLog)
			}
		})
	}
}

func completed(key string) func(*idempotency.Memory) {
	return func(s *idempotency.Memory) {
		_ = s.Claim(context.Background(), key, time.Minute)
		_ = s.Complete(context.Background(), key, time.Hour)
	}
}

func claimed(key string) func(*idempotency.Memory) {
	return func(s *idempotency.Memory) { _ = s.Claim(context.Background(), key, time.Minute) }
}

func TestParseStep(t *testing.T) {
	tests := []struct {
		name          string
		raw           json.RawMessage
		withMessenger bool
		wantErr       error
		wantBound     error // what the handler's ShowLoading returns
	}{
		{name: "event bound to its own client", raw: textEvent("01PA", "hi", time.Now(), ""), withMessenger: true},
		{name: "no LINE client configured", raw: textEvent("01PA", "hi", time.Now(), ""), wantBound: bot.ErrNoMessenger},
		{name: "head fine, body not: no client made", raw: json.RawMessage(`{"type":"message","webhookEventId":"01PA","message":"str"}`),
			withMessenger: true, wantErr: bot.ErrEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var made []*testmessenger.Messenger
			var newMessenger messengers
			if tt.withMessenger {
				newMessenger = func(string) (bot.Messenger, error) {
					m := &testmessenger.Messenger{}
					made = append(made, m)
					return m, nil
				}
			}
			r := decodedRecord(t, "m1", 1, tt.raw)
			var loadingErr error
			next := &nextStep{do: func(ctx context.Context, r *record) error {
				loadingErr = r.event.ShowLoading(ctx, 5)
				return nil
			}}
			err := parse(newMessenger, nil, 0)(next.handler)(context.Background(), r)

			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || next.calls != 0 || len(made) != 0 || r.event != nil {
					t.Fatalf("err %v, next ran %d times, %d clients made; want %v and nothing made", err, next.calls, len(made), tt.wantErr)
				}
				return
			}
			if err != nil || next.calls != 1 || r.event.WebhookEventID != "01PA" || r.event.Destination != "Ubot" || r.event.Typed == nil {
				t.Fatalf("err %v, next ran %d times, event %+v", err, next.calls, r.event)
			}
			if !is(loadingErr, tt.wantBound) {
				t.Fatalf("ShowLoading: %v, want %v", loadingErr, tt.wantBound)
			}
			if tt.withMessenger && (len(made) != 1 || len(made[0].Loading()) != 1 || made[0].Loading()[0].Chat != "Uuser0001") {
				t.Fatalf("want one client, used by the event: %+v", made)
			}
		})
	}
}

func TestReportCrashStep(t *testing.T) {
	const secret = "s3cret-value-9"
	errHandler := errors.New("handler failed")
	boom := func(_ context.Context, r *record) error {
		r.panicked = &panicked{value: "boom near " + secret, stack: []byte("goroutine 7 [running]:\nmain.handler()\n\t/src/" + secret + ".go:3")}
		return ErrPanic
	}
	tests := []struct {
		name     string
		receive  int
		noTopic  bool
		failing  bool
		do       func(ctx context.Context, r *record) error
		wantErr  error
		wantSent int
		wantLog  string
	}{
		{name: "no panic: nothing sent", receive: 1, do: returns(errHandler), wantErr: errHandler},
		{name: "panic on the first receive: reported", receive: 1, do: boom, wantErr: ErrPanic, wantSent: 1},
		{name: "panic again on a retry: already reported", receive: 2, do: boom, wantErr: ErrPanic},
		{name: "no ops topic configured", receive: 1, noTopic: true, do: boom, wantErr: ErrPanic},
		{name: "publish fails: logged, outcome unchanged", receive: 1, failing: true, do: boom, wantErr: ErrPanic, wantLog: "crash report not published"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := &testsns.Topic{}
			failing := &failingTopic{}
			c := crashReports{pub: topic, topic: "arn:aws:sns:us-east-1:0:ops", function: "WorkerFunction", region: "ap-northeast-1", secrets: []string{secret}}
			switch {
			case tt.noTopic:
				c.pub = nil
			case tt.failing:
				c.pub = failing
			}
			at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
			var logs bytes.Buffer
			r := decodedRecord(t, "m1", tt.receive, textEvent("01CR", "hi", time.Now(), ""))
			r.result.TraceID = "1-6749f1a2-3b8c4d5e6f7a8b9c0d1e2f3a"
			err := reportCrash(c, func() time.Time { return at }, jsonLogger(&logs))((&nextStep{do: tt.do}).handler)(context.Background(), r)

			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("returned %v, want next's %v", err, tt.wantErr)
			}
			if len(topic.Published()) != tt.wantSent || tt.failing && failing.calls != 1 {
				t.Fatalf("%d reports published (%d failed attempts), want %d", len(topic.Published()), failing.calls, tt.wantSent)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Fatalf("log %q does not say %q", logs.String(), tt.wantLog)
			}
			if tt.wantSent == 0 {
				return
			}
			in := topic.Published()[0]
			if *in.TopicArn != c.topic || *in.Subject != "linegate crash: message" || *in.MessageAttributes[crash.AttributeKind].StringValue != crash.KindCrash {
				t.Fatalf("published %+v", in)
			}
			if strings.Contains(*in.Message, secret) {
				t.Fatalf("the secret reached the crash report: %s", *in.Message)
			}
			rep, err := crash.Parse([]byte(*in.Message))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Function != "WorkerFunction" || rep.Region != "ap-northeast-1" || rep.WebhookEventID != "01CR" || rep.EventType != "message" ||
				rep.TraceID != r.result.TraceID || rep.ReceiveCount != 1 || !rep.Time.Equal(at) || !strings.Contains(rep.Error, "boom near") {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

// The step runs the steps after it under the record's deadline, and cancels
// their context when they return.
func TestTimeoutStep(t *testing.T) {
	const recordTimeout, giveUp = 50 * time.Millisecond, 5 * time.Second
	tests := []struct {
		name      string
		work      time.Duration // how long the handler would work if its context let it
		wantErr   error
		wantAfter error // the handler's context once the step returned
	}{
		{name: "handler done in time", work: 0, wantAfter: context.Canceled},
		{name: "handler outlives the record timeout", work: giveUp, wantErr: context.DeadlineExceeded, wantAfter: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodedRecord(t, "m1", 1, textEvent("01TO", "hi", time.Now(), ""))
			next := &nextStep{do: func(ctx context.Context, _ *record) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(tt.work):
					return nil
				}
			}}
			start := time.Now()
			err := timeout(recordTimeout, time.Second)(next.handler)(context.Background(), r)
			took := time.Since(start)
			if !is(err, tt.wantErr) || took >= giveUp {
				t.Fatalf("after %v the handler returned %v, want %v within the %v record timeout", took, err, tt.wantErr, recordTimeout)
			}
			if !errors.Is(next.ctx.Err(), tt.wantAfter) {
				t.Fatalf("the handler's context after the step: %v, want %v", next.ctx.Err(), tt.wantAfter)
			}
		})
	}
}

// recordContext: the record timeout, never closer than the margin to the
// invocation's deadline, and at least minRecordTime.
func TestRecordContext(t *testing.T) {
	const margin = 2 * time.Second
	tests := []struct {
		name     string
		parent   time.Duration // the invocation's time left; 0: no deadline
		timeout  time.Duration
		wantLeft time.Duration
	}{
		{name: "no invocation deadline", timeout: 5 * time.Second, wantLeft: 5 * time.Second},
		{name: "invocation deadline far away", parent: time.Minute, timeout: 5 * time.Second, wantLeft: 5 * time.Second},
		{name: "invocation deadline nearer than the timeout", parent: 10 * time.Second, timeout: 30 * time.Second, wantLeft: 10*time.Second - margin},
		{name: "invocation deadline inside the margin", parent: time.Second, timeout: 30 * time.Second, wantLeft: minRecordTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			parent := context.Background()
			if tt.parent > 0 {
				var cancel context.CancelFunc
				parent, cancel = context.WithDeadline(parent, before.Add(tt.parent))
				defer cancel()
			}
			ctx, cancel := recordContext(parent, tt.timeout, margin)
			defer cancel()
			slack := time.Since(before)
			dl, ok := ctx.Deadline()
			if !ok {
				t.Fatal("the record's context has no deadline")
			}
			if got := dl.Sub(before); got < tt.wantLeft || got > tt.wantLeft+slack {
				t.Fatalf("the record got %v, want %v (+ up to %v of test time)", got, tt.wantLeft, slack)
			}
		})
	}
}

func TestRecoverPanicsStep(t *testing.T) {
	errHandler := errors.New("handler failed")
	tests := []struct {
		name      string
		do        func(ctx context.Context, r *record) error
		wantErr   error
		wantPanic any
	}{
		{name: "handled", do: returns(nil)},
		{name: "failed: passed through", do: returns(errHandler), wantErr: errHandler},
		{name: "panicked with a string", do: func(context.Context, *record) error { panic("kaboom") }, wantErr: ErrPanic, wantPanic: "kaboom"},
		{name: "panicked with an error", do: func(context.Context, *record) error { panic(errHandler) }, wantErr: ErrPanic, wantPanic: errHandler},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodedRecord(t, "m1", 1, textEvent("01RP", "hi", time.Now(), ""))
			err := recoverPanics()((&nextStep{do: tt.do}).handler)(context.Background(), r)

			if !is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantPanic == nil {
				if r.panicked != nil || r.result.Panicked {
					t.Fatalf("no panic, yet recorded %+v", r.panicked)
				}
				return
			}
			if r.panicked == nil || r.panicked.value != tt.wantPanic || !r.result.Panicked {
				t.Fatalf("panic recorded %+v, Result.Panicked %v; want %v", r.panicked, r.result.Panicked, tt.wantPanic)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tt.wantPanic)) || !strings.Contains(string(r.panicked.stack), "TestRecoverPanicsStep") {
				t.Fatalf("err %q does not name the panic, or the stack does not show the panicking handler:\n%s", err, r.panicked.stack)
			}
		})
	}
}

// stackedPanic is a panic value that brings its own stack, as a handler run
// in another process does.
type stackedPanic struct{ msg, stack string }

func (p stackedPanic) String() string     { return p.msg }
func (p stackedPanic) PanicStack() []byte { return []byte(p.stack) }

// A panic that carries the stack it was raised on is recorded with that
// stack, not the recovering goroutine's.
func TestRecoverPanicsKeepsACarriedStack(t *testing.T) {
	r := decodedRecord(t, "m1", 1, textEvent("01RQ", "hi", time.Now(), ""))
	v := stackedPanic{msg: "remote kaboom", stack: "goroutine 7 [running]:\nexample.com/bot.handler()"}
	err := recoverPanics()((&nextStep{do: func(context.Context, *record) error { panic(v) }}).handler)(context.Background(), r)
	if !is(err, ErrPanic) || !strings.Contains(err.Error(), "remote kaboom") {
		t.Fatalf("err %v", err)
	}
	if r.panicked == nil || string(r.panicked.stack) != v.stack {
		t.Fatalf("stack recorded %q, want the carried one", r.panicked)
	}
}

// The crash marker decides whether a panic pages: a new marker publishes,
// a held one does not (whatever the receive count: a redriven record starts
// at 1), a store that cannot be reached falls back to the first receive, a
// report that could not be published releases its marker, and one that was
// completes it.
func TestReportCrashMarker(t *testing.T) {
	boom := func(_ context.Context, r *record) error {
		r.panicked = &panicked{value: "boom", stack: []byte("goroutine 7 [running]:\nmain.handler()\n\t/src/h.go:3")}
		return ErrPanic
	}
	down := errors.New("ThrottlingException")
	tests := []struct {
		name       string
		held       bool  // the event's marker exists already
		claimErr   error // the marker store fails
		receive    int
		failing    bool // the publish fails
		wantSent   int
		wantMarker bool // the marker exists afterwards
		wantLog    string
	}{
		{name: "first crash of the event", receive: 1, wantSent: 1, wantMarker: true},
		{name: "first crash seen on a later receive", receive: 3, wantSent: 1, wantMarker: true},
		{name: "redriven: receive 1 again, marker held", held: true, receive: 1, wantMarker: true, wantLog: "crash already reported"},
		{name: "store down, first receive: published anyway", claimErr: down, receive: 1, wantSent: 1, wantLog: "crash marker not written"},
		{name: "store down, later receive: not published", claimErr: down, receive: 2},
		{name: "publish fails: marker released", receive: 1, failing: true, wantLog: "crash report not published"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := idempotency.NewMemory()
			r := decodedRecord(t, "m1", tt.receive, textEvent("01MK", "hi", time.Now(), ""))
			marker := idempotency.CrashKey("01MK")
			if tt.held {
				if err := mem.Claim(context.Background(), marker, 24*time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			store := &flakyStore{Store: mem, claimErr: tt.claimErr}
			topic := &testsns.Topic{}
			c := crashReports{pub: topic, topic: "arn:aws:sns:us-east-1:0:ops", marks: store, markFor: 24 * time.Hour}
			if tt.failing {
				c.pub = &failingTopic{}
			}
			var logs bytes.Buffer
			err := reportCrash(c, time.Now, jsonLogger(&logs))((&nextStep{do: boom}).handler)(context.Background(), r)
			if !errors.Is(err, ErrPanic) {
				t.Fatalf("returned %v; want the record's own error", err)
			}
			if len(topic.Published()) != tt.wantSent {
				t.Fatalf("%d reports published; want %d", len(topic.Published()), tt.wantSent)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Fatalf("log %q does not say %q", logs.String(), tt.wantLog)
			}
			cerr := mem.Claim(context.Background(), marker, time.Hour)
			held := errors.Is(cerr, idempotency.ErrInProgress) || errors.Is(cerr, idempotency.ErrCompleted)
			if tt.wantSent == 1 && tt.claimErr == nil && !errors.Is(cerr, idempotency.ErrCompleted) {
				t.Fatalf("marker after the report: %v; want a completed marker (a claim in progress is released at a restart)", cerr)
			}
			if held != tt.wantMarker {
				t.Fatalf("marker held afterwards = %v; want %v (calls %v)", held, tt.wantMarker, store.calls)
			}
			if tt.claimErr == nil && (len(store.calls) == 0 || store.calls[0] != "claim "+marker+" 24h0m0s") {
				t.Fatalf("marker calls %v; want a 24 h claim of %s first", store.calls, marker)
			}
		})
	}
}
