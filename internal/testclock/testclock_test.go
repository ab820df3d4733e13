package testclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/testclock"
)

func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testclock.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Advance(time.Second); _ = c.Now() }()
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("after 10 advances of 1s: Now = %v, want %v", got, want)
	}
}
