package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/pkg/bot"
)

// Debouncing a route (bot.Debounce) on the real topology (docs/adr/0009-debounce.md):
//
//   - On the chat queue an event of a debounced route is claimed like any
//     other; its effect there is to be appended to its chat's buffer
//     (idempotency.DebounceKey, one versioned item per chat and route,
//     written with conditional puts) and to schedule a flush: its own
//     record sent to the long-work queue with a delay (the window, or what
//     is left of the burst's longest wait) and the AttrDebounce attribute.
//     The record then completes as OutcomeDebounced. A retried record finds
//     itself in the buffer and only schedules its flush again.
//   - A flush arriving before it is due (the window is conversation time,
//     and `linegate local` compresses SQS delays) waits until it is.
//   - A due flush, the last of its burst (no newer event of the chat's route
//     was appended) or one past the burst's longest wait, seals the pending
//     events into a batch kept under the flush's own key, then runs the
//     handler once on the batch's newest event, with the batch bound
//     (Event.Batch). Its steps (bot.Once) and retry keys are the newest
//     event's; its claim is the flush's. When the handler fails the batch
//     stays sealed, so the flush's retry runs the same events again (never
//     a bigger batch); when it succeeds the batch's events are recorded as
//     done and it is removed. Any other flush of the burst finds nothing due and completes
//     as OutcomeDebounced.
//   - A chat's batches run one at a time: a due flush waits while an
//     earlier batch of its chat has been sealed for less than the function
//     timeout (after that the earlier run has ended, crashed or not): it
//     sends itself again, due recheck later, as a new flush.

// AttrDebounce is the message attribute of a debounce flush on the
// long-work queue: the route, the sequence number of the event that
// scheduled it and when it is due, as JSON.
const AttrDebounce = "linegate-debounce"

// flushKeySuffix marks the idempotency key of an event's debounce flush.
const flushKeySuffix = "#debounce"

// Bounds of a chat's debounce buffer.
const (
	// maxBufferBytes bounds the raw events one buffer holds (pending and
	// sealed), inside the store's value limit. An event that would not fit
	// runs on its own at once.
	maxBufferBytes = 200 << 10
	// keepDone is how many handled events a buffer remembers, so a chat
	// queue record redelivered after its batch ran is not appended again
	// (its chat's later records wait behind it, so it is among the last).
	keepDone = 64
	// abandonAfter drops a sealed batch nobody finished (its flush was
	// dead-lettered and never redriven).
	abandonAfter = 24 * time.Hour
	// bufferAttempts bounds the conditional-write rounds of one change.
	bufferAttempts = 8
)

// errBatchRunning is what a due flush finds while an earlier batch of its
// chat runs: it is sent again, to look after recheck.
var errBatchRunning = errors.New("debounce: an earlier batch of the chat is still running")

// errNotDue fails a flush whose due time is past the invocation's end.
var errNotDue = errors.New("debounce: flush not due before the invocation ends")

// debounceRouter says whether an event's route is debounced; *bot.Router
// satisfies it.
type debounceRouter interface {
	Debounced(e *bot.Event) (route string, window, maxWait time.Duration)
}

// flushSpec is the AttrDebounce attribute's value.
type flushSpec struct {
	Route string `json:"route"`
	Seq   int64  `json:"seq"`
	Due   int64  `json:"due"`            // Unix milliseconds
	Wait  int    `json:"wait,omitempty"` // times it was sent again to wait for an earlier batch
}

// key is the idempotency key of the flush of the event with key eventKey:
// each time a flush is sent again to wait, it is a new flush.
func (f *flushSpec) key(eventKey string) string {
	k := eventKey + flushKeySuffix
	if f.Wait > 0 {
		k += "#" + strconv.Itoa(f.Wait)
	}
	return k
}

// maxSQSDelay is the longest delay SQS gives a message.
const maxSQSDelay = 15 * time.Minute

// recheck is how long a due flush waits for an earlier batch of its chat
// before it looks again.
const recheck = 2 * time.Second

// parseFlush reads a record's AttrDebounce attribute: nil when it has none.
func parseFlush(msg events.SQSMessage) (*flushSpec, error) {
	a, ok := msg.MessageAttributes[AttrDebounce]
	if !ok || a.StringValue == nil {
		return nil, nil
	}
	var f flushSpec
	if err := json.Unmarshal([]byte(*a.StringValue), &f); err != nil || f.Route == "" || f.Seq <= 0 {
		return nil, fmt.Errorf("%w: %s attribute %q", errBadFlush, AttrDebounce, *a.StringValue)
	}
	return &f, nil
}

