package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
)

// deadLetters returns n dead-letter notices of queue, one per event, a
// second apart from start; sig, when not empty, is the stack signature of
// the crash that dead-lettered them.
func deadLetters(t *testing.T, n int, queue, sig string, start time.Time, idPrefix string) []events.SNSEventRecord {
	t.Helper()
	var out []events.SNSEventRecord
	for i := range n {
		d := crash.NewDeadLetter(queue, "linegate-InteractiveQueue.fifo", "permanent", errors.New("cannot ever work"), nil,
			start.Add(time.Duration(i)*time.Second))
		d.EventType, d.WebhookEventID, d.Function = "message", fmt.Sprintf("01DL%s%03d", idPrefix, i), "linegate-WorkerFunction-Ab12Cd34Ef56"
		if sig != "" {
			d.Reason, d.Signature, d.Frames = "retries-exhausted", sig, []string{"main.f main.go:1"}
		}
		b, err := d.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, events.SNSEventRecord{SNS: events.SNSEntity{
			MessageID: fmt.Sprintf("dl-%s-%03d", idPrefix, i),
			TopicArn:  "arn:aws:sns:ap-northeast-1:123456789012:linegate-OpsTopic",
			Message:   string(b),
			Timestamp: d.Time,
			MessageAttributes: map[string]any{
				crash.AttributeKind: map[string]any{"Type": "String", "Value": crash.KindDeadLetter},
			},
		}})
	}
	return out
}

// ledgerFixture is a notifier with a paging ledger in a memory store, a
// test clock and a fake DLQ.
type ledgerFixture struct {
	t       *testing.T
	n       *Notifier
	p       *fakePusher
	clk     *testclock.Clock
	store   *idempotency.Memory
	depths  *fakeDepths
	metrics *testmetrics.Recorder
}

func newLedgerFixture(t *testing.T, store *idempotency.Memory, clk *testclock.Clock, opts ...Option) *ledgerFixture {
	t.Helper()
	f := &ledgerFixture{t: t, clk: clk, store: store, depths: &fakeDepths{depth: map[string]int{}}, metrics: &testmetrics.Recorder{}}
	var ledgerOpt Option = func(*Notifier) {}
	if store != nil {
		ledgerOpt = WithLedger(memLedger{store}, 15*time.Minute)
	}
	base := []Option{WithClock(clk.Now), ledgerOpt, WithMetrics(f.metrics),
		WithSweep(f.depths, []string{"https://sqs.ap-northeast-1.amazonaws.com/123456789012/linegate-InteractiveDLQ.fifo"}, 2*time.Minute)}
	f.n, f.p, _ = newTestNotifier(t, []string{opUser}, append(base, opts...)...)
	return f
}

func (f *ledgerFixture) handle(recs ...events.SNSEventRecord) events.SQSEventResponse {
	f.t.Helper()
	resp, err := f.n.HandleQueue(context.Background(), viaQueue(f.t, events.SNSEvent{Records: recs}))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

func (f *ledgerFixture) sweep() SweepResult {
	f.t.Helper()
	res, err := f.n.Sweep(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// alts lists the altText of every card pushed to the operator, in order.
func (f *ledgerFixture) alts() []string {
	var out []string
	for _, c := range f.p.to(opUser) {
		for _, m := range messagesOf(f.t, c) {
			out = append(out, m["altText"].(string))
		}
	}
	return out
}

type fakeDepths struct {
	mu    sync.Mutex
	depth map[string]int
	err   error
}

func (d *fakeDepths) set(name string, n int) { d.mu.Lock(); d.depth[name] = n; d.mu.Unlock() }

func (d *fakeDepths) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages": strconv.Itoa(d.depth[queueNameOf(*in.QueueUrl)]), "ApproximateNumberOfMessagesNotVisible": "0",
	}}, nil
}

const dlq = "linegate-InteractiveDLQ.fifo"

