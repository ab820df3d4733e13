package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/internal/testsns"
	"github.com/linegate/linegate/pkg/bot"
)

const token = "test-access-token"

// fixture is a worker wired to a linemock server, a memory store and a
// recording ops topic.
type fixture struct {
	line  *linemock.Server
	srv   *httptest.Server
	store *idempotency.Memory
	ops   *testsns.Topic
	proc  *Processor
	now   time.Time
	mu    sync.Mutex
	seen  []Result
}

func newFixture(t *testing.T, router *bot.Router, opts ...Option) *fixture {
	t.Helper()
	f := newFixtureOn(t, router, idempotency.NewMemory(), opts...)
	return f
}

// newFixtureOn is newFixture with the worker's idempotency store given
// (f.store is then a memory store no processor uses).
func newFixtureOn(t *testing.T, router *bot.Router, store idempotency.Store, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{now: time.Now(), store: idempotency.NewMemory(), ops: &testsns.Topic{}}
	if m, ok := store.(*idempotency.Memory); ok {
		f.store = m
	}
	f.line = linemock.New(linemock.WithTokens(token))
	f.srv = httptest.NewServer(f.line)
	t.Cleanup(f.srv.Close)
	base := []Option{
		WithMessenger(func() bot.Messenger {
			return lineapi.New(token, lineapi.WithBaseURL(f.srv.URL), lineapi.WithSleep(func(context.Context, time.Duration) error { return nil }))
		}),
		WithCrashReports(f.ops, "arn:aws:sns:us-east-1:000000000000:ops"),
		WithIdentity("WorkerFunction", "us-east-1"),
		WithObserver(func(r Result) { f.mu.Lock(); f.seen = append(f.seen, r); f.mu.Unlock() }),
	}
	p, err := New(router, store, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.proc = p
	return f
}

// textEvent is a LINE text message event from a user, timestamped at.
func textEvent(id, text string, at time.Time, replyToken string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":"Uuser0001"},"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":%q,"message":{"id":"1","type":"text","quoteToken":"q","text":%q}}`,
		at.UnixMilli(), id, replyToken, text))
}

// message wraps a raw LINE event the way EventBridge delivers it to SQS.
func message(msgID string, receive int, raw json.RawMessage) events.SQSMessage {
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	body, _ := json.Marshal(map[string]any{
		"version": "0", "id": "eb-" + msgID, "detail-type": head.Type, "source": "line.webhook",
		"account": "000000000000", "time": "2026-11-29T08:00:00Z", "region": "us-east-1", "resources": []string{},
		"detail": map[string]any{"destination": "Ubot", "receivedAt": time.Now().UTC().Format(time.RFC3339Nano), "event": raw},
	})
	return events.SQSMessage{MessageId: msgID, Body: string(body), Attributes: map[string]string{
		"ApproximateReceiveCount": fmt.Sprint(receive),
		"AWSTraceHeader":          "Root=1-6749f1a2-3b8c4d5e6f7a8b9c0d1e2f3a;Parent=53995c3f42cd8ad8;Sampled=1",
	}}
}

func echoRouter() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, "echo: "+text) })
	return r
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestEchoReplies(t *testing.T) {
	f := newFixture(t, echoRouter())
	f.line.IssueReplyTokenTo("rt-1", "Uuser0001", time.Now())
	resp, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01EV1", "hello", time.Now(), "rt-1"))}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	msgs := f.line.Messages()
	if len(msgs) != 1 || msgs[0].Via != "reply" || !strings.Contains(string(msgs[0].Messages[0]), "echo: hello") {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestSameRecordTwiceHasOneEffect(t *testing.T) {
	f := newFixture(t, echoRouter())
	f.line.IssueReplyTokenTo("rt-2", "Uuser0001", time.Now())
	ev := textEvent("01EV2", "once", time.Now(), "rt-2")
	for i, rec := range []events.SQSMessage{message("m1", 1, ev), message("m2", 1, ev), message("m1", 2, ev)} {
		resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d failed: %+v", i, resp)
		}
	}
	if n := len(f.line.Messages()); n != 1 {
		t.Fatalf("%d messages sent, want 1", n)
	}
	outcomes := []Outcome{f.seen[0].Outcome, f.seen[1].Outcome, f.seen[2].Outcome}
	if outcomes[0] != OutcomeOK || outcomes[1] != OutcomeDuplicate || outcomes[2] != OutcomeDuplicate {
		t.Fatalf("outcomes %v", outcomes)
	}
}

// A handler that pushed, then failed: the retry pushes again with the same
// retry key, LINE answers 409, and the user still has one message.
func TestRetryAfterPushSucceededSendsNothingNew(t *testing.T) {
	var calls atomic.Int32
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		if err := e.Push(ctx, e.Source.ChatID(), lineapiText("pushed")); err != nil {
			return err
		}
		if calls.Add(1) == 1 {
			return errors.New("database down after the push")
		}
		return nil
	})
	f := newFixture(t, r)
	ev := textEvent("01EV3", "x", time.Now(), "")
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, ev)}})
	if got := failedIDs(resp); len(got) != 1 {
		t.Fatalf("first attempt should fail, got %v", got)
	}
	resp, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 2, ev)}})
	f.checkOneMessage(t, resp, linemock.Call{Path: "/v2/bot/message/push", Status: 409})
}

// checkOneMessage fails t unless resp fails no record, the user got exactly
// one message, and LINE answered the call once on the way.
func (f *fixture) checkOneMessage(t *testing.T, resp events.SQSEventResponse, answered linemock.Call) {
	t.Helper()
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failed records: %+v", resp)
	}
	if n := len(f.line.Messages()); n != 1 {
		t.Fatalf("%d messages, want 1 (LINE answering %d to %s once)", n, answered.Status, answered.Path)
	}
	if f.line.Calls()[answered] != 1 {
		t.Fatalf("calls %v: want one %d to %s", f.line.Calls(), answered.Status, answered.Path)
	}
}

