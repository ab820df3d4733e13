// Package idempotency gives a LINE event's effect exactly-once semantics on top
// of at-least-once delivery.
//
// LINE redelivers webhooks, EventBridge and SQS deliver at least once, and a
// worker may crash half-way through a record. Before running a handler the
// worker claims the event's key; after the handler succeeded it completes the
// key; when the handler failed it releases the key so the retry can run. A
// completed key makes every later delivery of the same event a duplicate.
//
// The same table keeps what a handler needs to be retried safely: the
// results of its idempotent steps (ValueStore, for bot.Once), each chat's
// conversation state (VersionedStore, for bot's Event.Session), the newest
// edit of each edited message (EditKey), each chat's debounce buffers
// (DebounceKey) and the markers that make a crash page once (CrashKey). Keys of any length are
// accepted: a key over DynamoDB's limit is stored as its digest (StorageKey).
//
// Two stores implement the contracts: DynamoDB (production, conditional
// writes) and Memory (linegate local and tests). Both pass the shared suites
// in package idempotencytest.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// ErrCompleted is returned by Claim when the key's effect already happened: the
// caller skips the event as a duplicate and acknowledges it.
var ErrCompleted = errors.New("idempotency: already completed")

// ErrInProgress is returned by Claim when another worker holds an unexpired
// claim on the key: the caller reports the record as failed so it is retried
// later, when the other worker has completed (duplicate) or crashed (claim
// expired).
var ErrInProgress = errors.New("idempotency: in progress elsewhere")

// ErrNotClaimed is returned by Complete when the key holds no in-progress
// claim (it was never claimed, was released, or is already completed).
var ErrNotClaimed = errors.New("idempotency: no in-progress claim")

// Store records which event keys are being processed and which are done.
//
// Contract (every implementation, checked by idempotencytest.Run):
//   - Claim returns nil when the key is absent, released, or its in-progress
//     claim or completed marker has expired; ErrCompleted when an unexpired
//     completed marker exists; ErrInProgress when an unexpired claim exists.
//     A successful claim expires after inProgressFor (set it to the function
//     timeout) so a crashed worker never blocks the event forever.
//   - Complete turns an in-progress claim (expired or not: the effect
//     happened) into a completed marker kept for keepFor (≥ 24 h in
//     production); ErrNotClaimed when there is no in-progress claim.
//   - Release deletes an in-progress claim so a retry can run. It never
//     deletes a completed marker, and releasing an absent key is not an error.
//   - All operations are atomic: of concurrent Claims of one key at most one
//     succeeds. A cancelled context fails the operation with an error
//     wrapping the context's error.
type Store interface {
	Claim(ctx context.Context, key string, inProgressFor time.Duration) error
	Complete(ctx context.Context, key string, keepFor time.Duration) error
	Release(ctx context.Context, key string) error
}

// ValueStore is a Store whose completed markers carry a value: the result of
// an idempotent step, returned to every later claim so that a retried
// handler gets what the step produced the first time.
//
// Contract (checked by idempotencytest.RunValues), on top of Store's:
//   - ClaimValue is Claim; when it returns ErrCompleted it also returns the
//     value the key was completed with (nil for a Complete without value).
//   - CompleteValue is Complete, keeping value with the completed marker.
//     A value over MaxValueBytes fails with ErrTooLarge and changes nothing.
type ValueStore interface {
	ClaimValue(ctx context.Context, key string, inProgressFor time.Duration) ([]byte, error)
	CompleteValue(ctx context.Context, key string, value []byte, keepFor time.Duration) error
	Release(ctx context.Context, key string) error
}

// Versioned is a value with the version it was written at. Version 0 means
// there is no live value (never written, deleted, or expired).
type Versioned struct {
	Value   []byte
	Version int64
}

// VersionedStore keeps values that change over time under optimistic
// concurrency: a write names the version it read, and fails with ErrConflict
// when someone else wrote (or deleted) since.
//
// Contract (checked by idempotencytest.RunVersioned):
//   - Get returns the live value and its version, or a zero Versioned when
//     the key is absent or expired. Reads are strongly consistent.
//   - Put writes value when the key's live version is still expected (0:
//     absent or expired), as version expected+1, kept for keepFor from now;
//     it returns the new version. Otherwise it fails with ErrConflict and
//     changes nothing. A value over MaxValueBytes fails with ErrTooLarge.
//   - Delete removes the key when its live version is still expected, else
//     fails with ErrConflict; deleting with expected 0 is a no-op.
//   - Of concurrent Puts naming the same version at most one succeeds.
type VersionedStore interface {
	Get(ctx context.Context, key string) (Versioned, error)
	Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error)
	Delete(ctx context.Context, key string, expected int64) error
}

// ErrConflict is returned by VersionedStore.Put and Delete when the key was
// written or deleted since the caller read it: read again and retry, or
// tell the user.
var ErrConflict = errors.New("idempotency: version conflict")

// MaxValueBytes bounds a stored value (a step result, a session): DynamoDB
// items are at most 400 KB, and the rest of the item needs room.
const MaxValueBytes = 300 << 10

// ErrTooLarge is returned when a value is over MaxValueBytes.
var ErrTooLarge = errors.New("idempotency: value too large")

// Key returns the idempotency key of a LINE event: its webhookEventId, which
// is stable across LINE's redeliveries, or, for an event without one,
// "sha256:" followed by the hex SHA-256 of the raw event bytes (identical
// bytes are the best identity left).
func Key(webhookEventID string, rawEvent []byte) string {
	if webhookEventID != "" {
		return webhookEventID
	}
	sum := sha256.Sum256(rawEvent)
	return "sha256:" + hex.EncodeToString(sum[:])
}
