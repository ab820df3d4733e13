package ingress

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/testmetrics"
)

// rotatingStore stands in for the secret's parameter: what it returns can
// change (a rotation), it can fail, and it counts its reads. A read can be
// held until released, to have requests arrive while one is in flight.
type rotatingStore struct {
	mu    sync.Mutex
	vals  []string
	err   error
	reads atomic.Int32
	hold  chan struct{} // when non-nil, a read waits for it to close
}

func (s *rotatingStore) set(err error, vals ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals, s.err = vals, err
}

func (s *rotatingStore) read(ctx context.Context) ([]string, error) {
	s.reads.Add(1)
	s.mu.Lock()
	hold, vals, err := s.hold, s.vals, s.err
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return vals, err
}

// manualClock is the refresher's clock, moved by the test.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newRotatingHandler(t *testing.T, store *rotatingStore, m *testmetrics.Recorder) (*Handler, *manualClock) {
	t.Helper()
	clock := &manualClock{now: fixedNow}
	h := newHandler(t, &fakePublisher{}, WithSecrets("old-secret"), WithSecretRefresh(store.read, 10*time.Second), WithMetrics(m))
	h.refresh.now = clock.Now
	return h, clock
}

func signWith(key string, body []byte) string { return signature.Sign([]byte(key), body) }

// LINE invalidates the old channel secret the moment it issues a new one
// (developers.line.biz/en/docs/messaging-api/verify-webhook-signature/).
// Once the new secret is in SSM, the first webhook signed with it makes a
// warm webhook re-read the secret and is accepted; later ones need no read.
func TestRotationAcceptsTheNewSecret(t *testing.T) {
	store := &rotatingStore{}
	store.set(nil, "old-secret")
	m := &testmetrics.Recorder{}
	h, _ := newRotatingHandler(t, store, m)
	body := sample(t, "message-text-user.json")
	if resp, _ := h.Handle(context.Background(), "POST", signWith("old-secret", body), body); resp.Status != 200 {
		t.Fatalf("old secret before the rotation: %d", resp.Status)
	}
	if n := store.reads.Load(); n != 0 {
		t.Fatalf("%d reads for a signature that verified", n)
	}
	store.set(nil, "new-secret", "") // the operator put LINE's new secret in SSM
	for i := range 3 {
		resp, err := h.Handle(context.Background(), "POST", signWith("new-secret", body), body)
		if resp.Status != 200 || err != nil {
			t.Fatalf("webhook %d signed with the new secret: %d %v", i, resp.Status, err)
		}
	}
	if n := store.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1: the first mismatch reads, the new secret then verifies", n)
	}
	if resp, _ := h.Handle(context.Background(), "POST", signWith("old-secret", body), body); resp.Status != 401 {
		t.Fatalf("the invalidated old secret after the rotation: %d, want 401", resp.Status)
	}
	if m.Total(MetricSecretRereads) < 1 || m.Total(MetricSecretRotations) != 1 {
		t.Fatalf("metrics: %v re-reads, %v rotations", m.Total(MetricSecretRereads), m.Total(MetricSecretRotations))
	}
}

// Requests signed with a key the webhook will never hold cost SSM at most
// one read per cooldown; a missing or garbled signature costs none.
func TestRereadAtMostOncePerCooldown(t *testing.T) {
	store := &rotatingStore{}
	store.set(nil, "old-secret")
	h, clock := newRotatingHandler(t, store, &testmetrics.Recorder{})
	body := sample(t, "message-text-user.json")
	for _, sig := range []string{"", "garbage", signWith("x", body)[:40]} {
		if resp, _ := h.Handle(context.Background(), "POST", sig, body); resp.Status != 401 {
			t.Fatalf("signature %q: %d", sig, resp.Status)
		}
	}
	if n := store.reads.Load(); n != 0 {
		t.Fatalf("%d reads for signatures no key could have made", n)
	}
	attacker := signWith("someone-elses-secret", body)
	for range 5 {
		if resp, err := h.Handle(context.Background(), "POST", attacker, body); resp.Status != 401 || !errors.Is(err, ErrSignature) {
			t.Fatalf("a foreign key: %d %v", resp.Status, err)
		}
	}
	if n := store.reads.Load(); n != 1 {
		t.Fatalf("%d reads within one cooldown, want 1", n)
	}
	clock.Advance(9 * time.Second)
	h.Handle(context.Background(), "POST", attacker, body)
	if n := store.reads.Load(); n != 1 {
		t.Fatalf("%d reads 9 s after the first, want still 1", n)
	}
	clock.Advance(time.Second)
	h.Handle(context.Background(), "POST", attacker, body)
	if n := store.reads.Load(); n != 2 {
		t.Fatalf("%d reads once the cooldown passed, want 2", n)
	}
}

