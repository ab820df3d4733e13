package testmetrics_test

import (
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/testmetrics"
)

var _ telemetry.Recorder = (*testmetrics.Recorder)(nil)

func TestRecorderSumsAndCounts(t *testing.T) {
	var r testmetrics.Recorder
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Count("sent", 2)
			r.Duration("latency", time.Millisecond)
		}()
	}
	wg.Wait()
	if r.Total("sent") != 8 || r.Observations("latency") != 4 || r.Total("none") != 0 || r.Observations("none") != 0 {
		t.Fatalf("sent=%v latency=%d; want 8 and 4", r.Total("sent"), r.Observations("latency"))
	}
	c := r.Counts()
	c["sent"] = 0
	if r.Total("sent") != 8 {
		t.Errorf("Counts returned the recorder's own map")
	}
}
