package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrAttempted is returned by Attempts.Begin when an earlier attempt of the
// same send is on record: it may have had its effect (a LINE reply that
// reached LINE just before a crash), so the caller must not do anything that
// would repeat it.
var ErrAttempted = errors.New("idempotency: attempted before")

// Attempts records, durably and before the call, each attempt of a send
// that can be neither repeated safely nor recognised as a repeat afterwards:
// a LINE reply. A reply token is single use, so a second reply is refused
// whether or not the first reached the chat, and a push in its place would
// say the same thing twice when it did. With the attempt on record, the
// retry of an event after a crash (or a timeout, or a failure after the
// reply) knows that a reply may have reached LINE, and LINE's refusal of the
// used token then means "delivered", not "push instead".
//
// An attempt is a versioned value (VersionedStore) at version 1 under the
// key the caller gives (ReplyKey): one conditional write per attempt, no
// status, so nothing that releases claims (linegate local's start) ever
// deletes it. It is kept for keepFor, the completed markers' lifetime: as
// long as a redelivered or redriven event is recognised at all.
//
// Contract (checked by idempotencytest.RunAttempts on every store):
//   - Begin records the attempt and returns nil when none is on record (or
//     the last one expired or was cleared); ErrAttempted when one is, and
//     then records nothing new. Of concurrent Begins of one key exactly one
//     returns nil.
//   - Attempted reports whether an attempt is on record, without recording.
//   - Clear forgets the attempt: the caller knows it had no effect (LINE
//     refused it with a clear answer). Clearing an absent key is not an
//     error.
//   - A cancelled context fails every operation with an error wrapping the
//     context's error, and changes nothing.
type Attempts struct {
	store   VersionedStore
	keepFor time.Duration
}

// NewAttempts returns the attempts kept in store for keepFor.
func NewAttempts(store VersionedStore, keepFor time.Duration) Attempts {
	return Attempts{store: store, keepFor: keepFor}
}

// Begin implements the contract above.
func (a Attempts) Begin(ctx context.Context, key string) error {
	_, err := a.store.Put(ctx, key, nil, 0, a.keepFor)
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("idempotency: attempt %q: %w", StorageKey(key), ErrAttempted)
	}
	return err
}

// Attempted implements the contract above.
func (a Attempts) Attempted(ctx context.Context, key string) (bool, error) {
	v, err := a.store.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return v.Version > 0, nil
}

// Clear implements the contract above.
func (a Attempts) Clear(ctx context.Context, key string) error {
	err := a.store.Delete(ctx, key, 1)
	if errors.Is(err, ErrConflict) {
		return nil // nothing on record (expired, or never begun)
	}
	return err
}