func TestExpiredReplyTokenFallsBackToPush(t *testing.T) {
	f := newFixture(t, echoRouter())
	old := time.Now().Add(-2 * time.Minute)
	f.line.IssueReplyTokenTo("rt-old", "Uuser0001", old)
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01EV4", "late", old, "rt-old"))}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	msgs := f.line.Messages()
	if len(msgs) != 1 || msgs[0].Via != "push" || msgs[0].To != "Uuser0001" || msgs[0].RetryKey != lineapi.RetryKey("01EV4", 0) {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestRateLimitedThenSucceeds(t *testing.T) {
	f := newFixture(t, echoRouter())
	f.line.IssueReplyTokenTo("rt-5", "Uuser0001", time.Now())
	f.line.Inject(linemock.Fault{Path: "/v2/bot/message/reply", Status: 429, Times: 1})
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01EV5", "hi", time.Now(), "rt-5"))}})
	f.checkOneMessage(t, resp, linemock.Call{Path: "/v2/bot/message/reply", Status: 429})
}

// boomRouter is a bot whose text handler panics with value on "boom" and
// does nothing on any other text.
func boomRouter(value string) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(_ context.Context, _ *bot.Event, text string) error {
		if text == "boom" {
			panic(value)
		}
		return nil
	})
	return r
}

func TestPanicFailsOnlyItsRecordAndReportsOnce(t *testing.T) {
	f := newFixture(t, boomRouter("boom with token Bearer abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"))
	var recs []events.SQSMessage
	for i := range 10 {
		text := "fine"
		if i == 6 {
			text = "boom"
		}
		recs = append(recs, message(fmt.Sprintf("m%d", i), 1, textEvent(fmt.Sprintf("01EVP%d", i), text, time.Now(), "")))
	}
	boom := textEvent("01EVP6", "boom", time.Now(), "")
	resp, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(resp); len(got) != 1 || got[0] != "m6" {
		t.Fatalf("failures %v, want exactly [m6]", got)
	}
	if len(f.ops.Published()) != 1 {
		t.Fatalf("%d crash reports, want 1", len(f.ops.Published()))
	}
	in := f.ops.Published()[0]
	if in.MessageAttributes[crash.AttributeKind].StringValue == nil || *in.MessageAttributes[crash.AttributeKind].StringValue != crash.KindCrash {
		t.Fatalf("crash report not marked: %+v", in.MessageAttributes)
	}
	rep, err := crash.Parse([]byte(*in.Message))
	if err != nil {
		t.Fatal(err)
	}
	if rep.WebhookEventID != "01EVP6" || rep.EventType != "message" || rep.Function != "WorkerFunction" || !strings.Contains(rep.Stack, "worker") {
		t.Fatalf("report %+v", rep)
	}
	if strings.Contains(*in.Message, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH") {
		t.Fatal("token-shaped string reached the crash report")
	}
	// The retry (second receive) panics again but reports nothing new.
	resp, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m6", 2, boom)}})
	if len(resp.BatchItemFailures) != 1 || len(f.ops.Published()) != 1 {
		t.Fatalf("retry: failures %v, crash reports %d (want 1, 1)", failedIDs(resp), len(f.ops.Published()))
	}
}

func TestStandbyIsAcknowledgedNotAnswered(t *testing.T) {
	var ran atomic.Bool
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, _ string) error {
		ran.Store(true)
		return e.ReplyText(ctx, "no")
	})
	f := newFixture(t, r)
	raw := json.RawMessage(strings.Replace(string(textEvent("01EV6", "hi", time.Now(), "rt-6")), `"mode":"active"`, `"mode":"standby"`, 1))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, raw)}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() || len(f.line.Messages()) != 0 {
		t.Fatalf("standby: failures %v ran %v messages %d", resp.BatchItemFailures, ran.Load(), len(f.line.Messages()))
	}
}

func TestMalformedRecordFailsAlone(t *testing.T) {
	f := newFixture(t, echoRouter())
	good := message("good", 1, textEvent("01EV7", "hi", time.Now(), ""))
	bad := events.SQSMessage{MessageId: "bad", Body: "not json", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	noType := message("notype", 1, json.RawMessage(`{"webhookEventId":"x"}`))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{good, bad, noType}})
	got := failedIDs(resp)
	if len(got) != 2 || !contains(got, "bad") || !contains(got, "notype") {
		t.Fatalf("failures %v", got)
	}
}

func TestInProgressElsewhereIsRetriedLater(t *testing.T) {
	f := newFixture(t, echoRouter())
	if err := f.store.Claim(context.Background(), "01EV8", time.Minute); err != nil {
		t.Fatal(err)
	}
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01EV8", "hi", time.Now(), ""))}})
	if len(resp.BatchItemFailures) != 1 || len(f.line.Messages()) != 0 {
		t.Fatalf("in-progress: %+v, %d messages", resp, len(f.line.Messages()))
	}
}

// A failed handler releases its claim so the retry runs the handler again.
func TestFailureReleasesClaim(t *testing.T) {
	var runs atomic.Int32
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error {
		if runs.Add(1) == 1 {
			return errors.New("transient")
		}
		return nil
	})
	f := newFixture(t, r)
	ev := textEvent("01EV9", "x", time.Now(), "")
	f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, ev)}})
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 2, ev)}})
	if len(resp.BatchItemFailures) != 0 || runs.Load() != 2 {
		t.Fatalf("retry: %+v runs %d", resp, runs.Load())
	}
}

