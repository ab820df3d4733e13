package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

const (
	askChat = "Uasker0000000000000000000000000001"
	window  = 2 * time.Second
)

// askBot is a bot whose "ask" route is debounced: it records each call's
// batch (the texts, oldest first) and answers it with one reply quoting
// them all. fail makes its next calls fail (or panic) instead.
type askBot struct {
	mu      sync.Mutex
	calls   [][]string
	replyTo []string // the reply token each call answered with
	fail    []error  // the next calls' errors; errPanic panics
}

var errPanic = errors.New("panic")

func (b *askBot) router(window, maxWait time.Duration) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, "echo: "+text) })
	r.OnText("ask", func(ctx context.Context, e *bot.Event, _ string) error {
		var texts []string
		for _, ev := range e.Batch() {
			t, _ := ev.Text()
			texts = append(texts, t)
		}
		b.mu.Lock()
		b.calls = append(b.calls, texts)
		b.replyTo = append(b.replyTo, e.ReplyToken)
		var err error
		if len(b.fail) > 0 {
			err, b.fail = b.fail[0], b.fail[1:]
		}
		b.mu.Unlock()
		if errors.Is(err, errPanic) {
			panic("the model crashed")
		}
		if err != nil {
			return err
		}
		answer := []rune("You asked: " + strings.Join(texts, " / "))
		return e.ReplyText(ctx, string(answer[:min(len(answer), 1000)]))
	}, bot.Debounce(window, maxWait))
	return r
}

func (b *askBot) batches() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.calls...)
}

// debounceEnv is a worker with the ask bot, a fake clock, the queues'
// calls recorded, and a memory store for claims and buffers.
type debounceEnv struct {
	*fixture
	bot     *askBot
	clk     *testclock.Clock
	q       *fakeSQS
	metrics *testmetrics.Recorder
	slept   []time.Duration
	flushed int // flushes of q's sends already delivered by flushes()
}

func newDebounceEnv(t *testing.T, window, maxWait time.Duration, opts ...Option) *debounceEnv {
	t.Helper()
	e := &debounceEnv{bot: &askBot{}, clk: testclock.New(time.Now()), q: newFakeSQS(5), metrics: &testmetrics.Recorder{}}
	store := idempotency.NewMemory(idempotency.WithClock(e.clk.Now))
	base := []Option{WithStateStore(store), WithQueues(e.q), WithLongQueue(longQueueURL), WithClock(e.clk.Now), WithMetrics(e.metrics),
		withSleep(func(ctx context.Context, d time.Duration) error {
			e.slept = append(e.slept, d)
			e.clk.Advance(d)
			return ctx.Err()
		})}
	e.fixture = newFixtureOn(t, e.bot.router(window, maxWait), store, append(base, opts...)...)
	return e
}

// ask is a chat queue record of a text from askChat, sent now.
func (e *debounceEnv) ask(id, text string) events.SQSMessage {
	raw := json.RawMessage(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":%q},"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":"rt-%s","message":{"id":"m-%s","type":"text","quoteToken":"q","text":%q}}`,
		e.clk.Now().UnixMilli(), askChat, id, id, id, text))
	e.line.IssueReplyTokenTo("rt-"+id, askChat, time.Now())
	m := message(id, 1, raw)
	m.EventSourceARN, m.ReceiptHandle = chatQueueARN, "rh-"+id
	m.Attributes["MessageGroupId"] = askChat
	m.Attributes["MessageDeduplicationId"] = id
	return m
}

// handle runs one batch and returns its records' results.
func (e *debounceEnv) handle(t *testing.T, msgs ...events.SQSMessage) []Result {
	t.Helper()
	before := len(e.seen)
	if _, err := e.proc.Handle(context.Background(), events.SQSEvent{Records: msgs}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Result(nil), e.seen[before:]...)
}

