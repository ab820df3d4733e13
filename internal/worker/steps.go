package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/pkg/bot"
)

// errNotDecoded is returned by a step that needs the event's head when no
// decode step ran before it: a pipeline built in the wrong order.
var errNotDecoded = errors.New("worker: record not decoded (decode must run before this step)")

// trace starts a span per record, linked to the webhook's trace named by the
// record's trace header, and records the trace id in the Result. After the
// rest of the pipeline it annotates the span with what decode learnt and
// ends it: with the panic and its stack when the handler panicked, with the
// record's error otherwise.
func trace(start StartSpan, traceID func(ctx context.Context) string) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			upstream := telemetry.SQSTraceHeader(r.msg.Attributes)
			ctx, span := start(ctx, "record", upstream)
			r.result.TraceID = traceID(ctx)
			err := next(ctx, r)
			if r.head.Type != "" {
				span.Annotate("webhookEventId", r.head.WebhookEventID)
				span.Annotate("eventType", r.head.Type)
				span.Annotate("sourceType", string(r.head.SourceType))
			}
			if r.panicked != nil {
				span.Panic(r.panicked.value, r.panicked.stack)
			} else {
				span.End(err)
			}
			return err
		}
	}
}

// account settles the record's outcome and reports it: the counters
// (RecordsProcessed, DuplicatesSkipped, StaleEditsSkipped, RecordsDebounced,
// RecordsFailed, RecordsDeadLettered, RecordsForwarded, HandlerPanics), the
// end-to-end latency of a handled event, one log line with its duration
// (durationMs; never the event's content; its chat only hashed, as "lane"),
// and the observer. The record's duration is no metric of its own: at a
// chat's pace, one record per invocation, it is Lambda's free Duration, and
// each record's line has it for Logs Insights (docs/metrics.md). When the record is its
// invocation's only one and m can fold (metricsFolder), the line also
// carries everything the invocation recorded, as one EMF document: one line
// per record instead of a log line and a metrics line (docs/cost.md).
func account(m telemetry.Recorder, log *slog.Logger, observe func(Result), now func() time.Time) middleware {
	folder, _ := m.(metricsFolder)
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			start := now()
			err := next(ctx, r)
			r.settle(err)
			res := &r.result
			res.Duration = now().Sub(start)
			attrs := []any{"webhookEventId", res.WebhookEventID, "type", res.Type, "outcome", string(res.Outcome),
				"receiveCount", res.ReceiveCount, "durationMs", res.Duration.Milliseconds()}
			if res.Group != "" {
				attrs = append(attrs, "lane", telemetry.HashUserID(res.Group))
			}
			if res.Channel != "" {
				attrs = append(attrs, "channel", res.Channel)
			}
			switch res.Outcome {
			case OutcomeForwarded:
				m.Count("RecordsForwarded", 1)
			case OutcomeDeadLettered:
				m.Count("RecordsDeadLettered", 1)
				attrs = append(attrs, "reason", res.DeadLetterReason, "error", res.Err.Error(), "panic", res.Panicked)
			case OutcomeOK:
				// No count of its own: AWS/SQS NumberOfMessagesDeleted
				// counts the records done, free (the dashboard charts it).
				if ev := r.event; ev != nil && !ev.Timestamp.IsZero() && ev.Timestamp.Unix() > 0 {
					m.Duration("EndToEndLatency", now().Sub(ev.Timestamp))
				}
			case OutcomeDuplicate:
				m.Count("DuplicatesSkipped", 1)
			case OutcomeStale:
				m.Count("StaleEditsSkipped", 1)
			case OutcomeDebounced:
				m.Count("RecordsDebounced", 1)
			case OutcomeHeld:
				m.Count("RecordsHeld", 1)
			case OutcomeFailed:
				m.Count("RecordsFailed", 1)
				attrs = append(attrs, "error", res.Err.Error(), "panic", res.Panicked)
				if res.RetryIn > 0 {
					attrs = append(attrs, "retryInMs", res.RetryIn.Milliseconds())
				}
			}
			if res.Panicked {
				m.Count("HandlerPanics", 1)
			}
			level, msg := slog.LevelInfo, "record processed"
			switch res.Outcome {
			case OutcomeFailed:
				level, msg = slog.LevelWarn, "record failed"
			case OutcomeDeadLettered:
				level, msg = slog.LevelError, "record dead-lettered"
			}
			if folder != nil && r.only && log.Enabled(ctx, level) {
				if doc, ok := folder.Fold(); ok {
					attrs = append(attrs, doc)
				}
			}
			log.Log(ctx, level, msg, attrs...)
			observe(*res)
			return err
		}
	}
}