// A handler that waits for its context is stopped by the record timeout.
// The handler gives up on its own after giveUp, so without the timeout the
// test fails (and says so) instead of hanging.
func TestRecordDeadline(t *testing.T) {
	const recordTimeout, giveUp = 50 * time.Millisecond, 5 * time.Second
	errGaveUp := errors.New("the handler's context never ended: gave up")
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, _ *bot.Event, _ string) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(giveUp):
			return errGaveUp
		}
	})
	f := newFixture(t, r, WithRecordTimeout(recordTimeout))
	start := time.Now()
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01EVA", "x", time.Now(), ""))}})
	took := time.Since(start)
	if len(f.seen) != 1 {
		t.Fatalf("after %v: %d results observed, want 1", took, len(f.seen))
	}
	if err := f.seen[0].Err; !errors.Is(err, context.DeadlineExceeded) || len(resp.BatchItemFailures) != 1 || took >= giveUp {
		t.Fatalf("record timeout %v not applied: after %v the record ended with %v (failures %v)", recordTimeout, took, err, failedIDs(resp))
	}
}

// Handle's error is always nil: when the invocation's context has ended,
// every record fails on its own and is listed in the response.
func TestHandleReportsCancelledRecordsNotAnError(t *testing.T) {
	var ran atomic.Int32
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error { ran.Add(1); return nil })
	f := newFixture(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := f.proc.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		message("a", 1, textEvent("01CX1", "x", time.Now(), "")),
		message("b", 1, textEvent("01CX2", "x", time.Now(), "")),
	}})
	if got := failedIDs(resp); err != nil || len(got) != 2 || ran.Load() != 0 {
		t.Fatalf("err %v, failures %v, handler ran %d times; want nil, [a b], 0", err, got, ran.Load())
	}
	for _, res := range f.seen {
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("record %s failed with %v, want the context's error", res.MessageID, res.Err)
		}
	}
}

// A duplicate is recognised from the event's head alone: a completed event
// whose body the SDK could not even decode is skipped, and no LINE client is
// made for it.
func TestDuplicateSkipsTheFullDecode(t *testing.T) {
	var clients atomic.Int32
	f := newFixture(t, echoRouter(), WithMessenger(func() bot.Messenger { clients.Add(1); return nil }))
	if err := f.store.Claim(context.Background(), "01DUP", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Complete(context.Background(), "01DUP", time.Hour); err != nil {
		t.Fatal(err)
	}
	raw := json.RawMessage(`{"type":"message","webhookEventId":"01DUP","message":"not an object"}`)
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 2, raw)}})
	if len(resp.BatchItemFailures) != 0 || f.seen[0].Outcome != OutcomeDuplicate || clients.Load() != 0 {
		t.Fatalf("failures %v, outcome %s (%v), %d LINE clients made; want a duplicate, nothing made",
			failedIDs(resp), f.seen[0].Outcome, f.seen[0].Err, clients.Load())
	}
}

func TestConcurrencyBound(t *testing.T) {
	var cur, peak atomic.Int32
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		cur.Add(-1)
		return nil
	})
	f := newFixture(t, r, WithConcurrency(3))
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, message(fmt.Sprint(i), 1, textEvent(fmt.Sprintf("01EVC%d", i), "x", time.Now(), "")))
	}
	f.proc.Handle(context.Background(), events.SQSEvent{Records: recs})
	if peak.Load() > 3 || peak.Load() < 2 {
		t.Fatalf("peak concurrency %d, want 2..3", peak.Load())
	}
}

func lineapiText(s string) messaging_api.TextMessage { return messaging_api.TextMessage{Text: s} }

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// recordingSpan remembers how a record's span ended.
type recordingSpan struct {
	mu          sync.Mutex
	annotations map[string]any
	endErr      error
	ended       int
	panicked    any
}

func (s *recordingSpan) Annotate(k string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.annotations[k] = v
}
func (s *recordingSpan) End(err error) { s.mu.Lock(); s.endErr = err; s.ended++; s.mu.Unlock() }
func (s *recordingSpan) Panic(v any, stack []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.panicked = v
	s.ended++
}

// Each record gets a span annotated for X-Ray; errors end it with the error,
// panics are recorded as panics.
func TestRecordSpans(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("", func(_ context.Context, _ *bot.Event, text string) error {
		switch text {
		case "boom":
			panic("kaboom")
		case "fail":
			return errors.New("nope")
		}
		return nil
	})
	var mu sync.Mutex
	spans := map[string]*recordingSpan{}
	start := func(ctx context.Context, name, upstream string) (context.Context, Span) {
		s := &recordingSpan{annotations: map[string]any{"upstream": upstream}}
		mu.Lock()
		spans[fmt.Sprint(len(spans))] = s
		mu.Unlock()
		return ctx, s
	}
	f := newFixture(t, r, WithTracing(start, func(context.Context) string { return "1-abc-def" }), WithConcurrency(1))
	f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("ok", 1, textEvent("01S1", "fine", time.Now(), "")),
		message("fail", 1, textEvent("01S2", "fail", time.Now(), "")),
		message("boom", 1, textEvent("01S3", "boom", time.Now(), "")),
	}})
	byID := map[string]*recordingSpan{}
	for _, s := range spans {
		byID[fmt.Sprint(s.annotations["webhookEventId"])] = s
	}
	ok, fail, boom := byID["01S1"], byID["01S2"], byID["01S3"]
	if ok == nil || fail == nil || boom == nil {
		t.Fatalf("spans %v", byID)
	}
	if ok.endErr != nil || ok.ended != 1 || ok.annotations["eventType"] != "message" || ok.annotations["sourceType"] != "user" ||
		ok.annotations["upstream"] != "Root=1-6749f1a2-3b8c4d5e6f7a8b9c0d1e2f3a;Parent=53995c3f42cd8ad8;Sampled=1" {
		t.Fatalf("ok span %+v", ok)
	}
	if fail.endErr == nil || fail.ended != 1 {
		t.Fatalf("failed record's span %+v", fail)
	}
	if boom.panicked != "kaboom" || boom.ended != 1 {
		t.Fatalf("panicking record's span %+v", boom)
	}
	if f.seen[0].TraceID != "1-abc-def" {
		t.Fatalf("trace id not recorded: %+v", f.seen[0])
	}
}