// flushes returns the debounce flushes sent since the last call, as the
// long-work queue delivers them (first receive).
func (e *debounceEnv) flushes(t *testing.T) []events.SQSMessage {
	t.Helper()
	var out []events.SQSMessage
	sent := e.q.sends()
	for i, in := range sent[e.flushed:] {
		if aws.ToString(in.QueueUrl) != longQueueURL {
			continue
		}
		m := events.SQSMessage{MessageId: fmt.Sprintf("flush-%d", e.flushed+i), ReceiptHandle: fmt.Sprintf("rh-flush-%d", e.flushed+i),
			Body: aws.ToString(in.MessageBody), EventSourceARN: longQueueARN,
			Attributes:        map[string]string{"ApproximateReceiveCount": "1"},
			MessageAttributes: map[string]events.SQSMessageAttribute{}}
		for k, a := range in.MessageAttributes {
			m.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
		}
		out = append(out, m)
	}
	e.flushed = len(sent)
	return out
}

func spec(t *testing.T, m events.SQSMessage) flushSpec {
	t.Helper()
	f, err := parseFlush(m)
	if err != nil || f == nil {
		t.Fatalf("flush %s: %v", m.MessageId, err)
	}
	return *f
}

func outcomes(rs []Result) string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Outcome))
	}
	return strings.Join(out, " ")
}

// Three quick "ask" messages: each is appended to the chat's burst and
// schedules a flush delayed by the window; the flushes of the first two
// find a newer event and do nothing; the last one's runs the handler once,
// with all three in order and the newest reply token, answered by one
// reply. Redeliveries of any record change nothing.
func TestDebounceBurstRunsTheHandlerOnce(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	var chat []events.SQSMessage
	for i, text := range []string{"ask what is", "ask the capital", "ask of France?"} {
		m := e.ask(fmt.Sprintf("A%d", i+1), text)
		chat = append(chat, m)
		if got := outcomes(e.handle(t, m)); got != "debounced" {
			t.Fatalf("record %d: %s, want debounced", i+1, got)
		}
		e.clk.Advance(500 * time.Millisecond)
	}
	fl := e.flushes(t)
	if len(fl) != 3 {
		t.Fatalf("%d flushes scheduled, want 3", len(fl))
	}
	for i, sent := range e.q.sends() {
		if sent.DelaySeconds != 2 || sent.MessageGroupId != nil || aws.ToString(sent.MessageBody) != chat[i].Body {
			t.Fatalf("flush %d: delay %d s, group %v; want the record's body delayed by the 2 s window", i, sent.DelaySeconds, sent.MessageGroupId)
		}
		if s := spec(t, fl[i]); s.Seq != int64(i+1) || s.Route != "text:ask" {
			t.Fatalf("flush %d spec %+v", i, s)
		}
	}
	if len(e.bot.batches()) != 0 || len(e.line.Messages()) != 0 {
		t.Fatal("the handler ran before the burst ended")
	}
	// SQS delivers each flush when it is due.
	e.clk.Advance(500 * time.Millisecond) // A1's is due
	if got := outcomes(e.handle(t, fl[0])); got != "debounced" {
		t.Fatalf("the first flush: %s; want debounced (a newer event ends the burst)", got)
	}
	e.clk.Advance(500 * time.Millisecond)
	if got := outcomes(e.handle(t, fl[1])); got != "debounced" {
		t.Fatalf("the second flush: %s", got)
	}
	e.clk.Advance(500 * time.Millisecond)
	res := e.handle(t, fl[2])
	if outcomes(res) != "ok" || strings.Join(res[0].Batch, ",") != "A1,A2,A3" || !res[0].Long {
		t.Fatalf("the last flush: %+v", res)
	}
	if b := e.bot.batches(); len(b) != 1 || strings.Join(b[0], "|") != "ask what is|ask the capital|ask of France?" {
		t.Fatalf("handler calls %q, want one with the three texts in order", b)
	}
	msgs := e.line.Messages()
	if len(msgs) != 1 || msgs[0].Via != "reply" || msgs[0].ReplyToken != "rt-A3" ||
		!strings.Contains(string(msgs[0].Messages[0]), "You asked: ask what is / ask the capital / ask of France?") {
		t.Fatalf("messages %+v, want one reply with the newest token", msgs)
	}
	// Redelivered flushes and chat records: duplicates, nothing new.
	for _, m := range append(append([]events.SQSMessage{}, fl...), chat...) {
		m.Attributes["ApproximateReceiveCount"] = "2"
		if got := outcomes(e.handle(t, m)); got != "duplicate" {
			t.Fatalf("redelivery of %s: %s", m.MessageId, got)
		}
	}
	if len(e.bot.batches()) != 1 || len(e.line.Messages()) != 1 || len(e.flushes(t)) != 0 {
		t.Fatal("a redelivery ran something again")
	}
	if e.metrics.Total("RecordsDebounced") != 5 || e.metrics.Total("DuplicatesSkipped") != float64(len(fl)+len(chat)) {
		t.Fatalf("metrics %v", e.metrics.Counts())
	}
}

