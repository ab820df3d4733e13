package cloudtest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// scale compresses the cloud's waits (long polls) so the suite runs fast;
// the clock is frozen unless the suite sleeps, so "still hidden" checks can
// never flake on a slow machine.
const scale = 1000

func TestConformanceMem(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem",
		New: func(t *testing.T) cloudtest.Backend {
			clk := &fakeClock{now: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
			c := mem.New(mem.WithClock(clk.Now), mem.WithTimeScale(scale))
			t.Cleanup(func() { _ = c.Close() })
			return cloudtest.Backend{
				Cloud: c.Ports(),
				// Cloud time d lasts d/scale on the cloud's clock.
				Sleep: func(d time.Duration) { clk.Advance(d / scale) },
			}
		},
	})
}
