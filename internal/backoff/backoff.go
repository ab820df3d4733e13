// Package backoff is linegate's one answer to "how long until the next try,
// and wait that long unless the caller gives up": capped exponential delays
// with jitter, and a sleep that honours the context. The webhook's publisher,
// the LINE client and the worker's per-message retries share it, so every
// retry in the system has the same, documented shape.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d unless ctx ends first, and then returns ctx's error. A d of
// zero or less returns ctx.Err() at once.
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

// Jitter turns a ceiling into the delay actually waited.
type Jitter func(ceiling time.Duration) time.Duration

// Full waits uniformly in [0, ceiling] (AWS's "full jitter"): the best spread
// when many callers retry at once, as the Lambda workers of one batch do.
func Full(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

// Equal waits ceiling/2 plus a uniform share of the other half ("equal
// jitter"): never much shorter than planned, for callers that must not
// hammer a throttled service, such as the webhook's publisher.
func Equal(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return ceiling/2 + rand.N(ceiling/2+1)
}

// None waits exactly the ceiling (tests).
func None(ceiling time.Duration) time.Duration { return ceiling }

// Policy is a capped exponential backoff: attempt n (1-based) waits up to
// First·2^(n-1), never more than Max, spread by Jitter (Full when nil).
type Policy struct {
	First  time.Duration
	Max    time.Duration
	Jitter Jitter
}

// Ceiling is the longest attempt n may wait, before jitter.
func (p Policy) Ceiling(attempt int) time.Duration {
	ceiling := p.Max
	if shift := attempt - 1; shift >= 0 && shift < 32 {
		if d := p.First << shift; d > 0 && d < ceiling {
			ceiling = d
		}
	}
	return max(ceiling, 0)
}

// Delay is how long attempt n (1-based) waits.
func (p Policy) Delay(attempt int) time.Duration {
	j := p.Jitter
	if j == nil {
		j = Full
	}
	return j(p.Ceiling(attempt))
}