// Messages that keep coming within the window are cut into a batch at
// maxWait after the burst's first: the flush of the event that reaches
// maxWait is delayed only to it, and takes every pending event, newer ones
// included; their own flushes then find nothing.
func TestDebounceMaxWaitCutsALongBurst(t *testing.T) {
	e := newDebounceEnv(t, window, 4*time.Second)
	start := e.clk.Now()
	at := func(d time.Duration) { e.clk.Advance(d - e.clk.Now().Sub(start)) }
	var got []string
	var fl []events.SQSMessage
	send := func(id string) {
		e.handle(t, e.ask(id, "ask part "+id))
		fl = append(fl, e.flushes(t)...) // delivered later, when due
	}
	deliver := func(i int) { got = append(got, outcomes(e.handle(t, fl[i]))) }
	send("B1") // at 0: due at 2 s
	at(1500 * time.Millisecond)
	send("B2") // due at 3.5 s
	at(2 * time.Second)
	deliver(0) // B2 is newer, and 2 s < 4 s: not due
	at(3 * time.Second)
	send("B3") // due at min(5 s, 4 s) = 4 s
	at(3500 * time.Millisecond)
	deliver(1)
	at(3900 * time.Millisecond)
	send("B4") // due at 4 s
	at(4 * time.Second)
	deliver(2) // B4 is newer, but the burst is 4 s old: all four go
	deliver(3)
	var delays []int32
	for _, s := range e.q.sends() {
		delays = append(delays, s.DelaySeconds)
	}
	if fmt.Sprint(delays) != "[2 2 1 1]" {
		t.Fatalf("flush delays %v s, want [2 2 1 1]", delays)
	}
	if strings.Join(got, " ") != "debounced debounced ok debounced" {
		t.Fatalf("flushes: %v", got)
	}
	if b := e.bot.batches(); len(b) != 1 || len(b[0]) != 4 {
		t.Fatalf("handler calls %q, want one with the four parts", b)
	}
}

// A flush that arrives early (`linegate local` divides SQS delays by its
// time scale, never the conversation's window) waits until it is due.
func TestDebounceEarlyFlushWaitsForItsDueTime(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	e.handle(t, e.ask("C1", "ask quickly"))
	e.clk.Advance(100 * time.Millisecond)
	if got := outcomes(e.handle(t, e.flushes(t)...)); got != "ok" {
		t.Fatalf("early flush: %s", got)
	}
	if fmt.Sprint(e.slept) != "[1.9s]" {
		t.Fatalf("waited %v, want the 1.9 s left of the window", e.slept)
	}
	if len(e.bot.batches()) != 1 {
		t.Fatal("the handler did not run once")
	}
}