// metricsFolder is a Recorder that can hand what it recorded to a log line
// as one EMF document (telemetry.Metrics.Fold), resetting it; false when it
// cannot (the metrics then leave with the invocation's own EMF line).
type metricsFolder interface {
	Fold() (slog.Attr, bool)
}

// decode unwraps the record's EventBridge envelope and reads the event's
// head (type, webhookEventId, source type) without the SDK. A record that
// cannot be decoded fails (envelope.ErrMalformed, bot.ErrEvent). The
// steps after it run with the webhookEventId in their context when
// eventContext is set, so every log line about the event carries it.
func decode(eventContext func(ctx context.Context, id string) context.Context) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			_, detail, err := envelope.Decode([]byte(r.msg.Body))
			if err != nil {
				r.result.WebhookEventID = salvageEventID(r.msg.Body)
				return err
			}
			h, err := bot.Peek(detail.Event)
			if err != nil {
				r.result.WebhookEventID = salvageEventID(r.msg.Body)
				return err
			}
			r.detail, r.head = detail, h
			r.result.WebhookEventID, r.result.Type, r.result.Channel = h.WebhookEventID, h.Type, detail.Channel
			if r.flush, err = parseFlush(r.msg); err != nil {
				return err
			}
			if eventContext != nil && h.WebhookEventID != "" {
				ctx = eventContext(ctx, h.WebhookEventID)
			}
			return next(ctx, r)
		}
	}
}

// salvageEventID is the webhookEventId of a record that cannot be decoded,
// read leniently (only that field of the envelope's event, the rest
// ignored), or "": so the dead letter's Result, log line and the local
// event log name the event LINE sent rather than only the SQS message.
func salvageEventID(body string) string {
	var b struct {
		Detail struct {
			Event struct {
				WebhookEventID string `json:"webhookEventId"`
			} `json:"event"`
		} `json:"detail"`
	}
	if json.Unmarshal([]byte(body), &b) != nil {
		return ""
	}
	return b.Detail.Event.WebhookEventID
}

// idempotent gives the event's effect once-only semantics: it claims the
// event's key for inProgressFor before the steps after it run. An event
// already completed is acknowledged as OutcomeDuplicate without running
// them; a claim held elsewhere, or a store that cannot be reached, fails the
// record so it is retried later. When the steps after it fail, the claim is
// released so the retry can run; when they succeed, the key is marked
// completed for keepFor. A failed release or completion is logged and does
// not change the outcome: the claim then simply expires, and a completion
// failing after the effect must not run the effect again. completing (nil:
// none) gives the context the completion is written with, told the
// record's Result as it will be reported (WithCompletionContext).
func idempotent(store idempotency.Store, inProgressFor, keepFor time.Duration, log *slog.Logger, completing func(context.Context, Result) context.Context) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			if r.head.Type == "" {
				return errNotDecoded
			}
			id := r.head.WebhookEventID
			key := idempotency.EventKey(r.detail.Channel, id, r.detail.Event)
			switch {
			case r.flush != nil:
				// A debounce flush of the event, claimed apart from the
				// event's own record (completed when it was appended).
				key = r.flush.key(key)
			case r.long:
				// The hand-off completed the event's own key: its run on
				// the long-work queue is claimed under a key of its own.
				key += longKeySuffix
			}
			switch err := store.Claim(ctx, key, inProgressFor); {
			case errors.Is(err, idempotency.ErrCompleted):
				r.result.Outcome = OutcomeDuplicate
				return nil
			case err != nil:
				return fmt.Errorf("claim %s: %w", key, err)
			}
			if err := next(ctx, r); err != nil {
				if rerr := store.Release(context.WithoutCancel(ctx), key); rerr != nil {
					log.WarnContext(ctx, "release claim", "webhookEventId", id, "error", rerr.Error())
				}
				return err
			}
			cctx := context.WithoutCancel(ctx)
			if completing != nil {
				res := r.result
				if res.Outcome == "" {
					res.Outcome = OutcomeOK
				}
				cctx = completing(cctx, res)
			}
			if err := store.Complete(cctx, key, keepFor); err != nil {
				log.ErrorContext(ctx, "mark completed", "webhookEventId", id, "error", err.Error())
			}
			return nil
		}
	}
}

