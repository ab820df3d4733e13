package idempotencytest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
)

// LongKey returns a key of n bytes unique to the running test: with n over
// idempotency.MaxKeyBytes it is what a webhookEventId "longer than
// DynamoDB's key limit" turns into. Keys that differ only in their last byte
// come from different tails.
func LongKey(t *testing.T, n int, tail string) string {
	prefix := uniqueKey(t, "long") + "/"
	if pad := n - len(prefix) - len(tail); pad > 0 {
		return prefix + strings.Repeat("x", pad) + tail
	}
	return prefix + tail
}

// absurd is the length of the keys the suites call absurdly long: five
// times DynamoDB's limit.
const absurd = 5 * idempotency.MaxKeyBytes

// runLongKeys checks the Store contract on keys around and far over
// idempotency.MaxKeyBytes: they claim, complete and release like any other,
// and two long keys sharing everything but their end stay independent (the
// store hashes them, never truncates).
func runLongKeys(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.Store) {
	t.Run("keys over DynamoDB's limit", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		ctx := context.Background()
		for _, n := range []int{idempotency.MaxKeyBytes, idempotency.MaxKeyBytes + 1, absurd} {
			a, b := LongKey(t, n, "a"), LongKey(t, n, "b")
			if len(a) != n {
				t.Fatalf("key is %d bytes, want %d", len(a), n)
			}
			if err := s.Claim(ctx, a, inProgressFor); err != nil {
				t.Fatalf("claim of a %d-byte key = %v; want nil", n, err)
			}
			if err := s.Claim(ctx, b, inProgressFor); err != nil {
				t.Fatalf("claim of another %d-byte key = %v; want nil (keys are not truncated)", n, err)
			}
			if err := s.Complete(ctx, a, keepFor); err != nil {
				t.Fatalf("complete of a %d-byte key = %v", n, err)
			}
			if err := s.Claim(ctx, a, inProgressFor); !errors.Is(err, idempotency.ErrCompleted) {
				t.Fatalf("claim of a completed %d-byte key = %v; want ErrCompleted", n, err)
			}
			if err := s.Release(ctx, b); err != nil {
				t.Fatalf("release of a %d-byte key = %v", n, err)
			}
			if err := s.Claim(ctx, b, inProgressFor); err != nil {
				t.Fatalf("claim of a released %d-byte key = %v; want nil", n, err)
			}
		}
	})
}