// A flush whose handler fails keeps its batch: its retry runs the same
// events, not the ones that arrived since, which form the next burst. While
// the failed batch waits for its retry the next burst's flush does not
// overtake it: it looks again later, as a new flush, and runs once the
// first batch is done.
func TestDebounceFailedBatchIsRetriedAsItWasAndInOrder(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	e.bot.fail = []error{errors.New("model unavailable")}
	e.handle(t, e.ask("D1", "ask one"))
	e.handle(t, e.ask("D2", "ask two"))
	e.clk.Advance(window)
	fl := e.flushes(t)
	e.handle(t, fl[0])
	res := e.handle(t, fl[1])
	if outcomes(res) != "failed" {
		t.Fatalf("the failing batch: %+v", res)
	}
	// A new burst while the failed batch waits for its retry.
	e.handle(t, e.ask("D3", "ask three"))
	e.clk.Advance(window)
	next := e.flushes(t)
	if got := outcomes(e.handle(t, next...)); got != "debounced" {
		t.Fatalf("the next burst's flush: %s, want it to wait", got)
	}
	again := e.flushes(t)
	if len(again) != 1 || spec(t, again[0]).Wait != 1 {
		t.Fatalf("the waiting flush was not sent again: %+v", again)
	}
	if len(e.bot.batches()) != 1 {
		t.Fatalf("calls %q: the next burst overtook the failed one", e.bot.batches())
	}
	// The retry of the failed flush runs the same two events.
	retry := fl[1]
	retry.Attributes["ApproximateReceiveCount"] = "2"
	if got := outcomes(e.handle(t, retry)); got != "ok" {
		t.Fatalf("retry: %s", got)
	}
	e.clk.Advance(recheck)
	if got := outcomes(e.handle(t, again...)); got != "ok" {
		t.Fatalf("the waiting flush after the first batch: %s", got)
	}
	b := e.bot.batches()
	if fmt.Sprint(b) != "[[ask one ask two] [ask one ask two] [ask three]]" {
		t.Fatalf("handler calls %q", b)
	}
	if n := len(e.line.Messages()); n != 2 {
		t.Fatalf("%d answers, want one per batch", n)
	}
}

// Crashes: a record whose flush could not be scheduled (the process died
// after the append, or SQS refused) fails and is retried: it is in the
// buffer once and its flush is scheduled again. A handler that panics in a
// flush leaves its batch sealed for the retry.
func TestDebounceCrashesAndRetries(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	e.q.sendErr = errors.New("sqs: throttled")
	m := e.ask("E1", "ask once")
	if got := outcomes(e.handle(t, m)); got != "failed" {
		t.Fatalf("append without a flush: %s, want failed", got)
	}
	e.q.sendErr = nil
	m.Attributes["ApproximateReceiveCount"] = "2"
	if got := outcomes(e.handle(t, m)); got != "debounced" {
		t.Fatalf("retry: %s", got)
	}
	e.bot.fail = []error{errPanic}
	e.clk.Advance(window)
	fl := e.flushes(t)
	if len(fl) != 1 {
		t.Fatalf("%d flushes, want 1", len(fl))
	}
	res := e.handle(t, fl[0])
	if outcomes(res) != "failed" || !res[0].Panicked {
		t.Fatalf("panicking batch: %+v", res)
	}
	fl[0].Attributes["ApproximateReceiveCount"] = "2"
	if got := outcomes(e.handle(t, fl[0])); got != "ok" {
		t.Fatalf("retry of the flush: %s", got)
	}
	if fmt.Sprint(e.bot.batches()) != "[[ask once] [ask once]]" || len(e.line.Messages()) != 1 {
		t.Fatalf("calls %q, messages %d: want the same one-event batch twice and one answer", e.bot.batches(), len(e.line.Messages()))
	}
}

// A chat queue record that comes back after its batch ran (its claim was
// lost with a crashed invocation) is recognised in the buffer's done list:
// not appended again, no flush.
func TestDebounceRedeliveryAfterItsBatchIsNotAppendedAgain(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	m := e.ask("F1", "ask me")
	e.handle(t, m)
	e.clk.Advance(window)
	e.handle(t, e.flushes(t)...)
	r := recordOf(t, m)
	step := debounce(debounceConfig{router: e.bot.router(window, window), store: e.proc.state, queues: e.proc.queues, longURL: longQueueURL,
		inProgressFor: time.Minute, keepFor: time.Hour, now: e.clk.Now, sleep: func(context.Context, time.Duration) error { return nil }, log: e.proc.log})
	ran := &nextStep{}
	if err := step(ran.handler)(context.Background(), r); err != nil || ran.calls != 0 || r.result.Outcome != OutcomeDebounced {
		t.Fatalf("err %v, next ran %d, outcome %q", err, ran.calls, r.result.Outcome)
	}
	if len(e.flushes(t)) != 0 {
		t.Fatal("a flush was scheduled again")
	}
}