// flakyStore injects idempotency-store failures and records the calls made
// to it, one string each ("claim <key> <duration>", "complete <key>
// <duration>", "release <key>"). Not for concurrent use.
type flakyStore struct {
	idempotency.Store
	claimErr, completeErr, releaseErr error
	calls                             []string
}

func (s *flakyStore) Claim(ctx context.Context, key string, d time.Duration) error {
	s.calls = append(s.calls, "claim "+key+" "+d.String())
	if s.claimErr != nil {
		return s.claimErr
	}
	return s.Store.Claim(ctx, key, d)
}

func (s *flakyStore) Complete(ctx context.Context, key string, d time.Duration) error {
	s.calls = append(s.calls, "complete "+key+" "+d.String())
	if s.completeErr != nil {
		return s.completeErr
	}
	return s.Store.Complete(ctx, key, d)
}

func (s *flakyStore) Release(ctx context.Context, key string) error {
	s.calls = append(s.calls, "release "+key)
	if s.releaseErr != nil {
		return s.releaseErr
	}
	return s.Store.Release(ctx, key)
}

// The store unreachable before the handler: the record fails and nothing
// runs. The store failing after the effect: the record still succeeds (the
// effect happened; running it again would be worse). A failed release only
// delays the retry.
func TestIdempotencyStoreFailures(t *testing.T) {
	tests := []struct {
		name    string
		store   *flakyStore
		handler error
		want    Outcome
		ran     bool
	}{
		{name: "claim fails", store: &flakyStore{claimErr: errors.New("ProvisionedThroughputExceededException")}, want: OutcomeFailed},
		{name: "complete fails after the effect", store: &flakyStore{completeErr: errors.New("timeout")}, want: OutcomeOK, ran: true},
		{name: "release fails after a handler error", store: &flakyStore{releaseErr: errors.New("timeout")}, handler: errors.New("boom"), want: OutcomeFailed, ran: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Bool
			r := bot.NewRouter()
			r.OnText("", func(context.Context, *bot.Event, string) error { ran.Store(true); return tt.handler })
			tt.store.Store = idempotency.NewMemory()
			var got []Result
			p, err := New(r, tt.store, WithObserver(func(res Result) { got = append(got, res) }))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01ST", "x", time.Now(), ""))}})
			if got[0].Outcome != tt.want || ran.Load() != tt.ran {
				t.Fatalf("outcome %s ran %v, want %s %v (err %v)", got[0].Outcome, ran.Load(), tt.want, tt.ran, got[0].Err)
			}
			if (tt.want == OutcomeFailed) != (len(resp.BatchItemFailures) == 1) {
				t.Fatalf("batch failures %v for outcome %s", resp.BatchItemFailures, tt.want)
			}
		})
	}
}

type failingTopic struct{ calls int }

func (f *failingTopic) Publish(context.Context, *sns.PublishInput, ...func(*sns.Options)) (*sns.PublishOutput, error) {
	f.calls++
	return nil, errors.New("AuthorizationError")
}

// A crash report that cannot be published is logged; the record still fails
// alone and the rest of the batch is unaffected.
func TestCrashReportPublishFailure(t *testing.T) {
	topic := &failingTopic{}
	f := newFixture(t, boomRouter("boom"), WithCrashReports(topic, "arn:aws:sns:us-east-1:0:ops"))
	resp, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("a", 1, textEvent("01CP1", "boom", time.Now(), "")),
		message("b", 1, textEvent("01CP2", "fine", time.Now(), "")),
	}})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "a" || topic.calls != 1 {
		t.Fatalf("resp %+v err %v publishes %d", resp, err, topic.calls)
	}
}

// --- chats, failures and long work -----------------------------------------

const (
	chatQueueARN = "arn:aws:sqs:us-east-1:000000000000:linegate-InteractiveQueue.fifo"
	chatDLQARN   = "arn:aws:sqs:us-east-1:000000000000:linegate-InteractiveDLQ.fifo"
	longQueueURL = "https://sqs.us-east-1.amazonaws.com/000000000000/linegate-LongQueue"
	longQueueARN = "arn:aws:sqs:us-east-1:000000000000:linegate-LongQueue"
)

// fakeSQS stands in for the worker's queue calls: a redrive policy per
// queue URL, and every visibility change and send recorded.
type fakeSQS struct {
	mu         sync.Mutex
	policies   map[string]string // queue URL -> RedrivePolicy
	attrCalls  int
	visibility map[string][]int32 // receipt handle -> visibility timeouts set
	sent       []*sqs.SendMessageInput
	sendErr    error
}

func newFakeSQS(maxReceives int) *fakeSQS {
	src, _ := queueURL(chatQueueARN)
	long, _ := queueURL(longQueueARN)
	return &fakeSQS{visibility: map[string][]int32{}, policies: map[string]string{
		src:  fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, chatDLQARN, maxReceives),
		long: fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:linegate-LongDLQ","maxReceiveCount":"%d"}`, maxReceives),
	}}
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attrCalls++
	p, ok := f.policies[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, errors.New("no such queue: " + aws.ToString(in.QueueUrl))
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"RedrivePolicy": p}}, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := aws.ToString(in.ReceiptHandle)
	f.visibility[h] = append(f.visibility[h], in.VisibilityTimeout)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m")}, nil
}

func (f *fakeSQS) visibilityOf(handle string) []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.visibility[handle])
}