// RunValues runs the ValueStore suite: completed markers carry the value a
// later claim returns. newStore is called once per subtest with a fresh
// Clock, as in Run.
func RunValues(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.ValueStore) {
	t.Helper()
	ctx := context.Background()
	binary := []byte{0, 1, 2, '"', '\\', 0xff, 0xfe, '\n'}

	t.Run("a completed value is returned to every later claim", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		if v, err := s.ClaimValue(ctx, key, inProgressFor); err != nil || v != nil {
			t.Fatalf("first claim = %q, %v; want nil, nil", v, err)
		}
		if err := s.CompleteValue(ctx, key, binary, keepFor); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			v, err := s.ClaimValue(ctx, key, inProgressFor)
			if !errors.Is(err, idempotency.ErrCompleted) || !bytes.Equal(v, binary) {
				t.Fatalf("claim %d = %q, %v; want %q, ErrCompleted", i, v, err, binary)
			}
			v[0] = 'X' // the caller's copy: the stored value must not change
		}
	})

	t.Run("a value in progress is not returned", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		if _, err := s.ClaimValue(ctx, key, inProgressFor); err != nil {
			t.Fatal(err)
		}
		if v, err := s.ClaimValue(ctx, key, inProgressFor); !errors.Is(err, idempotency.ErrInProgress) || v != nil {
			t.Fatalf("claim = %q, %v; want nil, ErrInProgress", v, err)
		}
	})

	t.Run("released claims run again, completed ones never", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		must(t, "claim", func() error { _, err := s.ClaimValue(ctx, key, inProgressFor); return err })
		must(t, "release", func() error { return s.Release(ctx, key) })
		must(t, "claim after release", func() error { _, err := s.ClaimValue(ctx, key, inProgressFor); return err })
		must(t, "complete", func() error { return s.CompleteValue(ctx, key, []byte(`{"n":1}`), keepFor) })
		must(t, "release of completed", func() error { return s.Release(ctx, key) })
		if v, err := s.ClaimValue(ctx, key, inProgressFor); !errors.Is(err, idempotency.ErrCompleted) || string(v) != `{"n":1}` {
			t.Fatalf("claim = %q, %v; want the value and ErrCompleted", v, err)
		}
	})

	t.Run("complete without a value", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		must(t, "claim", func() error { _, err := s.ClaimValue(ctx, key, inProgressFor); return err })
		must(t, "complete", func() error { return s.CompleteValue(ctx, key, nil, keepFor) })
		if v, err := s.ClaimValue(ctx, key, inProgressFor); !errors.Is(err, idempotency.ErrCompleted) || len(v) != 0 {
			t.Fatalf("claim = %q, %v; want no value and ErrCompleted", v, err)
		}
	})

	t.Run("complete without claim", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		if err := s.CompleteValue(ctx, uniqueKey(t, "k"), []byte("v"), keepFor); !errors.Is(err, idempotency.ErrNotClaimed) {
			t.Fatalf("complete = %v; want ErrNotClaimed", err)
		}
	})

	t.Run("a value over the limit is refused and changes nothing", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		must(t, "claim", func() error { _, err := s.ClaimValue(ctx, key, inProgressFor); return err })
		big := bytes.Repeat([]byte("v"), idempotency.MaxValueBytes+1)
		if err := s.CompleteValue(ctx, key, big, keepFor); !errors.Is(err, idempotency.ErrTooLarge) {
			t.Fatalf("complete with %d bytes = %v; want ErrTooLarge", len(big), err)
		}
		if _, err := s.ClaimValue(ctx, key, inProgressFor); !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("claim = %v; want the claim still in progress", err)
		}
		must(t, "complete at the limit", func() error { return s.CompleteValue(ctx, key, big[:idempotency.MaxValueBytes], keepFor) })
	})

	t.Run("completed values expire", func(t *testing.T) {
		clock := NewClock(start)
		s := newStore(t, clock)
		key := uniqueKey(t, "k")
		must(t, "claim", func() error { _, err := s.ClaimValue(ctx, key, inProgressFor); return err })
		must(t, "complete", func() error { return s.CompleteValue(ctx, key, []byte("old"), keepFor) })
		clock.Advance(keepFor + slack)
		if v, err := s.ClaimValue(ctx, key, inProgressFor); err != nil || v != nil {
			t.Fatalf("claim after expiry = %q, %v; want a fresh claim", v, err)
		}
	})

	t.Run("an absurdly long key keeps its value", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		a, b := LongKey(t, absurd, "a"), LongKey(t, absurd, "b")
		for _, k := range []string{a, b} {
			must(t, "claim", func() error { _, err := s.ClaimValue(ctx, k, inProgressFor); return err })
			must(t, "complete", func() error { return s.CompleteValue(ctx, k, []byte(k[len(k)-1:]), keepFor) })
		}
		for _, k := range []string{a, b} {
			if v, err := s.ClaimValue(ctx, k, inProgressFor); !errors.Is(err, idempotency.ErrCompleted) || string(v) != k[len(k)-1:] {
				t.Fatalf("claim of a %d-byte key = %q, %v; want its own value", len(k), v, err)
			}
		}
	})
}

