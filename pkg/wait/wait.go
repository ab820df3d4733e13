// Package wait is the one context-aware sleep of linegate: backoff between
// retries (LINE API, PutEvents, webhook redelivery), simulated latency and
// polling pauses all wait through it, so a cancelled context ends every
// wait at once.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, whichever comes first. It returns
// ctx.Err() when ctx ended (also when d <= 0 and ctx has already ended),
// and nil after a full wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