// errBadFlush marks an AttrDebounce attribute that cannot be read: the
// record is malformed and dead-lettered.
var errBadFlush = permanentErr("debounce: malformed flush")

// permanentErr is an error the worker dead-letters on the first receive.
type permanentErr string

func (e permanentErr) Error() string { return string(e) }

// Permanent reports true: a malformed flush never succeeds.
func (permanentErr) Permanent() bool { return true }

// buffered is one event in a debounce buffer.
type buffered struct {
	Seq         int64           `json:"seq"`
	ID          string          `json:"id"`  // webhookEventId
	At          int64           `json:"at"`  // Unix ms, when the worker appended it
	Destination string          `json:"dst"` // the envelope's
	ReceivedAt  time.Time       `json:"rcv"` // the envelope's
	Event       json.RawMessage `json:"ev"`
}

// sealed is a batch a flush took from the pending events.
type sealed struct {
	Events   []buffered `json:"events"`
	SealedAt int64      `json:"sealedAt"` // Unix ms
}

// buffer is a chat's debounce buffer for one route, as stored.
type buffer struct {
	Seq     int64             `json:"seq"`
	Pending []buffered        `json:"pending,omitempty"`
	Batches map[string]sealed `json:"batches,omitempty"` // by flush key
	Done    []string          `json:"done,omitempty"`    // webhookEventIds handled, newest last
}

// find reports where the event id is: pending (its seq), sealed, or done.
func (b *buffer) find(id string) (seq int64, where string) {
	for _, e := range b.Pending {
		if e.ID == id {
			return e.Seq, "pending"
		}
	}
	for _, s := range b.Batches {
		for _, e := range s.Events {
			if e.ID == id {
				return e.Seq, "sealed"
			}
		}
	}
	if slices.Contains(b.Done, id) {
		return 0, "done"
	}
	return 0, ""
}

// size is the bytes of the raw events the buffer holds.
func (b *buffer) size() int {
	n := 0
	for _, e := range b.Pending {
		n += len(e.Event)
	}
	for _, s := range b.Batches {
		for _, e := range s.Events {
			n += len(e.Event)
		}
	}
	return n
}

// chatBuffer is one chat's debounce buffer in the state store.
type chatBuffer struct {
	store   StateStore
	key     string
	keepFor time.Duration
}

// update reads the buffer, lets change decide (it reports whether to
// write), and writes it back conditionally, reading again on a conflict.
func (c chatBuffer) update(ctx context.Context, change func(b *buffer) (bool, error)) error {
	for range bufferAttempts {
		cur, err := c.store.Get(ctx, c.key)
		if err != nil {
			return fmt.Errorf("debounce buffer: %w", err)
		}
		var b buffer
		if cur.Version != 0 {
			if err := json.Unmarshal(cur.Value, &b); err != nil {
				return fmt.Errorf("debounce buffer %s: %w", c.key, err)
			}
		}
		write, err := change(&b)
		if err != nil || !write {
			return err
		}
		value, err := json.Marshal(&b)
		if err != nil {
			return fmt.Errorf("debounce buffer: %w", err)
		}
		_, err = c.store.Put(ctx, c.key, value, cur.Version, c.keepFor)
		if errors.Is(err, idempotency.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("debounce buffer: %w", err)
		}
		return nil
	}
	return fmt.Errorf("debounce buffer %s: %w after %d attempts", c.key, idempotency.ErrConflict, bufferAttempts)
}

// debounceConfig is what the debounce step needs of the Processor.
type debounceConfig struct {
	router        debounceRouter
	store         StateStore
	queues        *queues
	longURL       string
	newMessenger  func() bot.Messenger
	inProgressFor time.Duration
	keepFor       time.Duration
	now           func() time.Time
	sleep         func(ctx context.Context, d time.Duration) error
	log           *slog.Logger
}

// enabled reports whether routes can be debounced: a router that knows
// them, a store for the buffers, and a long-work queue to delay flushes on.
func (c debounceConfig) enabled() bool {
	return c.router != nil && c.store != nil && c.queues != nil && c.longURL != ""
}