// The second dead letter of a window is not lost: it is held, and the
// sweep pages its digest once the window has passed. One after the window
// pages at once.
func TestEveryDeadLetterReachesTheOperator(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "a")...)
	if alts := f.alts(); len(alts) != 1 || !strings.HasPrefix(alts[0], "[DEAD LETTER] "+dlq+": cannot ever work") {
		t.Fatalf("first dead letter: cards %q", alts)
	}
	clk.Advance(5 * time.Minute)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "b")...)
	if n := len(f.alts()); n != 1 {
		t.Fatalf("the second dead letter of the window pushed at once (%d cards)", n)
	}
	clk.Advance(5 * time.Minute)
	if r := f.sweep(); r.Digests != 0 || len(f.alts()) != 1 {
		t.Fatalf("a digest before the window passed: %+v", r)
	}
	clk.Advance(5 * time.Minute)
	if r := f.sweep(); r.Digests != 1 {
		t.Fatalf("sweep after the window: %+v, want one digest", r)
	}
	alts := f.alts()
	if len(alts) != 2 || !strings.Contains(alts[1], "[DEAD LETTER ×1] "+dlq+": Still happening") {
		t.Fatalf("cards %q, want the digest of the second dead letter", alts)
	}
	digest := strings.Join(texts(messagesOf(t, f.p.to(opUser)[1])[0]["contents"]), "\n")
	for _, want := range []string{"1 dead letters since the card of 2026-03-14 10:02:03 JST", "01DLb000"} {
		if !strings.Contains(digest, want) {
			t.Errorf("digest lacks %q:\n%s", want, digest)
		}
	}
	if r := f.sweep(); r.Digests != 0 {
		t.Fatalf("a digest sent twice: %+v", r)
	}
	clk.Advance(20 * time.Minute)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "c")...)
	if alts := f.alts(); len(alts) != 3 || !strings.HasPrefix(alts[2], "[DEAD LETTER] ") {
		t.Fatalf("a dead letter after the window: cards %q, want a card at once", alts)
	}
}

// A crash loop of any length pages once per stack signature per window,
// first at once, then a digest with the count; the dead letters of the
// crashed events are counted on the crash's card and send nothing of their
// own.
func TestCrashLoopPagesOncePerWindow(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	var sig string
	const events, every = 80, 15 * time.Second // a 20-minute loop, a new crashing event every 15 s
	for i := range events {
		c := crashes(t, 1, 0, clk.Now(), fmt.Sprintf("c%03d", i))
		if sig == "" {
			sig = crash.Signature(mustParse(t, c[0]).crash.Function, mustParse(t, c[0]).crash.Stack, "")
		}
		f.handle(c...)
		f.handle(deadLetters(t, 1, dlq, sig, clk.Now(), fmt.Sprintf("d%03d", i))...)
		clk.Advance(every)
		if clk.Now().Sub(burstStart)%time.Minute == 0 {
			f.sweep()
		}
	}
	for range 20 {
		clk.Advance(time.Minute)
		f.sweep()
	}
	alts := f.alts()
	t.Logf("cards: %q", alts)
	if len(alts) > 3 {
		t.Fatalf("%d cards for a 20-minute crash loop, want at most 3 (one per 15-minute window): %q", len(alts), alts)
	}
	total, dead := 0, 0
	count := regexp.MustCompile(`(\d+) crashes(?:, (\d+) dead-lettered)?`)
	for i, c := range f.p.to(opUser) {
		if !strings.HasPrefix(alts[i], "[CRASH") {
			t.Fatalf("card %d is not a crash card: %q", i, alts[i])
		}
		all := strings.Join(texts(messagesOf(t, c)[0]["contents"]), "\n")
		if m := count.FindStringSubmatch(all); m != nil {
			n, _ := strconv.Atoi(m[1])
			d, _ := strconv.Atoi(m[2])
			total, dead = total+n, dead+d
		} else {
			total++ // a card of one crash
		}
	}
	if total != events || dead < events-1 {
		t.Fatalf("the cards count %d crashes and %d dead letters, want %d and at least %d: %q", total, dead, events, events-1, alts)
	}
	if got := f.metrics.Total(MetricDeadLetters); got != 0 {
		t.Fatalf("%v dead-letter cards of their own for crashed events", got)
	}
}

