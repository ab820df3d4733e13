package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	p := Policy{First: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond}, {5, time.Second}, {40, time.Second}, {0, time.Second}, {-3, time.Second},
	} {
		if got := p.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("Ceiling(%d) = %v, want %v", tc.attempt, got, tc.want)
		}
	}
	if got := (Policy{First: time.Hour, Max: -time.Second}).Ceiling(1); got != 0 {
		t.Errorf("a negative cap gave %v, want 0", got)
	}
}

func TestJitterStaysInItsRange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		j      Jitter
		lo, hi time.Duration
	}{
		{"full", Full, 0, time.Second},
		{"equal", Equal, 500 * time.Millisecond, time.Second},
		{"none", None, time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 500 {
				d := tc.j(time.Second)
				if d < tc.lo || d > tc.hi {
					t.Fatalf("%v outside [%v, %v]", d, tc.lo, tc.hi)
				}
				seen[d] = true
			}
			if tc.lo != tc.hi && len(seen) < 100 {
				t.Fatalf("only %d distinct delays in 500: not jittered", len(seen))
			}
			if d := tc.j(0); d != 0 {
				t.Fatalf("a zero ceiling waited %v", d)
			}
		})
	}
	if d := (Policy{First: time.Second, Max: time.Second}).Delay(1); d > time.Second {
		t.Fatalf("default jitter waited %v past the ceiling", d)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v, want context.Canceled", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Sleep on a cancelled context waited")
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on a cancelled context: %v", err)
	}
}
