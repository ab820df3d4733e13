package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/pkg/bot"
)

// StateStore is what a handler's idempotent steps (bot.Once), chat
// sessions (bot's Event.Session) and reply attempts (idempotency.Attempts)
// need of the idempotency table: *idempotency.DynamoDB and
// *idempotency.Memory satisfy it.
type StateStore interface {
	ClaimValue(ctx context.Context, key string, inProgressFor time.Duration) ([]byte, error)
	CompleteValue(ctx context.Context, key string, value []byte, keepFor time.Duration) error
	Release(ctx context.Context, key string) error
	idempotency.VersionedStore
}

// MetricStepSavesFailed counts step results the store did not take after
// the step's effect (see eventSteps.Finish).
const MetricStepSavesFailed = "StepSavesFailed"

// finishPolicy spaces the attempts to store a step's result: the effect has
// happened, so a throttled write is worth a few tries.
var finishPolicy = backoff.Policy{First: 50 * time.Millisecond, Max: 400 * time.Millisecond}

const finishAttempts = 4

// eventSteps is bot.Steps for one event: its steps' results live under
// idempotency.StepKey(event key (its channel's), step), claimed like records (for the
// function timeout) and kept like completed records.
type eventSteps struct {
	store         StateStore
	eventKey      string
	eventID       string
	inProgressFor time.Duration
	keepFor       time.Duration
	log           *slog.Logger
	metrics       telemetry.Recorder
}

// Begin implements bot.Steps.
func (s eventSteps) Begin(ctx context.Context, step string) ([]byte, bool, error) {
	v, err := s.store.ClaimValue(ctx, idempotency.StepKey(s.eventKey, step), s.inProgressFor)
	switch {
	case err == nil:
		return nil, false, nil
	case errors.Is(err, idempotency.ErrCompleted):
		return v, true, nil
	case errors.Is(err, idempotency.ErrInProgress):
		return nil, false, fmt.Errorf("%w: %w", bot.ErrStepInProgress, err)
	}
	return nil, false, err
}

// Finish implements bot.Steps: a few attempts with backoff, then a log line
// and StepSavesFailed. The claim then expires with the function timeout.
func (s eventSteps) Finish(ctx context.Context, step string, result []byte) {
	key := idempotency.StepKey(s.eventKey, step)
	for attempt := 1; ; attempt++ {
		err := s.store.CompleteValue(ctx, key, result, s.keepFor)
		if err == nil {
			return
		}
		permanent := errors.Is(err, idempotency.ErrTooLarge) || errors.Is(err, idempotency.ErrNotClaimed)
		if permanent || attempt == finishAttempts || backoff.Sleep(ctx, finishPolicy.Delay(attempt)) != nil {
			s.metrics.Count(MetricStepSavesFailed, 1)
			s.log.ErrorContext(ctx, "step result not saved: a retry after the claim expires runs the step again",
				"webhookEventId", s.eventID, "step", step, "attempts", attempt, "error", err.Error())
			return
		}
	}
}

// Abandon implements bot.Steps.
func (s eventSteps) Abandon(ctx context.Context, step string) {
	if err := s.store.Release(ctx, idempotency.StepKey(s.eventKey, step)); err != nil {
		s.log.WarnContext(ctx, "step claim not released: it expires with the function timeout",
			"webhookEventId", s.eventID, "step", step, "error", err.Error())
	}
}

// chatSessions is bot.SessionStore over the idempotency table: one
// versioned item per chat of the event's channel (idempotency.SessionKey:
// the same user in two channels has two sessions), kept for ttl after its
// last save.
type chatSessions struct {
	store   StateStore
	ttl     time.Duration
	channel string
}

// Load implements bot.SessionStore.
func (s chatSessions) Load(ctx context.Context, chatID string) ([]byte, int64, error) {
	v, err := s.store.Get(ctx, idempotency.SessionKey(s.channel, chatID))
	return v.Value, v.Version, err
}

// Save implements bot.SessionStore.
func (s chatSessions) Save(ctx context.Context, chatID string, value []byte, version int64) (int64, error) {
	v, err := s.store.Put(ctx, idempotency.SessionKey(s.channel, chatID), value, version, s.ttl)
	if errors.Is(err, idempotency.ErrConflict) {
		return 0, fmt.Errorf("%w: %w", bot.ErrSessionConflict, err)
	}
	return v, err
}

