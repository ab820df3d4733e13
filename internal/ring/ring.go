// Package ring is a fixed-capacity FIFO buffer: the shape of every record
// `linegate local` keeps for inspection (events, sent messages, loading
// animations, traces), so a dev server left running all day holds the most
// recent N of each and never grows past them.
package ring

// Buffer holds at most its capacity of values; pushing into a full buffer
// drops the oldest. The zero value is unusable: build it with New. It is not
// safe for concurrent use: its owner holds the lock its other state needs.
type Buffer[T any] struct {
	items []T
	head  int // index of the oldest value
	n     int
}

// New returns an empty buffer holding at most capacity values (at least 1).
func New[T any](capacity int) *Buffer[T] {
	return &Buffer[T]{items: make([]T, max(capacity, 1))}
}

// Cap is the buffer's capacity.
func (b *Buffer[T]) Cap() int { return len(b.items) }

// Len is how many values the buffer holds.
func (b *Buffer[T]) Len() int { return b.n }

// Push appends v. When the buffer was full it drops the oldest value and
// returns it with true, so an owner can forget whatever it indexed by it.
func (b *Buffer[T]) Push(v T) (evicted T, ok bool) {
	if b.n < len(b.items) {
		b.items[(b.head+b.n)%len(b.items)] = v
		b.n++
		return evicted, false
	}
	evicted = b.items[b.head]
	b.items[b.head] = v
	b.head = (b.head + 1) % len(b.items)
	return evicted, true
}

// All returns a copy of the values, oldest first.
func (b *Buffer[T]) All() []T {
	out := make([]T, b.n)
	for i := range b.n {
		out[i] = b.items[(b.head+i)%len(b.items)]
	}
	return out
}