// longKeySuffix marks the idempotency key of an event's run on the
// long-work queue.
const longKeySuffix = "#long"

// parse builds the full event, with the SDK's typed event (bot.Parse),
// names its channel (the envelope's), and binds it to a new LINE client of
// that channel from newMessenger (when set), one per record. With a state
// store the client records the event's reply attempt in it before the reply
// (withLedger), so a retry never pushes what a reply may have delivered. An
// event the SDK cannot decode fails the record (bot.ErrEvent) and gets no
// client; so does (transiently) one of a channel newMessenger has no client
// for.
func parse(newMessenger messengers, state StateStore, keepFor time.Duration) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			ev, err := bot.Parse(r.detail.Event, r.detail.Destination, r.detail.ReceivedAt, nil)
			if err != nil {
				return err
			}
			ev.Channel = r.detail.Channel
			if newMessenger != nil {
				m, err := newMessenger(ev.Channel)
				if err != nil {
					return err
				}
				r.messenger = withLedger(m, state, idempotency.EventKey(ev.Channel, ev.WebhookEventID, ev.Raw), keepFor)
				ev.Bind(r.messenger)
			}
			r.event = ev
			return next(ctx, r)
		}
	}
}

// heldMark is set by MarkHeld while a record's handler runs.
type heldMark struct{ held atomic.Bool }

type heldKey struct{}

// MarkHeld marks the record whose handler runs in ctx as held: its result
// was written to the HeldQueue because LINE refused the push for the monthly
// limit. If the handler then succeeds, the record's outcome is OutcomeHeld.
// It reports false when ctx is not a record's (nothing is marked).
func MarkHeld(ctx context.Context) bool {
	m, ok := ctx.Value(heldKey{}).(*heldMark)
	if ok {
		m.held.Store(true)
	}
	return ok
}

// trackHeld gives the steps after it a context MarkHeld can mark, and turns
// a successful record that was marked into OutcomeHeld.
func trackHeld() middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			m := &heldMark{}
			err := next(context.WithValue(ctx, heldKey{}, m), r)
			if err == nil && m.held.Load() {
				r.result.Outcome = OutcomeHeld
			}
			return err
		}
	}
}

// crashReports is where and how crash reports are published.
type crashReports struct {
	pub      topicPublisher // nil: no reports
	topic    string
	function string
	region   string
	secrets  []string          // scrubbed from the report, besides anything token-shaped
	marks    idempotency.Store // crash markers; nil: report on the first receive only
	markFor  time.Duration     // how long an event's crash pages once
}

