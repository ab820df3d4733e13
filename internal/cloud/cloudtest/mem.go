package cloudtest

import (
	"maps"
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

// QueueWithDLQ creates the queue dlq, then the queue name whose redrive
// policy moves a message there after maxReceives receives (attrs are
// name's other attributes), and returns both URLs: the setup of a test of
// what acts on dead letters. A failed call fails t.
func QueueWithDLQ(t *testing.T, c SQS, name, dlq string, maxReceives int, attrs map[string]string) (url, dlqURL string) {
	t.Helper()
	b := Backend{SQS: c}
	d := createQueue(t, b, dlq, nil)
	attrs = maps.Clone(attrs)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs["RedrivePolicy"] = redrivePolicy(d.arn, maxReceives)
	return createQueue(t, b, name, attrs).url, d.url
}
