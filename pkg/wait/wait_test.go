package wait_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/wait"
)

func TestSleep(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
		max  time.Duration // the call must return within this
	}{
		{"a full wait", live, 10 * time.Millisecond, nil, 5 * time.Second},
		{"no wait", live, 0, nil, time.Second},
		{"an ended context ends it at once", done, time.Hour, context.Canceled, time.Second},
		{"an ended context with no wait", done, 0, context.Canceled, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			if err := wait.Sleep(tt.ctx, tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Sleep = %v, want %v", err, tt.want)
			}
			if el := time.Since(start); el < tt.d && tt.want == nil || el > tt.max {
				t.Errorf("returned after %v", el)
			}
		})
	}
}
