package ring

import (
	"slices"
	"testing"
)

func TestBufferKeepsTheNewest(t *testing.T) {
	tests := []struct {
		name        string
		capacity    int
		push        []int
		want        []int
		wantEvicted []int
	}{
		{name: "empty", capacity: 3, want: []int{}},
		{name: "under capacity", capacity: 3, push: []int{1, 2}, want: []int{1, 2}},
		{name: "exactly full", capacity: 3, push: []int{1, 2, 3}, want: []int{1, 2, 3}},
		{name: "wraps, oldest dropped first", capacity: 3, push: []int{1, 2, 3, 4, 5}, want: []int{3, 4, 5}, wantEvicted: []int{1, 2}},
		{name: "wraps twice", capacity: 2, push: []int{1, 2, 3, 4, 5}, want: []int{4, 5}, wantEvicted: []int{1, 2, 3}},
		{name: "capacity below one means one", capacity: 0, push: []int{1, 2}, want: []int{2}, wantEvicted: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[int](tt.capacity)
			var evicted []int
			for _, v := range tt.push {
				if e, ok := b.Push(v); ok {
					evicted = append(evicted, e)
				}
			}
			if got := b.All(); !slices.Equal(got, tt.want) {
				t.Fatalf("All() = %v, want %v", got, tt.want)
			}
			if !slices.Equal(evicted, tt.wantEvicted) {
				t.Fatalf("evicted %v, want %v", evicted, tt.wantEvicted)
			}
			if b.Len() != len(tt.want) || b.Len() > b.Cap() {
				t.Fatalf("Len %d Cap %d, want Len %d", b.Len(), b.Cap(), len(tt.want))
			}
		})
	}
}

// All returns a copy: changing it leaves the buffer as it was.
func TestAllIsACopy(t *testing.T) {
	b := New[int](2)
	b.Push(1)
	got := b.All()
	got[0] = 9
	if b.All()[0] != 1 {
		t.Fatal("All shares the buffer's storage")
	}
}