func (f *fakeSQS) sends() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// chatMessage is a record of the FIFO chat queue: group = chat.
func chatMessage(id, chat string, receive int, text string) events.SQSMessage {
	m := message(id, receive, textEventFrom(id, chat, text))
	m.EventSourceARN = chatQueueARN
	m.ReceiptHandle = "rh-" + id
	m.Attributes["MessageGroupId"] = chat
	m.Attributes["MessageDeduplicationId"] = id
	m.Attributes["ApproximateFirstReceiveTimestamp"] = "1700000000000"
	return m
}

func textEventFrom(id, user, text string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":%q},"webhookEventId":%q,"replyToken":"rt-%s","message":{"id":"1","type":"text","quoteToken":"q","text":%q}}`,
		time.Now().UnixMilli(), user, id, id, text))
}

func TestQueueURL(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:sqs:us-east-1:123456789012:q.fifo": "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q":  "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
		"arn:aws:sns:us-east-1:1:t":                 "",
		"not an arn":                                "",
	} {
		if got, err := queueURL(arn); got != want || (err != nil) != (want == "") {
			t.Errorf("queueURL(%q) = %q, %v; want %q", arn, got, err, want)
		}
	}
	if queueName("https://sqs/1/linegate-LongQueue") != "linegate-LongQueue" || queueName(longQueueARN) != "linegate-LongQueue" {
		t.Fatal("queueName")
	}
}

// scriptRouter runs every text: "fail" fails transiently, "permanent" fails
// with bot.Permanent, "block:<id>" waits until the test releases <id>;
// every start and end is logged in order.
type scriptRouter struct {
	mu      sync.Mutex
	log     []string
	release map[string]chan struct{}
	running map[string]int // per chat, records running now
	overlap bool
}

func newScriptRouter() *scriptRouter {
	return &scriptRouter{release: map[string]chan struct{}{}, running: map[string]int{}}
}

func (s *scriptRouter) gate(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release[id] == nil {
		s.release[id] = make(chan struct{})
	}
	return s.release[id]
}

func (s *scriptRouter) record(what string) {
	s.mu.Lock()
	s.log = append(s.log, what)
	s.mu.Unlock()
}

func (s *scriptRouter) entries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *scriptRouter) router() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		chat := e.Source.ChatID()
		s.mu.Lock()
		s.running[chat]++
		if s.running[chat] > 1 {
			s.overlap = true
		}
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.running[chat]--; s.mu.Unlock() }()
		s.record("start " + e.WebhookEventID)
		defer s.record("end " + e.WebhookEventID)
		switch {
		case text == "fail":
			return errors.New("transient")
		case text == "permanent":
			return bot.Permanent(errors.New("cannot ever work"))
		case strings.HasPrefix(text, "block:"):
			select {
			case <-s.gate(strings.TrimPrefix(text, "block:")):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return r
}

// Records of one chat run one after the other in batch order; chats run
// in parallel (a1 waits for b1 to start, which it could not if chats ran
// one at a time).
func TestChatsRunInOrderAndInParallel(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q), WithConcurrency(4))
	batch := events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "block:a1"), chatMessage("b1", "Ubob", 1, "x"),
		chatMessage("a2", "Ualice", 1, "x"), chatMessage("b2", "Ubob", 1, "x"), chatMessage("a3", "Ualice", 1, "x"),
	}}
	done := make(chan events.SQSEventResponse)
	go func() { resp, _ := f.proc.Handle(context.Background(), batch); done <- resp }()
	deadline := time.After(5 * time.Second)
	for !slices.Contains(s.entries(), "end b2") {
		select {
		case <-deadline:
			t.Fatalf("bob's records did not run while alice's first was blocked: %v", s.entries())
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(s.gate("a1"))
	resp := <-done
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	log := s.entries()
	order := func(ids ...string) {
		last := -1
		for _, id := range ids {
			i := slices.Index(log, "start "+id)
			if i < last {
				t.Fatalf("%s started out of order: %v", id, log)
			}
			last = slices.Index(log, "end "+id)
		}
	}
	order("a1", "a2", "a3")
	order("b1", "b2")
	if s.overlap {
		t.Fatalf("two records of one chat ran at once: %v", log)
	}
}

// The first failure of a chat stops it for the batch: its later records are
// reported failed without running and made visible at once, so they follow
// the failed one, which is hidden for its retry delay. Other chats go on.
func TestFailureStopsItsChatOnly(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q), WithRetryBackoff(backoff.Policy{First: 2 * time.Second, Max: time.Minute, Jitter: backoff.None}))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "x"), chatMessage("a2", "Ualice", 1, "fail"), chatMessage("b1", "Ubob", 1, "x"),
		chatMessage("a3", "Ualice", 1, "x"), chatMessage("a4", "Ualice", 1, "x"), chatMessage("b2", "Ubob", 1, "x"),
	}})
	if got := failedIDs(resp); !sameSet(got, []string{"a2", "a3", "a4"}) {
		t.Fatalf("failures %v, want a2 (failed) and a3, a4 (deferred)", got)
	}
	for _, id := range []string{"a3", "a4"} {
		if slices.Contains(s.entries(), "start "+id) {
			t.Fatalf("%s ran after its chat's a2 failed", id)
		}
		if v := q.visibilityOf("rh-" + id); !slices.Equal(v, []int32{0}) {
			t.Fatalf("%s visibility changes %v, want [0]", id, v)
		}
	}
	if v := q.visibilityOf("rh-a2"); !slices.Equal(v, []int32{2}) {
		t.Fatalf("a2 visibility changes %v, want its first retry delay [2]", v)
	}
	if !slices.Contains(s.entries(), "end b2") {
		t.Fatal("bob's chat was stopped by alice's failure")
	}
	outcomes := map[string]Outcome{}
	for _, r := range f.seen {
		outcomes[r.MessageID] = r.Outcome
	}
	if outcomes["a3"] != OutcomeDeferred || outcomes["a2"] != OutcomeFailed || outcomes["b2"] != OutcomeOK {
		t.Fatalf("outcomes %v", outcomes)
	}
}

