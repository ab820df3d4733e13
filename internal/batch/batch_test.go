package batch_test

import (
	"reflect"
	"testing"

	"github.com/linegate/linegate/internal/batch"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
		want  [][]int // indexes into sizes
	}{
		{name: "none", sizes: nil, want: nil},
		{name: "one run", sizes: []int{1, 2, 3}, want: [][]int{{0, 1, 2}}},
		{name: "entry count", sizes: []int{1, 1, 1, 1, 1, 1, 1}, want: [][]int{{0, 1, 2}, {3, 4, 5}, {6}}},
		{name: "summed size", sizes: []int{6, 4, 1, 9}, want: [][]int{{0, 1}, {2, 3}}},
		{name: "exactly the limit fits", sizes: []int{5, 5, 5, 5}, want: [][]int{{0, 1}, {2, 3}}},
		{name: "an oversized item alone", sizes: []int{2, 11, 2}, want: [][]int{{0}, {1}, {2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := make([]int, len(tt.sizes))
			for i := range idx {
				idx[i] = i
			}
			got := batch.Split(idx, 3, 10, func(i int) int { return tt.sizes[i] })
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Split(sizes %v, 3 entries, 10 bytes) = %v, want %v", tt.sizes, got, tt.want)
			}
		})
	}
}