// reportCrash publishes a crash report to the ops topic when the handler
// panicked, once per event and c.markFor (24 h), redriven or not: before
// publishing it claims the event's crash marker (idempotency.CrashKey, a
// conditional put that expires after markFor) and publishes only when the
// claim is new. A report that cannot be published releases the marker, so
// the next receive reports. When the marker store cannot be reached (or
// there is none) it falls back to publishing on the record's first receive.
// The report is built from the record's Result and the recovered panic, with
// c's secrets scrubbed. A report that cannot be built or published is
// logged; the record's outcome never depends on it.
func reportCrash(c crashReports, now func() time.Time, log *slog.Logger) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			err := next(ctx, r)
			if r.panicked == nil || c.pub == nil {
				return err
			}
			ctx = context.WithoutCancel(ctx)
			res := r.result
			marker := idempotency.CrashKey(idempotency.EventKey(r.detail.Channel, res.WebhookEventID, r.detail.Event))
			marked := false
			if c.marks != nil {
				switch merr := c.marks.Claim(ctx, marker, c.markFor); {
				case merr == nil:
					marked = true
				case errors.Is(merr, idempotency.ErrInProgress), errors.Is(merr, idempotency.ErrCompleted):
					log.InfoContext(ctx, "crash already reported", "webhookEventId", res.WebhookEventID, "receiveCount", res.ReceiveCount)
					return err
				default:
					log.WarnContext(ctx, "crash marker not written", "webhookEventId", res.WebhookEventID, "error", merr.Error())
				}
			}
			if !marked && res.ReceiveCount > 1 {
				return err // no marker: the first receive reported it
			}
			rep := crash.New(r.panicked.value, r.panicked.stack,
				crash.WithFunction(c.function), crash.WithEvent(res.Type, res.WebhookEventID), crash.WithChannel(res.Channel),
				crash.WithTraceID(res.TraceID), crash.WithRegion(c.region),
				crash.WithReceiveCount(res.ReceiveCount), crash.WithTime(now()), crash.WithSecrets(c.secrets...))
			body, merr := rep.Marshal()
			if merr != nil {
				log.ErrorContext(ctx, "crash report not built", "error", merr.Error())
				return err
			}
			_, perr := c.pub.Publish(ctx, &sns.PublishInput{
				TopicArn: aws.String(c.topic),
				Subject:  aws.String("linegate crash: " + res.Type),
				Message:  aws.String(string(body)),
				MessageAttributes: map[string]snstypes.MessageAttributeValue{
					crash.AttributeKind: {DataType: aws.String("String"), StringValue: aws.String(crash.KindCrash)},
				},
			})
			switch {
			case perr != nil:
				log.ErrorContext(ctx, "crash report not published", "webhookEventId", res.WebhookEventID, "error", perr.Error())
				if marked {
					if rerr := c.marks.Release(ctx, marker); rerr != nil {
						log.WarnContext(ctx, "crash marker not released", "webhookEventId", res.WebhookEventID, "error", rerr.Error())
					}
				}
			case marked:
				// Completed, the marker is no claim in progress: nothing that
				// releases claims left by a dead process (a restart of
				// `linegate local --state`) can make the crash page again.
				if cerr := c.marks.Complete(ctx, marker, c.markFor); cerr != nil {
					log.WarnContext(ctx, "crash marker not completed", "webhookEventId", res.WebhookEventID, "error", cerr.Error())
				}
			}
			return err
		}
	}
}

