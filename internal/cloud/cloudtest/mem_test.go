package cloudtest_test

import (
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/testclock"
)

// scale compresses the cloud's waits (long polls) so the suite runs fast;
// the clock is frozen unless the suite sleeps, so "still hidden" checks can
// never flake on a slow machine.
const scale = 1000

func TestConformanceMem(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem",
		New: func(t *testing.T) cloudtest.Backend {
			clk := testclock.New(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
			c := mem.New(mem.WithClock(clk.Now), mem.WithTimeScale(scale))
			t.Cleanup(func() { _ = c.Close() })
			return cloudtest.Backend{
				SQS: c, EventBridge: c, SNS: c,
				// Cloud time d lasts d/scale on the cloud's clock.
				Sleep: func(d time.Duration) { clk.Advance(d / scale) },
			}
		},
	})
}

// The in-memory cloud persisted to a state directory (linegate local
// --state) passes the same suite: the journal changes nothing callers see.
func TestConformanceMemPersisted(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem+state",
		New: func(t *testing.T) cloudtest.Backend {
			clk := testclock.New(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
			st, err := localstate.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c := mem.New(mem.WithClock(clk.Now), mem.WithTimeScale(scale))
			if err := c.Persist(st); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(); _ = st.Close() })
			return cloudtest.Backend{SQS: c, EventBridge: c, SNS: c, Sleep: func(d time.Duration) { clk.Advance(d / scale) }}
		},
	})
}