// refresherGone reports whether, within timeout, no goroutine runs the
// loading refresher (keepLoading's) any more.
func refresherGone(timeout time.Duration) bool {
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("worker.keepLoading.func")) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// What a failure becomes, by kind and receive count: a permanent failure
// and an undecodable record go to the DLQ on their first receive and are
// acknowledged; a transient failure is hidden for a delay growing with its
// receive count, and dead-lettered on its last allowed receive.
func TestFailureSettling(t *testing.T) {
	malformed := chatMessage("m1", "Ualice", 1, "x")
	malformed.Body = `{"detail":"not an envelope"}`
	tests := []struct {
		name       string
		msg        events.SQSMessage
		sendErr    error
		wantFailed bool
		wantDLQ    string // reason, "" for no dead letter
		wantVis    []int32
	}{
		{name: "permanent, first receive", msg: chatMessage("p1", "Ualice", 1, "permanent"), wantDLQ: "permanent"},
		{name: "undecodable, first receive", msg: malformed, wantDLQ: "malformed"},
		{name: "an event the SDK cannot decode (bot.ErrEvent), first receive", msg: undecodableEvent("e1", "Ualice", `"type":"message","message":"not an object"`), wantDLQ: "malformed"},
		{name: "an event without a type (bot.ErrEvent), first receive", msg: undecodableEvent("e2", "Ualice", `"kind":"message"`), wantDLQ: "malformed"},
		{name: "transient, receive 1", msg: chatMessage("t1", "Ualice", 1, "fail"), wantFailed: true, wantVis: []int32{2}},
		{name: "transient, receive 3", msg: chatMessage("t3", "Ualice", 3, "fail"), wantFailed: true, wantVis: []int32{8}},
		{name: "transient, receive 4", msg: chatMessage("t4", "Ualice", 4, "fail"), wantFailed: true, wantVis: []int32{16}},
		{name: "transient, last allowed receive", msg: chatMessage("t5", "Ualice", 5, "fail"), wantDLQ: "retries-exhausted"},
		{name: "permanent, dead-letter send fails: retried", msg: chatMessage("p2", "Ualice", 1, "permanent"), sendErr: errors.New("down"), wantFailed: true, wantVis: []int32{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newFakeSQS(5)
			q.sendErr = tt.sendErr
			m := &testmetrics.Recorder{}
			f := newFixture(t, newScriptRouter().router(), WithQueues(q), WithMetrics(m),
				WithRetryBackoff(backoff.Policy{First: 2 * time.Second, Max: time.Minute, Jitter: backoff.None}))
			resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{tt.msg}})
			if failed := len(resp.BatchItemFailures) == 1; failed != tt.wantFailed {
				t.Fatalf("reported failed %v, want %v", failed, tt.wantFailed)
			}
			if v := q.visibilityOf(tt.msg.ReceiptHandle); !slices.Equal(v, tt.wantVis) {
				t.Fatalf("visibility changes %v, want %v", v, tt.wantVis)
			}
			sent := q.sends()
			if tt.wantDLQ == "" {
				if len(sent) != 0 {
					t.Fatalf("sent %d dead letters, want none", len(sent))
				}
				return
			}
			if len(sent) != 1 {
				t.Fatalf("sent %d messages, want one dead letter", len(sent))
			}
			d := sent[0]
			dlq, _ := queueURL(chatDLQARN)
			if aws.ToString(d.QueueUrl) != dlq || aws.ToString(d.MessageBody) != tt.msg.Body ||
				aws.ToString(d.MessageAttributes[AttrDeadLetterReason].StringValue) != tt.wantDLQ ||
				aws.ToString(d.MessageAttributes[AttrDeadLetterSource].StringValue) != chatQueueARN {
				t.Fatalf("dead letter %+v", d)
			}
			if aws.ToString(d.MessageGroupId) != "Ualice" || aws.ToString(d.MessageDeduplicationId) != tt.msg.MessageId+"-1700000000000" {
				t.Fatalf("FIFO dead letter: group %q dedup %q", aws.ToString(d.MessageGroupId), aws.ToString(d.MessageDeduplicationId))
			}
			if aws.ToString(d.MessageSystemAttributes["AWSTraceHeader"].StringValue) == "" {
				t.Fatal("the dead letter lost its trace header")
			}
			if m.Total("RecordsDeadLettered") != 1 || f.seen[0].Outcome != OutcomeDeadLettered || f.seen[0].DeadLetterReason != tt.wantDLQ {
				t.Fatalf("metrics %v, result %+v", m.Counts(), f.seen[0])
			}
		})
	}
}

// undecodableEvent is a chat queue record whose envelope is sound but whose
// event (a user's, with the members fields) the bot's reader refuses:
// bot.ErrEvent.
func undecodableEvent(id, user, fields string) events.SQSMessage {
	m := chatMessage(id, user, 1, "x")
	m.Body = message(id, 1, json.RawMessage(`{"webhookEventId":"`+id+`","mode":"active","source":{"type":"user","userId":"`+user+`"},`+fields+`}`)).Body
	return m
}

