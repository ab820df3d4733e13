package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The values of AttrStatus: a claim (a worker is handling the key, or was
// when it died: the claim then blocks the key until it expires) and a
// completed marker. An item without a status is a versioned value.
const (
	StatusInProgress = "in-progress"
	StatusCompleted  = "completed"
)

// sweepEvery bounds how often the memory store scans for expired entries.
const sweepEvery = time.Minute

// entry is one key's item: a claim or completed marker (status set, value
// the step result if any), or a versioned value (status empty).
type entry struct {
	status    string
	value     []byte
	version   int64
	expiresAt time.Time
}

// Memory is an in-process Store, ValueStore and VersionedStore for linegate
// local and tests. It is safe for concurrent use; expired entries are purged
// lazily, on access and by an occasional sweep during Claim, so it needs no
// background goroutine. Keys are stored as StorageKey stores them, as in
// DynamoDB.
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

var (
	_ Store          = (*Memory)(nil)
	_ ValueStore     = (*Memory)(nil)
	_ VersionedStore = (*Memory)(nil)
)

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, key string, inProgressFor time.Duration) error {
	_, err := m.ClaimValue(ctx, key, inProgressFor)
	return err
}

// ClaimValue implements ValueStore.
func (m *Memory) ClaimValue(ctx context.Context, key string, inProgressFor time.Duration) ([]byte, error) {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("idempotency: claim %q: %w", key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	if e, ok := m.entries[key]; ok && now.Before(e.expiresAt) {
		if e.status == StatusCompleted {
			return clone(e.value), ErrCompleted
		}
		return nil, ErrInProgress
	}
	m.entries[key] = entry{status: StatusInProgress, expiresAt: now.Add(inProgressFor)}
	return nil, nil
}

// Complete implements Store.
func (m *Memory) Complete(ctx context.Context, key string, keepFor time.Duration) error {
	return m.CompleteValue(ctx, key, nil, keepFor)
}

// CompleteValue implements ValueStore.
func (m *Memory) CompleteValue(ctx context.Context, key string, value []byte, keepFor time.Duration) error {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: complete %q: %w", key, err)
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("idempotency: complete %q: %d bytes: %w", key, len(value), ErrTooLarge)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	// An expired in-progress claim still completes: the effect happened, and
	// recording it stops further duplicates.
	e, ok := m.entries[key]
	if !ok || e.status != StatusInProgress {
		return fmt.Errorf("idempotency: complete %q: %w", key, ErrNotClaimed)
	}
	m.entries[key] = entry{status: StatusCompleted, value: clone(value), expiresAt: now.Add(keepFor)}
	return nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, key string) error {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: release %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.status == StatusInProgress {
		delete(m.entries, key)
	}
	return nil
}

// Get implements VersionedStore.
func (m *Memory) Get(ctx context.Context, key string) (Versioned, error) {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return Versioned{}, fmt.Errorf("idempotency: get %q: %w", key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || !now.Before(e.expiresAt) || e.version == 0 {
		return Versioned{}, nil
	}
	return Versioned{Value: clone(e.value), Version: e.version}, nil
}

// Put implements VersionedStore.
func (m *Memory) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("idempotency: put %q: %w", key, err)
	}
	if len(value) > MaxValueBytes {
		return 0, fmt.Errorf("idempotency: put %q: %d bytes: %w", key, len(value), ErrTooLarge)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if live := m.liveVersionLocked(key, now); live != expected {
		return 0, fmt.Errorf("idempotency: put %q at version %d: %w", key, expected, ErrConflict)
	}
	m.entries[key] = entry{value: clone(value), version: expected + 1, expiresAt: now.Add(keepFor)}
	return expected + 1, nil
}

// Delete implements VersionedStore.
func (m *Memory) Delete(ctx context.Context, key string, expected int64) error {
	key = StorageKey(key)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idempotency: delete %q: %w", key, err)
	}
	if expected == 0 {
		return nil
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if live := m.liveVersionLocked(key, now); live != expected {
		return fmt.Errorf("idempotency: delete %q at version %d: %w", key, expected, ErrConflict)
	}
	delete(m.entries, key)
	return nil
}

// liveVersionLocked is the version of key's unexpired value, 0 for none.
func (m *Memory) liveVersionLocked(key string, now time.Time) int64 {
	e, ok := m.entries[key]
	if !ok || !now.Before(e.expiresAt) {
		return 0
	}
	return e.version
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

// clone copies a value in or out, so callers never share the store's bytes.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
