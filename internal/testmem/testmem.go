// Package testmem measures memory for tests that bound what a structure
// keeps per entry: the live heap after a full collection, so that the
// difference of two readings around N insertions, divided by N, is what one
// entry costs (garbage excluded).
package testmem

import "runtime"

// LiveHeap is the heap in use (runtime.MemStats.HeapAlloc) after a full
// collection. Keep what is being measured reachable until the second
// reading (runtime.KeepAlive).
func LiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