// The ledger outlives the process: a notifier started anew on the same
// store (a restart, a redeploy) neither re-sends a card for a redelivered
// message nor pages a report of the window again.
func TestRestartSendsNoCardAgain(t *testing.T) {
	clk := testclock.New(burstStart)
	store := idempotency.NewMemory(idempotency.WithClock(clockNow(clk)))
	first := newLedgerFixture(t, store, clk)
	c := crashes(t, 1, 0, clk.Now(), "r")
	first.handle(c...)
	if len(first.alts()) != 1 {
		t.Fatalf("cards %q", first.alts())
	}
	clk.Advance(time.Minute)
	again := newLedgerFixture(t, store, clk)
	again.handle(c...)                                                        // the same message, delivered again
	again.handle(crashes(t, 1, 0, clk.Now(), "s")...)                         // another event, same bug
	again.handle(deadLetters(t, 1, dlq, c[0].SNS.Message, clk.Now(), "r")...) // unrelated signature text: its own card
	if alts := again.alts(); len(alts) != 1 || !strings.HasPrefix(alts[0], "[DEAD LETTER]") {
		t.Fatalf("after the restart: cards %q, want only the new dead letter's", alts)
	}
	clk.Advance(15 * time.Minute)
	again.sweep()
	if alts := again.alts(); len(alts) != 2 || !strings.HasPrefix(alts[1], "[CRASH ×1]") {
		t.Fatalf("after the window: cards %q, want the digest of the one new crash", alts)
	}
}

// A card whose push failed is taken back: its records fail, and when SQS
// delivers them again they page (LINE dedupes by the same retry key if the
// first push did arrive).
func TestFailedCardIsTakenBack(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	f.p.failCall = map[int]error{0: errors.New("LINE is down")}
	recs := deadLetters(t, 1, dlq, "", clk.Now(), "f")
	if resp := f.handle(recs...); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %+v, want the record back", resp.BatchItemFailures)
	}
	clk.Advance(3 * time.Minute) // the ops queue's visibility timeout
	if resp := f.handle(recs...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry failures %+v", resp.BatchItemFailures)
	}
	calls := f.p.to(opUser)
	if len(calls) != 2 || calls[0].RetryKey != calls[1].RetryKey {
		t.Fatalf("%d pushes, retry keys %q / %q: want the same card again under the same key", len(calls), calls[0].RetryKey, calls[len(calls)-1].RetryKey)
	}
	clk.Advance(15 * time.Minute)
	if r := f.sweep(); r.Digests != 0 {
		t.Fatalf("the retried card was counted again for a digest: %+v", r)
	}
}

// A digest whose push fails is taken back and sent by the next sweep.
func TestFailedDigestIsSentByTheNextSweep(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	f.handle(crashes(t, 1, 0, clk.Now(), "a")...)
	f.handle(crashes(t, 2, 0, clk.Now().Add(time.Second), "b")...)
	clk.Advance(16 * time.Minute)
	f.p.failCall = map[int]error{1: errors.New("LINE is down")}
	if _, err := f.n.Sweep(context.Background()); err == nil {
		t.Fatal("a sweep whose digest failed returned nil")
	}
	clk.Advance(time.Minute)
	if r := f.sweep(); r.Digests != 1 {
		t.Fatalf("next sweep: %+v, want the digest again", r)
	}
	if alts := f.alts(); len(alts) != 3 || !strings.HasPrefix(alts[2], "[CRASH ×2]") {
		t.Fatalf("cards %q", alts)
	}
}

// An alarm's state change pages at once, and so does its first resolution
// in the window; a flapping alarm's further changes wait for the digest,
// which shows the newest state.
func TestFlappingAlarmPagesBounded(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	states := alarms(t, "linegate-webhook-errors", clk.Now(), "ALARM", "OK", "ALARM", "OK", "ALARM")
	for _, a := range states {
		f.handle(a)
		clk.Advance(time.Minute)
	}
	alts := f.alts()
	if len(alts) != 2 || !strings.HasPrefix(alts[0], "[ALARM] ") || !strings.HasPrefix(alts[1], "[OK] ") {
		t.Fatalf("cards %q, want the ALARM and its resolution", alts)
	}
	clk.Advance(15 * time.Minute)
	f.sweep()
	if alts := f.alts(); len(alts) != 3 || !strings.HasPrefix(alts[2], "[ALARM ×3] linegate-webhook-errors") {
		t.Fatalf("cards %q, want a digest of 3 with the newest state, ALARM", alts)
	}
}

// When the ledger cannot be read the notifier pages as if it had none:
// another card beats no card.
func TestLedgerUnavailablePagesAnyway(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, nil, clk, WithLedger(brokenStore{}, time.Minute))
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "a")...)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "b")...)
	if len(f.alts()) != 2 || f.metrics.Total(MetricLedgerErrors) != 2 {
		t.Fatalf("cards %q, ledger errors %v", f.alts(), f.metrics.Total(MetricLedgerErrors))
	}
	if _, err := f.n.Sweep(context.Background()); err == nil {
		t.Fatal("a sweep without its ledger returned nil")
	}
}

