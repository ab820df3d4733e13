package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"
)

const (
	statusInProgress = "in-progress"
	statusCompleted  = "completed"
)

// sweepEvery bounds how often the memory store scans for expired entries.
const sweepEvery = time.Minute

type entry struct {
	status    string
	expiresAt time.Time
}

// Memory is an in-process Store for linegate local and tests. It is safe for
// concurrent use; expired entries are purged lazily, on access and by an
// occasional sweep during Claim, so it needs no background goroutine.
type Memory struct {
	now func() time.Time

	mu        sync.Mutex
	entries   map[string]entry
	lastSweep time.Time
}

// MemoryOption configures a Memory store.
type MemoryOption func(*Memory)

// WithClock sets the clock the store reads expiry against (default
// time.Now); tests pass a fake clock to expire entries without sleeping.
func WithClock(now func() time.Time) MemoryOption {
	return func(m *Memory) {
		if now != nil {
			m.now = now
		}
	}
}

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...MemoryOption) *Memory {
	m := &Memory{now: time.Now, entries: make(map[string]entry)}
	for _, o := range opts {
		o(m)
	}
	return m
}

var _ Store = (*Memory)(nil)

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, key string, inProgressFor time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: claim %q: %w", key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	if e, ok := m.entries[key]; ok && now.Before(e.expiresAt) {
		if e.status == statusCompleted {
			return ErrCompleted
		}
		return ErrInProgress
	}
	m.entries[key] = entry{status: statusInProgress, expiresAt: now.Add(inProgressFor)}
	return nil
}

// Complete implements Store.
func (m *Memory) Complete(ctx context.Context, key string, keepFor time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: complete %q: %w", key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	// An expired in-progress claim still completes: the effect happened, and
	// recording it stops further duplicates.
	e, ok := m.entries[key]
	if !ok || e.status != statusInProgress {
		return fmt.Errorf("idempotency: complete %q: %w", key, ErrNotClaimed)
	}
	m.entries[key] = entry{status: statusCompleted, expiresAt: now.Add(keepFor)}
	return nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: release %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.status == statusInProgress {
		delete(m.entries, key)
	}
	return nil
}

// Len reports how many entries are held, expired or not; tests use it to
// check that expired entries are purged.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// sweepLocked drops expired entries at most once per sweepEvery. An expired
// in-progress claim is dropped too: Complete on it then reports
// ErrNotClaimed, exactly as DynamoDB behaves once TTL has deleted the item.
func (m *Memory) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < sweepEvery {
		return
	}
	m.lastSweep = now
	for k, e := range m.entries {
		if !now.Before(e.expiresAt) {
			delete(m.entries, k)
		}
	}
}
