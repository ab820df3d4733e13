package telemetry

import "time"

// Recorder is the one metrics port every core records through: the EMF
// Metrics of a Lambda invocation satisfies it, and so does a test's counter.
// Names are CloudWatch-style (PascalCase, a noun and what happened to it:
// RecordsProcessed, LineRequestLatency) and string constants or literals, so that
// functions/metrics_test.go can check each against docs/metrics.md, which
// lists every name each function emits, and the template's dashboard.
// Implementations must be safe for concurrent use.
type Recorder interface {
	// Count adds n to the named counter (unit Count).
	Count(name string, n float64)
	// Duration records one observation of the named latency (unit
	// Milliseconds).
	Duration(name string, d time.Duration)
}

// Discard is a Recorder that records nothing: the default of every core, so a
// core built without metrics never checks for nil.
var Discard Recorder = discard{}

type discard struct{}

func (discard) Count(string, float64)          {}
func (discard) Duration(string, time.Duration) {}