// Two notifiers writing the ledger at once: the loser reads again and
// decides on what the winner wrote.
func TestLedgerConflictIsRetried(t *testing.T) {
	clk := testclock.New(burstStart)
	mem := idempotency.NewMemory(idempotency.WithClock(clockNow(clk)))
	racing := &racingStore{memLedger: memLedger{mem}}
	f := newLedgerFixture(t, nil, clk, WithLedger(racing, 15*time.Minute))
	racing.before = func() { // another notifier pages the same DLQ first
		other := newLedgerFixture(t, mem, clk)
		other.handle(deadLetters(t, 1, dlq, "", clk.Now(), "x")...)
	}
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "y")...)
	if n := len(f.alts()); n != 0 {
		t.Fatalf("%d cards: the conflicting write's loser paged too", n)
	}
	if racing.conflicts != 1 {
		t.Fatalf("%d conflicts, want 1", racing.conflicts)
	}
}

// The sweep pages messages that reach a DLQ with no notice (SQS's redrive
// after a crash or timeout, EventBridge's rule-target DLQ) once their
// count has disagreed for the grace; notices that arrive late, and messages
// that leave, page nothing.
func TestSweepFindsUnannouncedDeadLetters(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	f.depths.set(dlq, 1) // the worker's dead letter is in the queue before its notice arrives
	f.sweep()
	clk.Advance(time.Minute)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "n")...)
	clk.Advance(time.Minute)
	if r := f.sweep(); r.Unannounced != 0 || len(f.alts()) != 1 {
		t.Fatalf("a late notice was taken for an unannounced dead letter: %+v %q", r, f.alts())
	}
	clk.Advance(20 * time.Minute)
	f.depths.set(dlq, 3) // two more, moved by SQS after their last receive
	f.sweep()
	clk.Advance(time.Minute)
	if r := f.sweep(); r.Unannounced != 0 {
		t.Fatalf("paged before the grace: %+v", r)
	}
	clk.Advance(time.Minute)
	if r := f.sweep(); r.Unannounced != 2 {
		t.Fatalf("after the grace: %+v, want 2 unannounced", r)
	}
	if alts := f.alts(); len(alts) != 2 || !strings.Contains(alts[1], "2 message(s) reached the DLQ with no notice") {
		t.Fatalf("cards %q", alts)
	}
	f.depths.set(dlq, 0) // redriven
	for range 4 {
		clk.Advance(time.Minute)
		f.sweep()
	}
	clk.Advance(20 * time.Minute)
	f.handle(deadLetters(t, 1, dlq, "", clk.Now(), "m")...)
	f.depths.set(dlq, 1)
	for range 4 {
		clk.Advance(time.Minute)
		if r := f.sweep(); r.Unannounced != 0 {
			t.Fatalf("after a redrive, an announced dead letter was paged again: %+v", r)
		}
	}
	if got := f.metrics.Total(MetricUnannounced); got != 2 {
		t.Fatalf("%v unannounced counted, want 2", got)
	}
}

// A DLQ whose depth cannot be read fails the sweep (its Errors alarm
// escalates) but not the digests.
func TestSweepDepthFailure(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	f.handle(crashes(t, 1, 0, clk.Now(), "a")...)
	f.handle(crashes(t, 1, 0, clk.Now(), "b")...)
	f.depths.err = errors.New("AccessDenied")
	clk.Advance(15 * time.Minute)
	res, err := f.n.Sweep(context.Background())
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") || res.Digests != 1 {
		t.Fatalf("Sweep = %+v, %v; want the digest and the depth error", res, err)
	}
}

