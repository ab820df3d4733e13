package idempotencytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
)

// attemptsFor is how long the suite's attempts are kept.
const attemptsFor = time.Hour

// RunAttempts runs the Attempts suite over a store: an attempt is recorded
// once and seen by every later Begin until it is cleared or expires; of
// concurrent Begins exactly one wins; a cancelled context changes nothing.
// newStore is called once per subtest with a fresh Clock the store must
// read time from.
func RunAttempts(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.VersionedStore) {
	t.Helper()
	ctx := context.Background()
	attempted := func(t *testing.T, a idempotency.Attempts, key string, want bool) {
		t.Helper()
		got, err := a.Attempted(ctx, key)
		if err != nil || got != want {
			t.Fatalf("Attempted = %v, %v; want %v", got, err, want)
		}
	}
	begin := func(t *testing.T, a idempotency.Attempts, key string, want error) {
		t.Helper()
		if err := a.Begin(ctx, key); !matches(err, want) {
			t.Fatalf("Begin = %v; want %v", err, want)
		}
	}

	t.Run("begin once, then attempted", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		key := uniqueKey(t, "reply")
		attempted(t, a, key, false)
		begin(t, a, key, nil)
		attempted(t, a, key, true)
		begin(t, a, key, idempotency.ErrAttempted)
		begin(t, a, key, idempotency.ErrAttempted)
		attempted(t, a, key, true)
	})

	t.Run("clear forgets, and clearing nothing is fine", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		key := uniqueKey(t, "reply")
		if err := a.Clear(ctx, key); err != nil {
			t.Fatalf("Clear of nothing = %v", err)
		}
		begin(t, a, key, nil)
		if err := a.Clear(ctx, key); err != nil {
			t.Fatalf("Clear = %v", err)
		}
		attempted(t, a, key, false)
		begin(t, a, key, nil)
		begin(t, a, key, idempotency.ErrAttempted)
	})

	t.Run("an attempt expires with its lifetime", func(t *testing.T) {
		clock := NewClock(start)
		a := idempotency.NewAttempts(newStore(t, clock), attemptsFor)
		key := uniqueKey(t, "reply")
		begin(t, a, key, nil)
		clock.Advance(attemptsFor - slack)
		begin(t, a, key, idempotency.ErrAttempted)
		clock.Advance(2 * slack)
		attempted(t, a, key, false)
		begin(t, a, key, nil)
	})

	t.Run("keys are independent", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		one, two := uniqueKey(t, "one"), uniqueKey(t, "two")
		begin(t, a, one, nil)
		attempted(t, a, two, false)
		begin(t, a, two, nil)
		if err := a.Clear(ctx, one); err != nil {
			t.Fatal(err)
		}
		attempted(t, a, two, true)
	})

	t.Run("concurrent begins: exactly one wins", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		key := uniqueKey(t, "reply")
		const n = 12
		errs := race(n, func(int) error { return a.Begin(ctx, key) })
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, idempotency.ErrAttempted):
				t.Errorf("begin %d: unexpected error %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent begins succeeded; want exactly 1", won, n)
		}
	})

	t.Run("an absurdly long key", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		one, two := LongKey(t, absurd, "a"), LongKey(t, absurd, "b")
		begin(t, a, one, nil)
		begin(t, a, two, nil)
		begin(t, a, one, idempotency.ErrAttempted)
	})

	t.Run("cancelled context fails and changes nothing", func(t *testing.T) {
		a := idempotency.NewAttempts(newStore(t, NewClock(start)), attemptsFor)
		kept, fresh := uniqueKey(t, "kept"), uniqueKey(t, "fresh")
		begin(t, a, kept, nil)
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := a.Begin(done, fresh); !errors.Is(err, context.Canceled) || errors.Is(err, idempotency.ErrAttempted) {
			t.Errorf("Begin = %v; want it to wrap context.Canceled, not ErrAttempted", err)
		}
		if _, err := a.Attempted(done, kept); !errors.Is(err, context.Canceled) {
			t.Errorf("Attempted = %v; want it to wrap context.Canceled", err)
		}
		if err := a.Clear(done, kept); !errors.Is(err, context.Canceled) {
			t.Errorf("Clear = %v; want it to wrap context.Canceled", err)
		}
		attempted(t, a, kept, true)
		attempted(t, a, fresh, false)
	})
}
