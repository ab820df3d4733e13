// Package idempotency gives a LINE event's effect exactly-once semantics on top
// of at-least-once delivery.
//
// LINE redelivers webhooks, EventBridge and SQS deliver at least once, and a
// worker may crash half-way through a record. Before running a handler the
// worker claims the event's key; after the handler succeeded it completes the
// key; when the handler failed it releases the key so the retry can run. A
// completed key makes every later delivery of the same event a duplicate.
//
// Two stores implement the contract: DynamoDB (production, conditional
// writes) and Memory (linegate local and tests). Both pass the shared suite in
// package idempotencytest.
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