// RunVersioned runs the VersionedStore suite: optimistic concurrency,
// expiry, limits. newStore is called once per subtest with a fresh Clock.
func RunVersioned(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.VersionedStore) {
	t.Helper()
	ctx := context.Background()

	t.Run("write, read, conflict, delete", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		wantGet(t, s, key, "", 0)
		v1 := wantPut(t, s, key, "one", 0, nil)
		if v1 != 1 {
			t.Fatalf("first version = %d; want 1", v1)
		}
		wantGet(t, s, key, "one", 1)
		wantPut(t, s, key, "stale", 0, idempotency.ErrConflict)
		v2 := wantPut(t, s, key, "two", v1, nil)
		wantPut(t, s, key, "stale", v1, idempotency.ErrConflict)
		wantGet(t, s, key, "two", v2)
		if err := s.Delete(ctx, key, v1); !errors.Is(err, idempotency.ErrConflict) {
			t.Fatalf("delete at a stale version = %v; want ErrConflict", err)
		}
		wantGet(t, s, key, "two", v2)
		if err := s.Delete(ctx, key, v2); err != nil {
			t.Fatalf("delete = %v", err)
		}
		wantStartedOver(t, s, key, v2)
	})

	t.Run("delete at version 0 is a no-op", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		if err := s.Delete(ctx, key, 0); err != nil {
			t.Fatalf("delete of nothing = %v", err)
		}
		wantPut(t, s, key, "x", 0, nil)
	})

	t.Run("values expire and the key starts over", func(t *testing.T) {
		clock := NewClock(start)
		s := newStore(t, clock)
		key := uniqueKey(t, "k")
		v := wantPut(t, s, key, "one", 0, nil)
		clock.Advance(time.Hour - slack)
		wantGet(t, s, key, "one", v)
		clock.Advance(2 * slack)
		wantStartedOver(t, s, key, v)
	})

	t.Run("concurrent writes of one version: exactly one wins", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		v := wantPut(t, s, key, "base", 0, nil)
		const n = 8
		errs := race(n, func(i int) error {
			_, err := s.Put(ctx, key, []byte{byte('a' + i)}, v, time.Hour)
			return err
		})
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, idempotency.ErrConflict):
				t.Errorf("put %d: unexpected error %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent puts at version %d succeeded; want exactly 1", won, n, v)
		}
	})

	t.Run("a value over the limit is refused", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		big := strings.Repeat("v", idempotency.MaxValueBytes+1)
		wantPut(t, s, key, big, 0, idempotency.ErrTooLarge)
		wantGet(t, s, key, "", 0)
		wantPut(t, s, key, big[1:], 0, nil)
	})

	t.Run("an absurdly long key", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		a, b := LongKey(t, absurd, "a"), LongKey(t, absurd, "b")
		va := wantPut(t, s, a, "A", 0, nil)
		wantPut(t, s, b, "B", 0, nil)
		wantGet(t, s, a, "A", va)
		va = wantPut(t, s, a, "A2", va, nil)
		wantGet(t, s, b, "B", 1)
		if err := s.Delete(ctx, a, va); err != nil {
			t.Fatal(err)
		}
		wantGet(t, s, a, "", 0)
	})

	t.Run("cancelled context fails and changes nothing", func(t *testing.T) {
		s := newStore(t, NewClock(start))
		key := uniqueKey(t, "k")
		v := wantPut(t, s, key, "kept", 0, nil)
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Get(done, key); !errors.Is(err, context.Canceled) {
			t.Errorf("Get = %v; want it to wrap context.Canceled", err)
		}
		if _, err := s.Put(done, key, []byte("lost"), v, time.Hour); !errors.Is(err, context.Canceled) || errors.Is(err, idempotency.ErrConflict) {
			t.Errorf("Put = %v; want it to wrap context.Canceled, not ErrConflict", err)
		}
		if err := s.Delete(done, key, v); !errors.Is(err, context.Canceled) {
			t.Errorf("Delete = %v; want it to wrap context.Canceled", err)
		}
		wantGet(t, s, key, "kept", v)
	})
}

func must(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantGet(t *testing.T, s idempotency.VersionedStore, key, value string, version int64) {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if string(got.Value) != value || got.Version != version {
		t.Fatalf("get = %q at version %d; want %q at version %d", truncate(got.Value), got.Version, truncate([]byte(value)), version)
	}
}

// wantStartedOver checks that key holds nothing any more (deleted or
// expired): Get finds no value, a put at its last version old conflicts and
// a put at version 0 succeeds.
func wantStartedOver(t *testing.T, s idempotency.VersionedStore, key string, old int64) {
	t.Helper()
	wantGet(t, s, key, "", 0)
	wantPut(t, s, key, "stale", old, idempotency.ErrConflict)
	wantPut(t, s, key, "fresh", 0, nil)
}

func wantPut(t *testing.T, s idempotency.VersionedStore, key, value string, expected int64, want error) int64 {
	t.Helper()
	v, err := s.Put(context.Background(), key, []byte(value), expected, time.Hour)
	if !matches(err, want) {
		t.Fatalf("put %q at version %d = %d, %v; want %v", truncate([]byte(value)), expected, v, err, want)
	}
	if err == nil && v != expected+1 {
		t.Fatalf("put at version %d gave version %d; want %d", expected, v, expected+1)
	}
	return v
}

func truncate(b []byte) string {
	if len(b) > 20 {
		return string(b[:20]) + "…"
	}
	return string(b)
}