// An event the bot cannot decode (bot.ErrEvent) is dead-lettered on its
// first receive, so the next event of its chat, in the same batch, runs at
// once instead of waiting behind five receives of a record that can never
// succeed.
func TestUndecodableEventDoesNotBlockItsChat(t *testing.T) {
	q := newFakeSQS(5)
	f := newFixture(t, echoRouter(), WithQueues(q))
	f.line.IssueReplyTokenTo("rt-g1", "Ualice", time.Now())
	bad, good := undecodableEvent("b1", "Ualice", `"type":"message","message":"not an object"`), chatMessage("g1", "Ualice", 1, "after")
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{bad, good}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failed records %v; want none: the undecodable one dead-lettered, the next one handled", failedIDs(resp))
	}
	outcomes := map[string]Outcome{}
	for _, r := range f.seen {
		outcomes[r.MessageID] = r.Outcome
	}
	if outcomes["b1"] != OutcomeDeadLettered || outcomes["g1"] != OutcomeOK {
		t.Fatalf("outcomes %v; want b1 dead-lettered at its first receive and g1 ok", outcomes)
	}
	if sent := q.sends(); len(sent) != 1 || aws.ToString(sent[0].MessageAttributes[AttrDeadLetterReason].StringValue) != "malformed" {
		t.Fatalf("dead letters %+v; want b1's, reason malformed", sent)
	}
	if msgs := f.line.Messages(); len(msgs) != 1 || !strings.Contains(string(msgs[0].Messages[0]), "echo: after") {
		t.Fatalf("LINE got %+v; want the echo of the event after the undecodable one", msgs)
	}
}

// A transient failure's receives are spaced by growing intervals: each
// delay is at least the one before, with the default equal jitter, and the
// sum until the DLQ stays within the documented half minute.
func TestRetryDelaysGrow(t *testing.T) {
	var prev, total time.Duration
	for trial := 0; trial < 200; trial++ {
		prev, total = 0, 0
		for n := 1; n < 5; n++ {
			d := time.Duration(visibilitySeconds(DefaultRetryBackoff.Delay(n))) * time.Second
			if d < prev {
				t.Fatalf("receive %d waits %v, less than receive %d's %v", n, d, n-1, prev)
			}
			prev = d
			total += d
		}
		if total > 30*time.Second || total < 15*time.Second {
			t.Fatalf("retry delays add up to %v, want 15-30 s", total)
		}
	}
}

// The redrive policy is asked of SQS once per queue, whatever the number
// of failures.
func TestRedrivePolicyIsCached(t *testing.T) {
	q := newFakeSQS(5)
	f := newFixture(t, newScriptRouter().router(), WithQueues(q))
	for i := range 5 {
		_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{chatMessage(fmt.Sprint("f", i), "Ualice", 1, "fail")}})
	}
	if q.attrCalls != 1 {
		t.Fatalf("GetQueueAttributes called %d times, want 1", q.attrCalls)
	}
}

// Without an SQS client a failure just fails: the old contract.
func TestFailuresWithoutQueues(t *testing.T) {
	f := newFixture(t, newScriptRouter().router())
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("p", "Ualice", 1, "permanent"), chatMessage("q", "Ualice", 1, "x")}})
	if got := failedIDs(resp); !slices.Equal(got, []string{"p", "q"}) {
		t.Fatalf("failures %v, want the permanent failure and the record after it", got)
	}
}

// A permanent failure is dead-lettered and its chat goes on in the same
// batch.
func TestChatGoesOnAfterADeadLetter(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "permanent"), chatMessage("a2", "Ualice", 1, "x")}})
	if len(resp.BatchItemFailures) != 0 || !slices.Contains(s.entries(), "end a2") {
		t.Fatalf("failures %v, log %v", failedIDs(resp), s.entries())
	}
}

// longRouterFor: "draw" is long and replies after waiting for release (or at
// once when release is nil); anything else echoes.
func longRouterFor(ran *atomic.Int32, release chan struct{}) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, "echo") })
	r.OnText("draw", func(ctx context.Context, e *bot.Event, _ string) error {
		ran.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return e.ReplyText(ctx, "drawn")
	}, bot.Queue("long"))
	return r
}

// On the chat queue a long route is not run: the loading animation shows,
// the record's body goes unchanged to the long-work queue, and the record
// completes at once. On the long-work queue the handler runs, claimed under
// its own key, so the hand-off's completion does not make it a duplicate.
func TestLongWorkIsHandedOffThenRun(t *testing.T) {
	var ran atomic.Int32
	q := newFakeSQS(5)
	m := &testmetrics.Recorder{}
	f := newFixture(t, longRouterFor(&ran, nil), WithQueues(q), WithLongQueue(longQueueURL), WithMetrics(m))
	msg := chatMessage("d1", "Ualice", 1, "draw a cat")
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg, chatMessage("e1", "Ualice", 1, "hi")}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 0 {
		t.Fatalf("failures %v, long handler ran %d times on the chat queue", failedIDs(resp), ran.Load())
	}
	sent := q.sends()
	if len(sent) != 1 || aws.ToString(sent[0].QueueUrl) != longQueueURL || aws.ToString(sent[0].MessageBody) != msg.Body ||
		sent[0].MessageGroupId != nil || aws.ToString(sent[0].MessageSystemAttributes["AWSTraceHeader"].StringValue) == "" {
		t.Fatalf("hand-off %+v", sent)
	}
	if len(f.line.Loading()) != 1 {
		t.Fatalf("loading animations %v, want one for the hand-off", f.line.Loading())
	}
	if f.seen[0].Outcome != OutcomeForwarded || m.Total("RecordsForwarded") != 1 {
		t.Fatalf("result %+v, metrics %v", f.seen[0], m.Counts())
	}
	// The chat's next message was answered in the same batch, long work or not.
	if len(f.line.Messages()) != 1 {
		t.Fatalf("messages %v, want only the echo", f.line.Messages())
	}

	long := msg
	long.EventSourceARN, long.ReceiptHandle = longQueueARN, "rh-long"
	delete(long.Attributes, "MessageGroupId")
	resp, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 1 {
		t.Fatalf("failures %v, ran %d on the long-work queue", failedIDs(resp), ran.Load())
	}
	if last := f.seen[len(f.seen)-1]; last.Outcome != OutcomeOK || !last.Long {
		t.Fatalf("long run result %+v", last)
	}
	if len(q.sends()) != 1 {
		t.Fatal("the long-work queue's record was handed off again")
	}
	// A redelivery of the long-work record is a duplicate.
	_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
	if ran.Load() != 1 {
		t.Fatal("a redelivered long-work record ran twice")
	}
}

