package cputime

import (
	"testing"
	"time"
)

// Spinning for a while shows as CPU time; the count only grows.
func TestProcessCountsWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		t.Skip("SKIPPED LOUDLY: this platform does not report a process's CPU time; cpu-ns/op is not reported here")
	}
	want := 20 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	n := 0
	for {
		for i := range 1_000_000 {
			n += i & 3
		}
		if now, _ := Process(); now-before >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute of spinning added less than %v of CPU time", want)
		}
	}
	after, _ := Process()
	if after < before+want || n < 0 {
		t.Fatalf("CPU time went from %v to %v after spinning %v", before, after, want)
	}
}

func BenchmarkPerOp(b *testing.B) {
	defer PerOp(b)()
	n := 0
	for b.Loop() {
		for i := range 1000 {
			n += i & 3
		}
	}
	_ = n
}