// recordOf is m decoded and parsed, as the steps before debounce leave it.
func recordOf(t *testing.T, m events.SQSMessage) *record {
	t.Helper()
	_, detail, err := envelope.Decode([]byte(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	h, err := bot.Peek(detail.Event)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := bot.Parse(detail.Event, detail.Destination, detail.ReceivedAt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &record{msg: m, detail: detail, head: h, event: ev, result: Result{MessageID: m.MessageId, WebhookEventID: h.WebhookEventID}}
}

// Without a long-work queue there is nowhere to delay a flush: a debounced
// route runs each event at once. A buffer with no room left runs the event
// on its own too.
func TestDebounceFallsBackToRunningEachEvent(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second, WithLongQueue(""))
	if got := outcomes(e.handle(t, e.ask("G1", "ask a"), e.ask("G2", "ask b"))); got != "ok ok" {
		t.Fatalf("without a long-work queue: %s", got)
	}
	if fmt.Sprint(e.bot.batches()) != "[[ask a] [ask b]]" {
		t.Fatalf("calls %q", e.bot.batches())
	}

	// LINE's longest text is 5000 characters: 15 KB of Japanese in UTF-8.
	full := newDebounceEnv(t, window, time.Minute)
	long := "ask " + strings.Repeat("日", 4996)
	var got []string
	for i := range maxBufferBytes/len(long) + 1 {
		got = append(got, outcomes(full.handle(t, full.ask(fmt.Sprintf("H%02d", i), long))))
	}
	want := strings.TrimSpace(strings.Repeat("debounced ", maxBufferBytes/len(long))) + " ok"
	if strings.Join(got, " ") != want {
		t.Fatalf("a burst over the buffer's bytes: %v; want the event that does not fit run on its own", got)
	}
}

// A flush attribute that cannot be read is a malformed record: dead-lettered
// on its first receive.
func TestDebounceMalformedFlushIsDeadLettered(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	m := e.ask("I1", "ask")
	m.EventSourceARN = longQueueARN
	delete(m.Attributes, "MessageGroupId")
	m.MessageAttributes = map[string]events.SQSMessageAttribute{AttrDebounce: {DataType: "String", StringValue: aws.String(`{"seq":"x"}`)}}
	res := e.handle(t, m)
	if outcomes(res) != "dead-lettered" || !errors.Is(res[0].Err, errBadFlush) {
		t.Fatalf("malformed flush: %+v", res)
	}
}

// faultyState is a memory StateStore whose Get and Put fail when fault says
// so (op "get" or "put", n counting that op's calls from 1); a fault of
// idempotency.ErrConflict on a put first lets another writer write.
type faultyState struct {
	*idempotency.Memory
	mu    sync.Mutex
	n     map[string]int
	fault func(op string, n int) error
}

func (s *faultyState) hit(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[op]++
	if s.fault == nil {
		return nil
	}
	return s.fault(op, s.n[op])
}

func (s *faultyState) Get(ctx context.Context, key string) (idempotency.Versioned, error) {
	err := s.hit("get")
	if errors.Is(err, errCorrupt) {
		return idempotency.Versioned{Value: []byte("{not json"), Version: 1}, nil
	}
	if err != nil {
		return idempotency.Versioned{}, err
	}
	return s.Memory.Get(ctx, key)
}

func (s *faultyState) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	err := s.hit("put")
	if errors.Is(err, idempotency.ErrConflict) {
		// Another writer got there first: the buffer moves on a version.
		cur, _ := s.Memory.Get(ctx, key)
		if cur.Version == 0 {
			cur.Value = []byte(`{}`)
		}
		if _, perr := s.Memory.Put(ctx, key, cur.Value, cur.Version, keepFor); perr != nil {
			return 0, perr
		}
	}
	if err != nil {
		return 0, err
	}
	return s.Memory.Put(ctx, key, value, expected, keepFor)
}

// Every store failure of the debounce step fails the record, to be retried,
// and changes nothing; a conflict is read again and retried at once; a
// failure to record a batch done after its handler ran is logged and the
// flush still completes, so the handler never runs twice.
func TestDebounceStoreFailures(t *testing.T) {
	down := errors.New("dynamodb: unavailable")
	tests := []struct {
		name        string
		fault       func(op string, n int) error
		wantAppend  string
		wantFlush   string
		wantBatches string
	}{
		{name: "append cannot read the buffer", fault: func(op string, n int) error {
			return when(op == "get" && n == 1, down)
		}, wantAppend: "failed", wantFlush: "", wantBatches: "[]"},
		{name: "append cannot write the buffer", fault: func(op string, n int) error {
			return when(op == "put" && n == 1, down)
		}, wantAppend: "failed", wantFlush: "", wantBatches: "[]"},
		{name: "append's write conflicts once", fault: func(op string, n int) error {
			return when(op == "put" && n == 1, idempotency.ErrConflict)
		}, wantAppend: "debounced", wantFlush: "ok", wantBatches: "[[ask x]]"},
		{name: "the flush cannot seal", fault: func(op string, n int) error {
			return when(op == "put" && n == 2, down)
		}, wantAppend: "debounced", wantFlush: "failed", wantBatches: "[]"},
		{name: "the reply's attempt cannot be recorded", fault: func(op string, n int) error {
			return when(op == "put" && n == 3, down)
		}, wantAppend: "debounced", wantFlush: "failed", wantBatches: "[[ask x]]"},
		{name: "the batch cannot be recorded done", fault: func(op string, n int) error {
			return when(op == "put" && n == 4, down)
		}, wantAppend: "debounced", wantFlush: "ok", wantBatches: "[[ask x]]"},
		{name: "the buffer does not decode", fault: func(op string, n int) error {
			return when(op == "get" && n == 2, errCorrupt)
		}, wantAppend: "debounced", wantFlush: "failed", wantBatches: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.New(time.Now())
			store := &faultyState{Memory: idempotency.NewMemory(idempotency.WithClock(clk.Now)), fault: tt.fault}
			b := &askBot{}
			q := newFakeSQS(5)
			f := newFixtureOn(t, b.router(window, 10*time.Second), store, WithStateStore(store), WithQueues(q), WithLongQueue(longQueueURL),
				WithClock(clk.Now), withSleep(func(context.Context, time.Duration) error { return nil }))
			e := &debounceEnv{fixture: f, bot: b, clk: clk, q: q}
			m := e.ask("J1", "ask x")
			if got := outcomes(e.handle(t, m)); got != tt.wantAppend {
				t.Fatalf("append: %s, want %s", got, tt.wantAppend)
			}
			fl := e.flushes(t)
			if tt.wantFlush == "" {
				if len(fl) != 0 {
					t.Fatalf("a failed append scheduled %d flushes", len(fl))
				}
			} else {
				clk.Advance(window)
				if got := outcomes(e.handle(t, fl...)); got != tt.wantFlush {
					t.Fatalf("flush: %s, want %s", got, tt.wantFlush)
				}
				if tt.wantFlush == "ok" {
					fl[0].Attributes["ApproximateReceiveCount"] = "2"
					if got := outcomes(e.handle(t, fl[0])); got != "duplicate" {
						t.Fatalf("redelivered flush: %s", got)
					}
				}
			}
			if got := fmt.Sprint(b.batches()); got != tt.wantBatches {
				t.Fatalf("handler calls %s, want %s", got, tt.wantBatches)
			}
		})
	}
}

// errCorrupt stands for a read that returns what does not decode: the
// wrapper turns it into such a value.
var errCorrupt = errors.New("corrupt")

func when(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

// A flush due after the invocation's end fails (and is retried) instead of
// waiting past it.
func TestDebounceFlushDueAfterTheInvocationFails(t *testing.T) {
	e := newDebounceEnv(t, window, 10*time.Second)
	e.handle(t, e.ask("K1", "ask late"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := e.proc.Handle(ctx, events.SQSEvent{Records: e.flushes(t)}); err != nil {
		t.Fatal(err)
	}
	last := e.seen[len(e.seen)-1]
	if last.Outcome != OutcomeFailed || !errors.Is(last.Err, errNotDue) || len(e.slept) != 0 {
		t.Fatalf("result %+v, slept %v", last, e.slept)
	}
}