// debounce appends the events of debounced routes to their chat's buffer
// and runs the batches their flushes take (see the comment at the top of
// this file). Every other record goes on.
func debounce(c debounceConfig) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			if r.event == nil || !c.enabled() {
				return next(ctx, r)
			}
			if r.flush != nil {
				return c.runFlush(ctx, r, next)
			}
			if r.long {
				return next(ctx, r)
			}
			route, window, maxWait := c.router.Debounced(r.event)
			chat := r.event.Source.ChatID()
			if route == "" || chat == "" {
				return next(ctx, r)
			}
			return c.append(ctx, r, next, chat, route, window, maxWait)
		}
	}
}

// append adds the record's event to its chat's buffer (once: a retry finds
// it there) and schedules its flush; an event the buffer has no room for
// runs on its own.
func (c debounceConfig) append(ctx context.Context, r *record, next handler, chat, route string, window, maxWait time.Duration) error {
	buf := chatBuffer{store: c.store, key: idempotency.DebounceKey(chat, route), keepFor: c.keepFor}
	id := r.head.WebhookEventID
	var seq, due int64
	full, handled := false, false
	err := buf.update(ctx, func(b *buffer) (bool, error) {
		now := c.now().UnixMilli()
		full, handled = false, false
		switch s, where := b.find(id); where {
		case "pending":
			seq, due = s, c.dueAt(b, s, window, maxWait)
			return false, nil
		case "sealed", "done":
			handled = true // a batch has it: its flush (or its retry) runs it
			return false, nil
		}
		if b.size()+len(r.detail.Event) > maxBufferBytes {
			full = true
			return false, nil
		}
		b.Seq++
		seq = b.Seq
		b.Pending = append(b.Pending, buffered{Seq: seq, ID: id, At: now, Destination: r.detail.Destination,
			ReceivedAt: r.detail.ReceivedAt, Event: r.detail.Event})
		due = c.dueAt(b, seq, window, maxWait)
		return true, nil
	})
	switch {
	case err != nil:
		return err
	case full:
		c.log.WarnContext(ctx, "debounce buffer full: the event runs on its own", "webhookEventId", id)
		return next(ctx, r)
	case handled:
		r.result.Outcome = OutcomeDebounced
		return nil
	}
	if err := c.schedule(ctx, r.msg, flushSpec{Route: route, Seq: seq, Due: due}); err != nil {
		return err
	}
	r.result.Outcome = OutcomeDebounced
	return nil
}

// dueAt is when the flush of the pending event seq is due: window after it
// was appended, and never past the burst's first event plus maxWait.
func (c debounceConfig) dueAt(b *buffer, seq int64, window, maxWait time.Duration) int64 {
	var at, first int64
	for i, e := range b.Pending {
		if i == 0 {
			first = e.At
		}
		if e.Seq == seq {
			at = e.At
		}
	}
	return min(at+window.Milliseconds(), first+maxWait.Milliseconds())
}

// schedule sends the record's body to the long-work queue as the flush f,
// delayed until f is due (SQS delays whole seconds, rounded up).
func (c debounceConfig) schedule(ctx context.Context, msg events.SQSMessage, f flushSpec) error {
	spec, err := json.Marshal(f)
	if err != nil {
		return err
	}
	delay := time.Duration(f.Due-c.now().UnixMilli()) * time.Millisecond
	seconds := int32(min(max(math.Ceil(delay.Seconds()), 0), maxSQSDelay.Seconds()))
	_, err = c.queues.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(c.longURL), MessageBody: aws.String(msg.Body), DelaySeconds: seconds,
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			AttrDebounce: {DataType: aws.String("String"), StringValue: aws.String(string(spec))},
		},
		MessageSystemAttributes: traceAttribute(msg),
	})
	if err != nil {
		return fmt.Errorf("schedule debounce flush of %s: %w", msg.MessageId, err)
	}
	return nil
}