// announceDeadLetter publishes a dead-letter notice (crash.DeadLetter) to
// the ops topic for each record the worker sent to a dead-letter queue:
// the DLQ's depth alarm fires once per OK → ALARM edge, so only the notice
// makes a second dead letter reach the operator. A record whose handler
// panicked carries its crash's stack signature, so the notifier folds the
// notice into that crash's card. It sits outside settleFailure, which
// decides the dead letter; a notice that cannot be built or published is
// logged and counted (DeadLetterNoticesFailed) and never changes the
// record's outcome: the DLQ's alarm and the notifier's sweep of DLQ depths
// still see the message.
func announceDeadLetter(c crashReports, now func() time.Time, log *slog.Logger, m telemetry.Recorder) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			err := next(ctx, r)
			res := r.result
			if c.pub == nil || res.Outcome != OutcomeDeadLettered {
				return err
			}
			ctx = context.WithoutCancel(ctx)
			var rep *crash.Report
			if r.panicked != nil {
				cr := crash.New(r.panicked.value, r.panicked.stack, crash.WithFunction(c.function), crash.WithSecrets(c.secrets...))
				rep = &cr
			}
			d := crash.NewDeadLetter(res.DeadLetterQueue, res.Queue, res.DeadLetterReason, res.Err, rep, now(), c.secrets...)
			d.EventType, d.WebhookEventID, d.ReceiveCount, d.Region = res.Type, res.WebhookEventID, res.ReceiveCount, c.region
			d.Function = c.function
			body, merr := d.Marshal()
			if merr == nil {
				_, merr = c.pub.Publish(ctx, &sns.PublishInput{
					TopicArn: aws.String(c.topic),
					Subject:  aws.String("linegate dead letter: " + res.DeadLetterQueue),
					Message:  aws.String(string(body)),
					MessageAttributes: map[string]snstypes.MessageAttributeValue{
						crash.AttributeKind: {DataType: aws.String("String"), StringValue: aws.String(crash.KindDeadLetter)},
					},
				})
			}
			if merr != nil {
				m.Count("DeadLetterNoticesFailed", 1)
				log.ErrorContext(ctx, "dead-letter notice not published", "webhookEventId", res.WebhookEventID, "queue", res.DeadLetterQueue, "error", merr.Error())
				return err
			}
			m.Count("DeadLetterNoticesPublished", 1)
			return err
		}
	}
}

// timeout runs the steps after it with the record's deadline (see
// recordContext).
func timeout(recordTimeout, margin time.Duration) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			ctx, cancel := recordContext(ctx, recordTimeout, margin)
			defer cancel()
			return next(ctx, r)
		}
	}
}

// minRecordTime is the least time a record's handler is given, even when
// the invocation is already inside its margin: enough to fail cleanly.
const minRecordTime = 100 * time.Millisecond

// recordContext bounds a record's handler: recordTimeout, and never closer
// than margin to the invocation's own deadline (the rest of the record —
// releasing the claim, the crash report, the response — needs that time),
// but at least minRecordTime.
func recordContext(ctx context.Context, recordTimeout, margin time.Duration) (context.Context, context.CancelFunc) {
	d := recordTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - margin; left < d {
			d = max(left, minRecordTime)
		}
	}
	return context.WithTimeout(ctx, d)
}

// recoverPanics turns a panic of the steps after it into an error wrapping
// ErrPanic, records the panic value and its stack for trace and reportCrash,
// and marks the Result as panicked, so a panicking handler fails its record
// only. A panic value with a PanicStack method brings the stack it was
// raised on (a handler in another process), which is recorded instead.
func recoverPanics() middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) (err error) {
			defer func() {
				if v := recover(); v != nil {
					stack := debug.Stack()
					if s, ok := v.(interface{ PanicStack() []byte }); ok {
						stack = s.PanicStack() // a handler run elsewhere (linegate local --watch) panicked there
					}
					r.panicked = &panicked{value: v, stack: stack}
					r.result.Panicked = true
					err = fmt.Errorf("%w: %v", ErrPanic, v)
				}
			}()
			return next(ctx, r)
		}
	}
}

// intercept lets f handle the event instead of the router (nil f: every
// event goes to the router).
func intercept(f func(ctx context.Context, e *bot.Event) (bool, error)) middleware {
	return func(next handler) handler {
		if f == nil {
			return next
		}
		return func(ctx context.Context, r *record) error {
			handled, err := f(ctx, r.event)
			if handled || err != nil {
				return err
			}
			return next(ctx, r)
		}
	}
}

// dispatch is the end of the pipeline: the bot's router runs the event's
// handler.
func dispatch(d dispatcher) handler {
	return func(ctx context.Context, r *record) error {
		return d.Dispatch(ctx, r.event)
	}
}
