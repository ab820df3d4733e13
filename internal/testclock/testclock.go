// Package testclock is the one fake clock of linegate's tests: time that
// moves only when a test says so, so expiry, visibility timeouts and
// backoff are checked without sleeping and without flaking on a slow
// machine.
package testclock

import (
	"sync"
	"time"
)

// Clock is a stopped clock. Pass its Now method wherever code takes a
// func() time.Time. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock stopped at start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