// runFlush waits until the flush is due, takes its batch, runs the handler
// on it, and records the batch done when the handler succeeded.
func (c debounceConfig) runFlush(ctx context.Context, r *record, next handler) error {
	if wait := time.Duration(r.flush.Due-c.now().UnixMilli()) * time.Millisecond; wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return errNotDue
		}
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("debounce: waiting for the burst's end: %w", err)
		}
	}
	chat := r.event.Source.ChatID()
	buf := chatBuffer{store: c.store, key: idempotency.DebounceKey(chat, r.flush.Route), keepFor: c.keepFor}
	route, _, maxWait := c.router.Debounced(r.event)
	if route != r.flush.Route {
		maxWait = 0 // the route changed since: flush what is pending now
	}
	flushKey := r.flush.key(idempotency.Key(r.head.WebhookEventID, r.detail.Event))
	var batch []buffered
	err := buf.update(ctx, func(b *buffer) (bool, error) {
		batch = nil
		now := c.now().UnixMilli()
		if s, ok := b.Batches[flushKey]; ok {
			batch = s.Events // sealed by this flush's earlier attempt: run it again
			return false, nil
		}
		if len(b.Pending) == 0 {
			return false, nil
		}
		newest := b.Pending[len(b.Pending)-1].Seq
		if newest > r.flush.Seq && now < b.Pending[0].At+maxWait.Milliseconds() {
			return false, nil // a newer event's flush ends the burst
		}
		for k, s := range b.Batches {
			switch {
			case now-s.SealedAt >= abandonAfter.Milliseconds():
				delete(b.Batches, k)
			case now-s.SealedAt < c.inProgressFor.Milliseconds():
				return false, errBatchRunning
			}
		}
		if b.Batches == nil {
			b.Batches = map[string]sealed{}
		}
		batch = b.Pending
		b.Batches[flushKey] = sealed{Events: batch, SealedAt: now}
		b.Pending = nil
		return true, nil
	})
	if errors.Is(err, errBatchRunning) {
		// Not a failure: the flush looks again after recheck, as a new
		// flush (this one completes), so waiting never uses up receives.
		again := *r.flush
		again.Due, again.Wait = c.now().Add(recheck).UnixMilli(), again.Wait+1
		if err := c.schedule(ctx, r.msg, again); err != nil {
			return err
		}
		c.log.InfoContext(ctx, "debounce batch waits for an earlier batch of its chat", "webhookEventId", r.head.WebhookEventID)
		r.result.Outcome = OutcomeDebounced
		return nil
	}
	if err != nil {
		return err
	}
	if len(batch) == 0 {
		r.result.Outcome = OutcomeDebounced
		return nil
	}
	evs, err := c.events(batch)
	if err != nil {
		return err
	}
	newest := evs[len(evs)-1]
	newest.BindBatch(evs)
	r.event = newest
	r.result.Batch = make([]string, len(batch))
	for i, e := range batch {
		r.result.Batch[i] = e.ID
	}
	if err := next(ctx, r); err != nil {
		return err // the batch stays sealed: the retry runs it again
	}
	err = buf.update(context.WithoutCancel(ctx), func(b *buffer) (bool, error) {
		if _, ok := b.Batches[flushKey]; !ok {
			return false, nil
		}
		delete(b.Batches, flushKey)
		for _, e := range batch {
			b.Done = append(b.Done, e.ID)
		}
		if n := len(b.Done) - keepDone; n > 0 {
			b.Done = slices.Delete(b.Done, 0, n)
		}
		return true, nil
	})
	if err != nil {
		// The handler ran: the flush must not run it again. The sealed
		// batch is dropped when it is abandoned; until then a later batch
		// of the chat waits at most the function timeout behind it.
		c.log.ErrorContext(ctx, "debounce batch not recorded done", "webhookEventId", r.head.WebhookEventID, "error", err.Error())
	}
	return nil
}

// events parses a batch's stored events, each bound to a LINE client of the
// record's (one per event, as the worker gives each record its own).
func (c debounceConfig) events(batch []buffered) ([]*bot.Event, error) {
	out := make([]*bot.Event, len(batch))
	for i, b := range batch {
		ev, err := bot.Parse(b.Event, b.Destination, b.ReceivedAt, nil)
		if err != nil {
			return nil, fmt.Errorf("debounced event %s: %w", b.ID, err)
		}
		if c.newMessenger != nil {
			// The reply ledger guards a batch's answer as it guards any
			// record's: a reply that may have reached LINE is never
			// followed by a push of the same answer.
			ev.Bind(withLedger(c.newMessenger(), c.store, idempotency.Key(ev.WebhookEventID, ev.Raw), c.keepFor))
		}
		out[i] = ev
	}
	return out, nil
}
