// Package idempotencytest is the conformance suite every idempotency.Store
// passes, so the in-memory store used locally and the DynamoDB store used in
// production are proven to behave the same way.
package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testclock"
)

// Clock is the fake clock the suite advances to expire claims and markers
// without sleeping: linegate's one test clock. Stores under test read it
// through Now.
type Clock = testclock.Clock

// NewClock returns a clock stopped at start.
func NewClock(start time.Time) *Clock { return testclock.New(start) }

// Durations the suite uses. Expiry is checked with a margin of slack on
// either side because stores may keep epoch-second precision (DynamoDB TTL).
const (
	inProgressFor = 30 * time.Second
	keepFor       = 24 * time.Hour
	slack         = 2 * time.Second
)

// start is a whole second, so second-precision stores round predictably.
var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type op int

const (
	claim op = iota
	complete
	release
	advance
)

func (o op) String() string {
	return [...]string{"Claim", "Complete", "Release", "Advance"}[o]
}

// step is one operation of a scenario and the error it must return.
type step struct {
	op   op
	key  string        // default "k"
	by   time.Duration // for advance
	want error         // nil, or a sentinel the error must wrap
}

// Run runs the conformance suite. newStore is called once per subtest with
// a fresh Clock the store must read time from; it may share one backing
// table across calls, since every subtest uses keys unique to it.
func Run(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.Store) {
	t.Helper()
	scenarios := []struct {
		name  string
		steps []step
	}{
		{"claim complete duplicate", []step{
			{op: claim},
			{op: complete},
			{op: claim, want: idempotency.ErrCompleted},
			{op: advance, by: time.Hour},
			{op: claim, want: idempotency.ErrCompleted},
		}},
		{"in-progress blocks", []step{
			{op: claim},
			{op: claim, want: idempotency.ErrInProgress},
			{op: advance, by: inProgressFor - slack},
			{op: claim, want: idempotency.ErrInProgress},
		}},
		{"claim expiry lets a new claim in", []step{
			{op: claim},
			{op: advance, by: inProgressFor + slack},
			{op: claim},
			{op: claim, want: idempotency.ErrInProgress},
		}},
		{"release lets a retry in", []step{
			{op: claim},
			{op: release},
			{op: claim},
			{op: complete},
			{op: claim, want: idempotency.ErrCompleted},
		}},
		{"release never removes completed", []step{
			{op: claim},
			{op: complete},
			{op: release},
			{op: claim, want: idempotency.ErrCompleted},
		}},
		{"completed expiry makes the key claimable", []step{
			{op: claim},
			{op: complete},
			{op: advance, by: keepFor - time.Minute},
			{op: claim, want: idempotency.ErrCompleted},
			{op: advance, by: time.Minute + slack},
			{op: claim},
			{op: claim, want: idempotency.ErrInProgress},
		}},
		{"complete without claim", []step{
			{op: complete, want: idempotency.ErrNotClaimed},
			{op: claim},
		}},
		{"complete twice", []step{
			{op: claim},
			{op: complete},
			{op: complete, want: idempotency.ErrNotClaimed},
			{op: claim, want: idempotency.ErrCompleted},
		}},
		{"release of an absent key", []step{
			{op: release},
			{op: claim},
		}},
		{"keys are independent", []step{
			{op: claim, key: "a"},
			{op: claim, key: "b"},
			{op: complete, key: "a"},
			{op: claim, key: "a", want: idempotency.ErrCompleted},
			{op: claim, key: "b", want: idempotency.ErrInProgress},
			{op: release, key: "b"},
			{op: claim, key: "b"},
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clock := NewClock(start)
			s := newStore(t, clock)
			ctx := context.Background()
			for i, st := range sc.steps {
				key := st.key
				if key == "" {
					key = "k"
				}
				key = uniqueKey(t, key)
				var err error
				switch st.op {
				case claim:
					err = s.Claim(ctx, key, inProgressFor)
				case complete:
					err = s.Complete(ctx, key, keepFor)
				case release:
					err = s.Release(ctx, key)
				case advance:
					clock.Advance(st.by)
					continue
				}
				if !matches(err, st.want) {
					t.Fatalf("step %d %v(%s) = %v; want %v", i, st.op, st.key, err, st.want)
				}
			}
		})
	}

	t.Run("concurrent claims: exactly one wins", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		const n = 16
		errs := race(n, func(int) error { return s.Claim(context.Background(), key, inProgressFor) })
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, idempotency.ErrInProgress):
			default:
				t.Errorf("claim %d: unexpected error %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent claims succeeded; want exactly 1", won, n)
		}
	})

	t.Run("concurrent claims after completion: all duplicates", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		ctx := context.Background()
		if err := s.Claim(ctx, key, inProgressFor); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, key, keepFor); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Claim(ctx, key, inProgressFor)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, idempotency.ErrCompleted) {
				t.Errorf("claim %d = %v; want ErrCompleted", i, err)
			}
		}
	})

	runLongKeys(t, newStore)

	t.Run("cancelled context fails and changes nothing", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		done, cancel := context.WithCancel(context.Background())
		cancel()
		ctx := context.Background()
		ops := []struct {
			name string
			call func(context.Context) error
		}{
			{"Claim", func(c context.Context) error { return s.Claim(c, key, inProgressFor) }},
			{"Complete", func(c context.Context) error { return s.Complete(c, key, keepFor) }},
			{"Release", func(c context.Context) error { return s.Release(c, key) }},
		}
		for _, o := range ops {
			err := o.call(done)
			if err == nil {
				t.Fatalf("%s with a cancelled context = nil; want an error", o.name)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context = %v; want it to wrap context.Canceled", o.name, err)
			}
			if errors.Is(err, idempotency.ErrCompleted) || errors.Is(err, idempotency.ErrInProgress) {
				t.Errorf("%s with a cancelled context = %v; must not look like a verdict", o.name, err)
			}
			if o.name == "Claim" {
				// The cancelled claim took no effect: a live claim wins.
				if err := s.Claim(ctx, key, inProgressFor); err != nil {
					t.Fatalf("claim after cancelled claim = %v; want nil", err)
				}
			}
		}
		// The cancelled Complete and Release changed nothing either: the
		// live claim is still in progress.
		if err := s.Claim(ctx, key, inProgressFor); !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("claim = %v; want ErrInProgress", err)
		}
	})
}

// race runs f(0) … f(n-1) at once, released together, and returns their
// errors by index.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = f(i)
		}()
	}
	close(gate)
	wg.Wait()
	return errs
}

func matches(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// uniqueKey scopes a key to the running subtest, so stores sharing a table
// across subtests never see each other's keys.
func uniqueKey(t *testing.T, key string) string {
	return fmt.Sprintf("%s/%s", t.Name(), key)
}