// The ledger stays within an item's size however many signatures a storm
// has, and pages (unsuppressed) what it cannot remember.
func TestLedgerIsBounded(t *testing.T) {
	clk := testclock.New(burstStart)
	store := &sizeStore{memLedger: memLedger{idempotency.NewMemory(idempotency.WithClock(clockNow(clk)))}}
	f := newLedgerFixture(t, nil, clk, WithLedger(store, 15*time.Minute))
	for site := range 3 * maxLedgerKeys {
		f.handle(crashes(t, 2, site, clk.Now(), fmt.Sprintf("s%03d", site))...)
		f.handle(crashes(t, 1, site, clk.Now(), fmt.Sprintf("t%03d", site))...) // held for the digest
	}
	if store.largest > idempotency.MaxValueBytes {
		t.Fatalf("the ledger grew to %d bytes, over an item's %d", store.largest, idempotency.MaxValueBytes)
	}
	if n := len(f.alts()); n < 3*maxLedgerKeys {
		t.Fatalf("%d cards for %d signatures", n, 3*maxLedgerKeys)
	}
}

func clockNow(c *testclock.Clock) func() time.Time { return c.Now }

type brokenStore struct{}

func (brokenStore) Get(context.Context, string) ([]byte, int64, error) {
	return nil, 0, errors.New("ProvisionedThroughputExceededException")
}
func (brokenStore) Put(context.Context, string, []byte, int64, time.Duration) (int64, error) {
	return 0, errors.New("ProvisionedThroughputExceededException")
}

// memLedger is the ledger in a memory store, as notifierfn adapts the
// idempotency table.
type memLedger struct{ m *idempotency.Memory }

func (l memLedger) Get(ctx context.Context, key string) ([]byte, int64, error) {
	v, err := l.m.Get(ctx, key)
	return v.Value, v.Version, err
}

func (l memLedger) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	v, err := l.m.Put(ctx, key, value, expected, keepFor)
	if errors.Is(err, idempotency.ErrConflict) {
		err = fmt.Errorf("%w: %w", ErrLedgerConflict, err)
	}
	return v, err
}

// racingStore runs before once, between the first read and its write.
type racingStore struct {
	memLedger
	before    func()
	conflicts int
}

func (r *racingStore) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	if r.before != nil {
		r.before()
		r.before = nil
	}
	v, err := r.memLedger.Put(ctx, key, value, expected, keepFor)
	if errors.Is(err, ErrLedgerConflict) {
		r.conflicts++
	}
	return v, err
}

type sizeStore struct {
	memLedger
	largest int
}

func (s *sizeStore) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	s.largest = max(s.largest, len(value))
	var st ledgerState
	if err := json.Unmarshal(value, &st); err != nil {
		return 0, err
	}
	return s.memLedger.Put(ctx, key, value, expected, keepFor)
}

// While dead letters keep coming, the depth is always a notice or two
// ahead of the notices: a surplus that moves on is no unannounced dead
// letter.
func TestSweepIgnoresAStreamOfLateNotices(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	for i := range 30 {
		f.depths.set(dlq, i+1) // in the queue a moment before its notice
		f.sweep()
		clk.Advance(30 * time.Second)
		f.handle(deadLetters(t, 1, dlq, "sig", clk.Now(), fmt.Sprintf("s%02d", i))...)
		clk.Advance(30 * time.Second)
	}
	if r := f.sweep(); r.Unannounced != 0 || f.metrics.Total(MetricUnannounced) != 0 {
		t.Fatalf("%v unannounced dead letters for a stream of late notices", f.metrics.Total(MetricUnannounced))
	}
}

// When the window has passed and a crashed event's dead letter arrives
// before the sweep, the card it carries is the crash's, with the crashes
// held and the dead letter counted.
func TestDeadLetterAfterTheWindowCarriesTheCrashCard(t *testing.T) {
	clk := testclock.New(burstStart)
	f := newLedgerFixture(t, idempotency.NewMemory(idempotency.WithClock(clockNow(clk))), clk)
	c := crashes(t, 3, 0, clk.Now(), "w")
	sig := mustParse(t, c[0]).crash.Signature()
	f.handle(c[0])
	f.handle(c[1:]...)
	clk.Advance(16 * time.Minute)
	f.handle(deadLetters(t, 1, dlq, sig, clk.Now(), "w")...)
	alts := f.alts()
	if len(alts) != 2 || !strings.HasPrefix(alts[1], "[CRASH ×2]") {
		t.Fatalf("cards %q, want the crash card carrying the 2 held crashes and the dead letter", alts)
	}
	all := strings.Join(texts(messagesOf(t, f.p.to(opUser)[1])[0]["contents"]), "\n")
	if !strings.Contains(all, "2 crashes, 1 dead-lettered") {
		t.Fatalf("card:\n%s", all)
	}
}