// Without a long-work queue (or an SQS client) a long route runs where it is
// received.
func TestLongWorkWithoutLongQueueRunsInPlace(t *testing.T) {
	var ran atomic.Int32
	f := newFixture(t, longRouterFor(&ran, nil), WithQueues(newFakeSQS(5)))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{chatMessage("d1", "Ualice", 1, "draw")}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 1 {
		t.Fatalf("failures %v, ran %d", failedIDs(resp), ran.Load())
	}
}

// Each route names its own route queue: an event is handed to its route's
// queue by the table's URL, and a record from any route queue of the table
// runs its handler there.
func TestRouteQueuesByName(t *testing.T) {
	const reportsURL, reportsARN = "https://sqs.ap-northeast-1.amazonaws.com/000000000000/linegate-ReportsQueue",
		"arn:aws:sqs:ap-northeast-1:000000000000:linegate-ReportsQueue"
	var ran atomic.Int32
	r := longRouterFor(&ran, nil)
	r.OnText("report", func(ctx context.Context, e *bot.Event, _ string) error {
		ran.Add(1)
		return e.ReplyText(ctx, "reported")
	}, bot.Queue("reports"))
	q := newFakeSQS(5)
	f := newFixture(t, r, WithQueues(q), WithRouteQueues(map[string]string{"long": longQueueURL, "reports": reportsURL}))
	msg := chatMessage("r1", "Ualice", 1, "report sales")
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg, chatMessage("d1", "Ualice", 1, "draw")}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 0 {
		t.Fatalf("failures %v, ran %d on the chat queue", failedIDs(resp), ran.Load())
	}
	sent := q.sends()
	if len(sent) != 2 || aws.ToString(sent[0].QueueUrl) != reportsURL || aws.ToString(sent[1].QueueUrl) != longQueueURL {
		t.Fatalf("hand-offs %+v, want reports then long", sent)
	}
	routed := msg
	routed.EventSourceARN, routed.ReceiptHandle = reportsARN, "rh-reports"
	delete(routed.Attributes, "MessageGroupId")
	resp, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{routed}})
	if last := f.seen[len(f.seen)-1]; len(resp.BatchItemFailures) != 0 || ran.Load() != 1 || !last.Long || last.Outcome != OutcomeOK {
		t.Fatalf("failures %v, ran %d, result %+v on the reports queue", failedIDs(resp), ran.Load(), last)
	}
}

// A worker whose queue table lacks a route queue its bot names does not
// start: the route would run behind the chat's quick replies.
func TestRouteQueueMissingFromTheTable(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("report", func(context.Context, *bot.Event, string) error { return nil }, bot.Queue("reports"))
	r.OnText("ask", func(context.Context, *bot.Event, string) error { return nil }, bot.Debounce(time.Second, 0))
	_, err := New(r, idempotency.NewMemory(), WithRouteQueues(map[string]string{"other": longQueueURL}))
	if !errors.Is(err, ErrRouteQueue) || !strings.Contains(err.Error(), `"reports"`) || !strings.Contains(err.Error(), `"long"`) {
		t.Fatalf("err %v, want ErrRouteQueue naming reports and long", err)
	}
	if _, err := New(r, idempotency.NewMemory()); err != nil {
		t.Fatalf("without a table every route runs in place: %v", err)
	}
	if _, err := New(r, idempotency.NewMemory(), WithRouteQueues(map[string]string{"long": longQueueURL, "reports": longQueueURL + "2"})); err != nil {
		t.Fatalf("a table with every queue: %v", err)
	}
}

// Long work past the loading animation's minute shows it again every
// refresh, and stops once the handler has answered, though it still works.
func TestLongWorkRefreshesLoading(t *testing.T) {
	answer, finish := make(chan struct{}), make(chan struct{})
	answered := make(chan struct{})
	r := bot.NewRouter()
	r.OnText("draw", func(ctx context.Context, e *bot.Event, _ string) error {
		<-answer
		if err := e.ReplyText(ctx, "drawn"); err != nil {
			return err
		}
		close(answered)
		<-finish // more work after the answer
		return nil
	}, bot.Queue("long"))
	f := newFixture(t, r, WithQueues(newFakeSQS(5)), WithLongQueue(longQueueURL), WithLoadingRefresh(20*time.Millisecond))
	long := chatMessage("d1", "Ualice", 1, "draw")
	long.EventSourceARN = longQueueARN
	done := make(chan struct{})
	go func() {
		_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
		close(done)
	}()
	deadline := time.After(5 * time.Second)
	for len(f.line.Loading()) < 3 {
		select {
		case <-deadline:
			t.Fatalf("loading shown %d times in 5 s, want it refreshed every 20 ms", len(f.line.Loading()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if refresherGone(0) {
		t.Fatal("no goroutine runs keepLoading's refresher while the loading is refreshed: the check below would prove nothing")
	}
	close(answer)
	<-answered
	n := len(f.line.Loading())
	// The positive signal: the refresher's goroutine ends at its first tick
	// after the answer, while the handler is still at work (finish is not
	// closed yet): a refresher that kept running would show up here.
	if !refresherGone(5 * time.Second) {
		t.Fatal("the loading refresher still runs 5 s after the handler answered (refresh every 20 ms)")
	}
	// At most a refresh already under way when the answer went out.
	if got := len(f.line.Loading()); got > n+1 {
		t.Fatalf("loading shown %d more times after the handler answered, want at most the one under way", got-n)
	}
	close(finish)
	<-done
	if len(f.line.Messages()) != 1 {
		t.Fatalf("messages %v, want the answer", f.line.Messages())
	}
}