// A rotation in SSM that lands within a cooldown of a read is picked up by
// the first mismatch after the cooldown: the refused webhooks of that
// window are redelivered by LINE and accepted.
func TestRotationAfterARecentRead(t *testing.T) {
	store := &rotatingStore{}
	store.set(nil, "old-secret")
	h, clock := newRotatingHandler(t, store, &testmetrics.Recorder{})
	body := sample(t, "message-text-user.json")
	h.Handle(context.Background(), "POST", signWith("new-secret", body), body) // LINE switched, SSM not yet
	store.set(nil, "new-secret")
	if resp, _ := h.Handle(context.Background(), "POST", signWith("new-secret", body), body); resp.Status != 401 {
		t.Fatalf("within the cooldown of the last read: %d, want 401 (no read)", resp.Status)
	}
	clock.Advance(10 * time.Second)
	if resp, _ := h.Handle(context.Background(), "POST", signWith("new-secret", body), body); resp.Status != 200 {
		t.Fatalf("the redelivery after the cooldown: %d, want 200", resp.Status)
	}
}

// A read that fails keeps the secrets held (and refuses), and the next
// cooldown's read succeeds.
func TestRereadFailureKeepsTheSecrets(t *testing.T) {
	store := &rotatingStore{}
	store.set(errors.New("ssm GetParameters: throttled"))
	h, clock := newRotatingHandler(t, store, &testmetrics.Recorder{})
	body := sample(t, "message-text-user.json")
	if resp, _ := h.Handle(context.Background(), "POST", signWith("new-secret", body), body); resp.Status != 401 {
		t.Fatalf("read failed: %d, want 401", resp.Status)
	}
	if resp, _ := h.Handle(context.Background(), "POST", signWith("old-secret", body), body); resp.Status != 200 {
		t.Fatalf("the secret held still verifies after a failed read: %d", resp.Status)
	}
	store.set(nil) // no secret at all: refused as a failure too
	clock.Advance(10 * time.Second)
	if resp, _ := h.Handle(context.Background(), "POST", signWith("new-secret", body), body); resp.Status != 401 {
		t.Fatalf("read returned nothing: %d", resp.Status)
	}
	if resp, _ := h.Handle(context.Background(), "POST", signWith("old-secret", body), body); resp.Status != 200 {
		t.Fatalf("an empty read replaced the secrets: %d", resp.Status)
	}
	store.set(nil, "new-secret", "old-secret")
	clock.Advance(10 * time.Second)
	for _, key := range []string{"new-secret", "old-secret"} {
		if resp, _ := h.Handle(context.Background(), "POST", signWith(key, body), body); resp.Status != 200 {
			t.Fatalf("%s after a good read (current and previous): %d", key, resp.Status)
		}
	}
}

// Webhooks that arrive while a read is in flight wait for it and are
// checked against what it found: one read serves them all.
func TestConcurrentMismatchesShareOneRead(t *testing.T) {
	store := &rotatingStore{hold: make(chan struct{})}
	store.set(nil, "new-secret")
	h, _ := newRotatingHandler(t, store, &testmetrics.Recorder{})
	body := sample(t, "message-text-user.json")
	sig := signWith("new-secret", body)
	const n = 20
	statuses := make(chan int, n)
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		go func() {
			started.Done()
			resp, _ := h.Handle(context.Background(), "POST", sig, body)
			statuses <- resp.Status
		}()
	}
	started.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for store.reads.Load() == 0 { // the first mismatch's read is in flight
		if time.Now().After(deadline) {
			t.Fatal("no read started within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	close(store.hold)
	for range n {
		if st := <-statuses; st != 200 {
			t.Fatalf("a webhook that arrived during the read: %d, want 200", st)
		}
	}
	if got := store.reads.Load(); got != 1 {
		t.Fatalf("%d reads for %d concurrent mismatches, want 1", got, n)
	}
}
