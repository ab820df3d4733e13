package cloudtest

import (
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/testclock"
)

// memScale compresses the in-memory cloud's waits (long polls) so the
// suite runs fast: cloud time d lasts d/memScale.
const memScale = 1000

// Mem is the in-memory cloud as a Backend, for the harnesses that run the
// suite on it (in-process, persisted, over the wire): on a test clock that
// stands still but for the suite's sleeps, so "still hidden" checks never
// flake on a slow machine, its waits compressed by memScale. The cloud is
// closed when t ends.
func Mem(t *testing.T) (*mem.Cloud, Backend) {
	t.Helper()
	clk := testclock.New(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	c := mem.New(mem.WithClock(clk.Now), mem.WithTimeScale(memScale))
	t.Cleanup(func() { _ = c.Close() })
	return c, Backend{SQS: c, EventBridge: c, SNS: c, Sleep: func(d time.Duration) { clk.Advance(d / memScale) }}
}
