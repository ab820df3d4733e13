package local

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/linegate/linegate/internal/awserr"
)

// A token bucket holds its burst and refills at its rate; no quota is no
// bucket, which never refuses.
func TestBucket(t *testing.T) {
	b := newBucket(1, 3) // 1 a second, 3 at once
	for i := range 3 {
		if !b.take() {
			t.Fatalf("token %d of the burst refused", i+1)
		}
	}
	if b.take() {
		t.Fatal("a fourth token at once")
	}
	b.last = b.last.Add(-time.Second) // a second passes
	if !b.take() || b.take() {
		t.Fatal("after a second: want exactly one more token")
	}
	var none *bucket = newBucket(0, 0)
	for range 1000 {
		if !none.take() {
			t.Fatal("no quota refused a call")
		}
	}
}

// The stage throttle answers 429 above its bucket and records the limit;
// the webhook's share of the account's concurrency answers 503 when spent.
func TestAdmitWebhook(t *testing.T) {
	m := newCapacityModel(Capacity{Quotas: Quotas{APIRate: 1, APIBurst: 2, AccountConcurrency: 4}}, 2)
	var done []func()
	for i := range 2 {
		st, d := m.admitWebhook()
		if st != 0 {
			t.Fatalf("request %d refused with %d", i, st)
		}
		done = append(done, d)
	}
	if st, _ := m.admitWebhook(); st != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d, want 429", st)
	}
	m.api = newBucket(1000, 1000)
	if st, _ := m.admitWebhook(); st != http.StatusServiceUnavailable {
		t.Fatalf("a third concurrent webhook with 2 of 4 reserved: %d, want 503", st)
	}
	done[0]()
	if st, _ := m.admitWebhook(); st != 0 {
		t.Fatalf("after one ended: %d", st)
	}
	hits := m.hits()
	if len(hits) != 2 || hits[0].Name != LimitAPIThrottle || hits[1].Name != LimitConcurrency || hits[0].Count != 1 {
		t.Fatalf("limits %+v", hits)
	}
}

// A throttled call is the error AWS answers with, which the webhook's
// senders retry (as they would ThrottlingException).
func TestModelledBusThrottles(t *testing.T) {
	m := newCapacityModel(Capacity{Quotas: Quotas{PutEvents: 1}}, 0)
	var calls atomic.Int32
	bus := modelledBus{next: putterFunc(func() { calls.Add(1) }), m: m}
	if _, err := bus.PutEvents(context.Background(), &eventbridge.PutEventsInput{}); err != nil {
		t.Fatal(err)
	}
	_, err := bus.PutEvents(context.Background(), &eventbridge.PutEventsInput{})
	if code, _, again := awserr.Classify(err); code != "ThrottlingException" || !again {
		t.Fatalf("throttled: %v (%s, retryable %v)", err, code, again)
	}
	if calls.Load() != 1 || m.hits()[0].Name != LimitPutEvents {
		t.Fatalf("%d calls reached the bus, limits %+v", calls.Load(), m.hits())
	}
}

type putterFunc func()

func (f putterFunc) PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f()
	return &eventbridge.PutEventsOutput{}, nil
}

// An event source starts with ESMInitial batches at once and adds one per
// 60/ESMRampPerMinute seconds (dilated) while messages wait, up to its
// maximum, which it then reports having run at. (That it does not scale
// without a backlog is not asserted: "nothing happened" has no signal.)
func TestESMGateRamps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newCapacityModel(Capacity{Dilation: 1, Quotas: Quotas{ESMInitial: 2, ESMRampPerMinute: 6000}}, 0) // one more every 10 ms
	var backlog atomic.Bool
	g := m.gate(ctx, "Q", 5, backlog.Load)
	if a := g.active.Load(); a != 2 {
		t.Fatalf("starts with %d, want 2", a)
	}
	if m.gate(ctx, "Q", 5, backlog.Load) != g {
		t.Fatal("a second gate for one mapping")
	}
	waited := make(chan bool)
	go func() { waited <- g.await(ctx, 3) }() // poller 3 waits for the fourth batch
	backlog.Store(true)
	select {
	case ok := <-waited:
		if !ok {
			t.Fatal("await gave up")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("poller 3 never started with a backlog")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !g.atMax.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("never at its maximum: %d of 5", g.active.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a := g.active.Load(); a != 5 {
		t.Fatalf("%d batches at once, want the maximum 5", a)
	}
	cancel()
	if g.await(ctx, 9) {
		t.Fatal("await past the maximum returned true after the context ended")
	}
}

// The local Messaging API answers 429 above LINE's rate, as LINE does.
func TestModelledLINE(t *testing.T) {
	m := newCapacityModel(Capacity{Quotas: Quotas{LINE: 1}}, 0)
	h := m.lineAPI(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	codes := []int{}
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/bot/message/reply", nil))
		codes = append(codes, rec.Code)
	}
	if codes[0] != 200 || codes[1] != http.StatusTooManyRequests {
		t.Fatalf("codes %v, want [200 429]", codes)
	}
}

// Without the capacity model a mapping's pollers scale on demand: five
// poll at first; each time the highest of them receives messages one more
// starts (woken, not polling for its turn), up to MaximumConcurrency; each
// time the highest receives none one stops, down to the five.
func TestDemandGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := demandGate(50)
	g.max = 50 // whatever this machine's CPUs
	if a := g.active.Load(); a != 5 {
		t.Fatalf("starts with %d, want 5", a)
	}
	woke := make(chan bool)
	go func() { woke <- g.await(ctx, 5) }()
	g.received(3, 10) // not the highest: no change
	if a := g.active.Load(); a != 5 {
		t.Fatalf("a lower poller's receive scaled the mapping to %d", a)
	}
	g.received(4, 10)
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("await gave up")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("poller 5 was not woken when the mapping grew")
	}
	for i := 5; i < 60; i++ {
		g.received(i, 1)
	}
	if a := g.active.Load(); a != 50 {
		t.Fatalf("%d at once, want the maximum 50", a)
	}
	for i := 49; i >= 0; i-- {
		g.received(i, 0)
	}
	if a := g.active.Load(); a != 5 {
		t.Fatalf("idle at %d, want back to 5", a)
	}
	if g := demandGate(2); g.active.Load() != 2 {
		t.Fatalf("a mapping of at most 2 starts with %d", g.active.Load())
	}
	if g, want := demandGate(1000), max(5, 4*runtime.GOMAXPROCS(0)); int(g.max) != want {
		t.Fatalf("a mapping of 1,000 runs up to %d batches at once here, want %d (4 per CPU)", g.max, want)
	}
	cancel()
	if g.await(ctx, 7) {
		t.Fatal("await after ctx ended")
	}
}
