// Package testmem measures memory for tests that bound what a structure
// keeps per entry: the live heap after a full collection, so that the
// difference of two readings around N insertions, divided by N, is what one
// entry costs (garbage excluded).
package testmem

import "runtime"

// LiveHeap is the heap in use (runtime.MemStats.HeapAlloc) after a full
// collection. It collects twice: what sync.Pools held survives one
// collection in their victim caches, and freed between two readings it
// would make the second lower than the first. Keep what is being measured
// reachable until the second reading (runtime.KeepAlive).
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
