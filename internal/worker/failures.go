package worker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/pkg/bot"
)

// DefaultRetryBackoff is how long a record that failed transiently stays
// hidden before SQS delivers it again: up to 2 s after its first receive,
// doubling with each receive (equal jitter: never less than half), capped
// at 5 minutes. With the template's 5 receives a failing event is retried
// after about 2, 4, 8 and 16 s and dead-lettered after its fifth failure:
// a later event of its chat waits at most about 30 s plus five runs.
var DefaultRetryBackoff = backoff.Policy{First: 2 * time.Second, Max: 5 * time.Minute, Jitter: backoff.Equal}

// Reasons a record was dead-lettered, in its AttrDeadLetterReason
// attribute and its log line.
const (
	reasonPermanent = "permanent"         // the handler returned a bot.Permanent error
	reasonMalformed = "malformed"         // the record cannot be decoded
	reasonExhausted = "retries-exhausted" // a transient failure on the last allowed receive
)

// permanentReason says why err can never succeed on a retry, or "".
func permanentReason(err error) string {
	switch {
	case errors.Is(err, envelope.ErrMalformed) || errors.Is(err, bot.ErrEvent):
		return reasonMalformed
	case bot.IsPermanent(err):
		return reasonPermanent
	}
	return ""
}

// settleFailure decides what a failed record's next receive is. A failure
// that cannot succeed (a bot.Permanent error, a record that cannot be
// decoded) is dead-lettered on its first receive: the worker sends it to
// the source queue's dead-letter queue (found from its redrive policy) and
// acknowledges it, OutcomeDeadLettered. So is a transient failure on the
// last receive SQS allows, so the chat moves on at once, with the event
// having run every time. Any other failure stays failed and is hidden for
// backoff.Delay(receive count) via ChangeMessageVisibility, so receives
// are spaced by growing intervals; a claim held by another run
// (idempotency.ErrInProgress) is left to the visibility timeout, as that run
// may take the whole function timeout. When the dead-letter send fails, the
// record fails as a transient one; without q (no SQS client) every failure
// is left to SQS's visibility timeout and redrive.
func settleFailure(q *queues, retry backoff.Policy, log *slog.Logger) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			err := next(ctx, r)
			if err == nil || q == nil || errors.Is(err, idempotency.ErrInProgress) {
				// A claim held elsewhere (a duplicate delivery while the
				// first is still running) waits the queue's visibility
				// timeout: the other run may take the whole function timeout.
				return err
			}
			ctx = context.WithoutCancel(ctx) // settle even when the invocation's time is up
			n := r.result.ReceiveCount
			rp, perr := q.policy(ctx, r.msg.EventSourceARN)
			if perr != nil {
				log.WarnContext(ctx, "redrive policy unknown: failure left to the visibility timeout", "webhookEventId", r.result.WebhookEventID, "error", perr.Error())
				return err
			}
			reason := permanentReason(err)
			if reason == "" && rp.maxReceives > 0 && n >= rp.maxReceives {
				reason = reasonExhausted
			}
			if reason != "" && rp.dlqURL != "" {
				derr := q.deadLetter(ctx, rp, r.msg, reason)
				if derr == nil {
					r.result.Outcome, r.result.Err, r.result.DeadLetterReason = OutcomeDeadLettered, err, reason
					r.result.DeadLetterQueue = queueName(rp.dlqURL)
					return nil
				}
				log.ErrorContext(ctx, "dead-letter send failed: the record is retried", "webhookEventId", r.result.WebhookEventID, "error", derr.Error())
			}
			delay := visibilitySeconds(retry.Delay(n))
			if verr := q.changeVisibility(ctx, r.msg, delay); verr != nil {
				log.WarnContext(ctx, "retry backoff not set: failure left to the visibility timeout", "webhookEventId", r.result.WebhookEventID, "error", verr.Error())
				return err
			}
			r.result.RetryIn = time.Duration(delay) * time.Second
			return err
		}
	}
}

// visibilitySeconds rounds a delay up to SQS's whole seconds, at least 1
// and at most SQS's 12 hours.
func visibilitySeconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	return int32(min(max(s, 1), 43200))
}
