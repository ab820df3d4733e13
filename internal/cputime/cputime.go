// Package cputime measures the CPU time this process uses, for benchmarks
// run on a shared machine: other processes' load stretches a benchmark's
// wall time (sec/op) several times over from one run to the next, but
// hardly the CPU time the benchmark itself spends (cpu-ns/op), garbage
// collection and the goroutines it starts included.
package cputime

import (
	"testing"
	"time"
)

// PerOp starts measuring b and returns the function that reports the CPU
// time per operation as the metric cpu-ns/op; call it when b's loop is
// done (defer cputime.PerOp(b)()). Where the process's CPU time cannot be
// read, nothing is reported.
func PerOp(b *testing.B) func() {
	start, ok := Process()
	if !ok {
		return func() {}
	}
	return func() {
		end, _ := Process()
		if b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// Process is the CPU time (user and system) every thread of this process
// has used so far, false where it cannot be read.
func Process() (time.Duration, bool) { return process() }