// bindState gives the event its step store and its session store when the
// worker has a StateStore; without one, Once and Session fail with
// bot.ErrNoSteps and bot.ErrNoSessions. The steps after it run with what
// the event was bound to in their context (BoundOf).
func bindState(store StateStore, inProgressFor, keepFor, sessionTTL time.Duration, log *slog.Logger, m telemetry.Recorder) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			b := &Bound{Messenger: r.messenger}
			if store != nil && r.event != nil {
				b.Steps, b.Sessions = bind(r.event, store, inProgressFor, keepFor, sessionTTL, log, m)
			}
			return next(context.WithValue(ctx, boundKey{}, b), r)
		}
	}
}

// Bound is what the worker bound to a record's event: the LINE client its
// sends go through (with the record of its reply attempt), and the stores
// of its steps and of its chat's session; each nil when the worker has
// none. A handler run in another process (linegate local --watch, package
// botproc) makes its calls through these, so they behave as in one
// process: the reply's record, the held queue, the worker's metrics, the
// idempotency table.
type Bound struct {
	Messenger bot.Messenger
	Steps     bot.Steps
	Sessions  bot.SessionStore
}

type boundKey struct{}

// BoundOf returns what the worker bound to the event whose handler runs
// in ctx; false outside a record's handler.
func BoundOf(ctx context.Context) (Bound, bool) {
	b, ok := ctx.Value(boundKey{}).(*Bound)
	if !ok {
		return Bound{}, false
	}
	return *b, true
}

// BindState gives e the step and session stores the worker gives every
// record, over store (an *idempotency.Memory in tests), with the worker's
// default durations: so a handler that uses bot.Once and Event.Session can
// be tested by calling it, without a queue.
func BindState(e *bot.Event, store StateStore, sessionTTL time.Duration) {
	bind(e, store, 30*time.Second, 48*time.Hour, sessionTTL, slog.New(slog.DiscardHandler), telemetry.Discard)
}

func bind(e *bot.Event, store StateStore, inProgressFor, keepFor, sessionTTL time.Duration, log *slog.Logger, m telemetry.Recorder) (bot.Steps, bot.SessionStore) {
	steps := eventSteps{
		store: store, eventKey: idempotency.EventKey(e.Channel, e.WebhookEventID, e.Raw), eventID: e.WebhookEventID,
		inProgressFor: inProgressFor, keepFor: keepFor, log: log, metrics: m,
	}
	sessions := chatSessions{store: store, ttl: sessionTTL, channel: e.Channel}
	e.BindSteps(steps)
	e.BindSessions(sessions)
	return steps, sessions
}

// ledgered is a record's LINE client whose sends carry the record of the
// event's reply attempt (lineapi.Target.Ledger): the reply is recorded in
// the idempotency table before the token is used, so no retry of the event
// — after a crash, a timeout, or a failure after the reply — pushes an
// answer the reply may already have delivered.
type ledgered struct {
	bot.Messenger
	ledger lineapi.ReplyLedger
}

// Send implements bot.Messenger.
func (m ledgered) Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	t.Ledger = m.ledger
	return m.Messenger.Send(ctx, t, msgs...)
}

// replyAttempt is lineapi.ReplyLedger over the idempotency table: the
// attempt of one event's reply, under idempotency.ReplyKey, kept as long as
// the event's completed marker.
type replyAttempt struct {
	attempts idempotency.Attempts
	key      string
}

// withLedger gives m the record of the reply attempts of the event with key
// eventKey, kept in store for keepFor; m unchanged without a store or a
// client.
func withLedger(m bot.Messenger, store StateStore, eventKey string, keepFor time.Duration) bot.Messenger {
	if m == nil || store == nil {
		return m
	}
	return ledgered{Messenger: m, ledger: replyAttempt{attempts: idempotency.NewAttempts(store, keepFor), key: idempotency.ReplyKey(eventKey)}}
}

// Begin implements lineapi.ReplyLedger.
func (r replyAttempt) Begin(ctx context.Context) (bool, error) {
	err := r.attempts.Begin(ctx, r.key)
	if errors.Is(err, idempotency.ErrAttempted) {
		return true, nil
	}
	return false, err
}

// Attempted implements lineapi.ReplyLedger.
func (r replyAttempt) Attempted(ctx context.Context) (bool, error) {
	return r.attempts.Attempted(ctx, r.key)
}

// Clear implements lineapi.ReplyLedger.
func (r replyAttempt) Clear(ctx context.Context) error { return r.attempts.Clear(ctx, r.key) }
