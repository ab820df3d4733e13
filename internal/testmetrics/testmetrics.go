// Package testmetrics is the one in-memory metrics recorder of linegate's
// tests: it satisfies telemetry.Recorder (and every narrower metrics
// interface a package declares) and keeps what was recorded for the
// test's assertions.
package testmetrics

import (
	"maps"
	"sync"
	"time"
)

// Recorder keeps the sum of every counter and how many latencies were
// observed under each name. The zero value is ready; it is safe for
// concurrent use.
type Recorder struct {
	mu        sync.Mutex
	counts    map[string]float64
	durations map[string]int
}

// Count adds n to the named counter.
func (r *Recorder) Count(name string, n float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]float64{}
	}
	r.counts[name] += n
}

// Duration records one observation of the named latency.
func (r *Recorder) Duration(name string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.durations == nil {
		r.durations = map[string]int{}
	}
	r.durations[name]++
}

// Total is the named counter's sum (0 when never counted).
func (r *Recorder) Total(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// Observations is how many latencies were recorded under name.
func (r *Recorder) Observations(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.durations[name]
}

// Counts is a copy of every counter, for failure messages.
func (r *Recorder) Counts() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}
