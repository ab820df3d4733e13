// Package worker processes SQS batches of LINE events: it unwraps each
// record's EventBridge envelope, skips events whose effect already happened,
// runs the bot's handler with a per-record deadline, recovers panics into
// crash reports, and reports failures per record so that one bad event never
// fails its batch.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/crash"
	"github.com/linegate/linegate/pkg/envelope"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/telemetry"
)

// ErrPanic wraps the value of a recovered handler panic.
var ErrPanic = errors.New("handler panicked")

// Outcome is what happened to one record.
type Outcome string

// Record outcomes, as `linegate local` reports them.
const (
	OutcomeOK        Outcome = "ok"        // handled; deleted from the queue
	OutcomeDuplicate Outcome = "duplicate" // its effect had already happened; deleted without running the handler
	OutcomeFailed    Outcome = "failed"    // reported as a batch item failure; SQS will deliver it again
)

// Result describes one processed record, for observers (metrics, the local
// runtime's /_local/events).
type Result struct {
	MessageID      string
	WebhookEventID string
	Type           string
	ReceiveCount   int
	Outcome        Outcome
	Err            error
	Panicked       bool
	Duration       time.Duration
	TraceID        string
}

// dispatcher runs the bot for one event; *bot.Router satisfies it.
type dispatcher interface {
	Dispatch(ctx context.Context, e *bot.Event) error
}

// topicPublisher is the one SNS call the worker makes, for crash reports.
type topicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Span is what a tracer returns for one record: annotate it, end it with the
// record's error (nil on success).
type Span interface {
	Annotate(key string, value any)
	End(err error)
}

// panicRecorder is a Span that can record a recovered panic with its stack
// (telemetry's spans can); the worker uses it instead of End for a panic.
type panicRecorder interface {
	Panic(v any, stack []byte)
}

// StartSpan starts a trace span for a record. upstream is the record's
// AWSTraceHeader (the webhook's trace), "" when absent.
type StartSpan func(ctx context.Context, name, upstream string) (context.Context, Span)

// Processor handles SQS batches. It is safe for concurrent use.
type Processor struct {
	router        dispatcher
	store         idempotency.Store
	newMessenger  func() bot.Messenger
	ops           topicPublisher
	opsTopic      string
	concurrency   int
	inProgressFor time.Duration
	keepFor       time.Duration
	recordTimeout time.Duration
	margin        time.Duration
	function      string
	region        string
	secrets       []string
	now           func() time.Time
	log           *slog.Logger
	metrics       telemetry.Recorder
	observe       func(Result)
	startSpan     StartSpan
	traceID       func(ctx context.Context) string
	eventContext  func(ctx context.Context, id string) context.Context
}

// Option configures a Processor.
type Option func(*Processor)

// WithMessenger sets the factory for the LINE client a record's handler uses;
// it is called once per record (the SDK client is not goroutine-safe).
func WithMessenger(f func() bot.Messenger) Option { return func(p *Processor) { p.newMessenger = f } }

// WithCrashReports publishes one crash report per panicking record (on its
// first receive) to the ops topic.
func WithCrashReports(api topicPublisher, topicARN string) Option {
	return func(p *Processor) { p.ops, p.opsTopic = api, topicARN }
}

// WithConcurrency bounds how many records of a batch run at once (default 4).
func WithConcurrency(n int) Option { return func(p *Processor) { p.concurrency = max(1, n) } }

// WithFunctionTimeout sets how long an in-progress claim lasts: the function's
// timeout, after which a crashed invocation's claim expires (default 30 s).
func WithFunctionTimeout(d time.Duration) Option { return func(p *Processor) { p.inProgressFor = d } }

// WithRecordTimeout bounds one record's handler (default: the function
// timeout less a margin, and never past the invocation's deadline).
func WithRecordTimeout(d time.Duration) Option { return func(p *Processor) { p.recordTimeout = d } }

// WithKeepFor sets how long a completed marker is kept (default 48 h; at
// least 24 h, LINE's redelivery and retry-key window).
func WithKeepFor(d time.Duration) Option { return func(p *Processor) { p.keepFor = d } }

// WithIdentity names the function and region in crash reports.
func WithIdentity(function, region string) Option {
	return func(p *Processor) { p.function, p.region = function, region }
}

// WithSecrets are scrubbed from crash reports (besides anything token-shaped).
func WithSecrets(s ...string) Option {
	return func(p *Processor) { p.secrets = append(p.secrets, s...) }
}

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(p *Processor) { p.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Processor) { p.log = l } }

// WithMetrics records RecordsProcessed, RecordsFailed, DuplicatesSkipped,
// HandlerPanics and EndToEndLatency.
func WithMetrics(r telemetry.Recorder) Option { return func(p *Processor) { p.metrics = r } }

// WithObserver is called once per record with its result.
func WithObserver(f func(Result)) Option { return func(p *Processor) { p.observe = f } }

// WithTracing starts a span per record and reads the current trace id for
// logs and crash reports.
func WithTracing(start StartSpan, traceID func(ctx context.Context) string) Option {
	return func(p *Processor) { p.startSpan, p.traceID = start, traceID }
}

// WithEventContext puts each record's webhookEventId into its context, so
// every log line written while handling it carries the id.
func WithEventContext(f func(ctx context.Context, id string) context.Context) Option {
	return func(p *Processor) { p.eventContext = f }
}

// New returns a Processor running router with store for idempotency.
func New(router dispatcher, store idempotency.Store, opts ...Option) (*Processor, error) {
	p := &Processor{
		router: router, store: store, concurrency: 4,
		inProgressFor: 30 * time.Second, keepFor: 48 * time.Hour, margin: 2 * time.Second,
		now: time.Now, log: slog.Default(), metrics: telemetry.Discard,
		observe:   func(Result) {},
		startSpan: func(ctx context.Context, _, _ string) (context.Context, Span) { return ctx, nopSpan{} },
		traceID:   func(context.Context) string { return "" },
	}
	for _, o := range opts {
		o(p)
	}
	if router == nil || store == nil {
		return nil, errors.New("worker: a router and an idempotency store are required")
	}
	if p.keepFor < 24*time.Hour {
		return nil, fmt.Errorf("worker: completed markers must be kept at least 24h, got %v", p.keepFor)
	}
	if p.recordTimeout == 0 {
		p.recordTimeout = max(p.inProgressFor-p.margin, time.Second)
	}
	return p, nil
}

type nopSpan struct{}

func (nopSpan) Annotate(string, any) {}
func (nopSpan) End(error)            {}

// Handle processes a batch and reports the records that failed, so SQS
// deletes the rest. It returns an error only when ctx ends before the batch
// was looked at at all; a failure of any single record is in the response.
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, p.concurrency)
	for _, rec := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res := p.record(ctx, rec)
			p.observe(res)
			if res.Outcome == OutcomeFailed {
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return resp, nil
}

// record runs one record to an outcome. It never panics.
func (p *Processor) record(ctx context.Context, rec events.SQSMessage) (res Result) {
	start := p.now()
	res = Result{MessageID: rec.MessageId, ReceiveCount: receiveCount(rec)}
	ctx, span := p.startSpan(ctx, "record", rec.Attributes["AWSTraceHeader"])
	res.TraceID = p.traceID(ctx)
	var panicValue any
	var panicStack []byte
	defer func() {
		res.Duration = p.now().Sub(start)
		if pr, ok := span.(panicRecorder); ok && panicStack != nil {
			pr.Panic(panicValue, panicStack) // records the panic and its stack, and ends the span
		} else {
			span.End(res.Err)
		}
		p.account(ctx, res)
	}()

	_, env, err := envelope.Decode([]byte(rec.Body))
	if err != nil {
		res.Outcome, res.Err = OutcomeFailed, err
		return res
	}
	// Only the head is read before the claim: a duplicate costs no more.
	h, err := bot.Peek(env.Event)
	if err != nil {
		res.Outcome, res.Err = OutcomeFailed, err
		return res
	}
	res.WebhookEventID, res.Type = h.WebhookEventID, h.Type
	if p.eventContext != nil && h.WebhookEventID != "" {
		ctx = p.eventContext(ctx, h.WebhookEventID)
	}
	span.Annotate("webhookEventId", h.WebhookEventID)
	span.Annotate("eventType", h.Type)
	span.Annotate("sourceType", string(h.SourceType))
	if up := rec.Attributes["AWSTraceHeader"]; up != "" {
		span.Annotate("upstreamTraceId", crash.TraceRoot(up))
	}

	key := idempotency.Key(h.WebhookEventID, env.Event)
	switch err := p.store.Claim(ctx, key, p.inProgressFor); {
	case errors.Is(err, idempotency.ErrCompleted):
		res.Outcome = OutcomeDuplicate
		return res
	case err != nil:
		// In progress elsewhere, or the store is unreachable: try again later.
		res.Outcome, res.Err = OutcomeFailed, fmt.Errorf("claim %s: %w", key, err)
		return res
	}
	ev, err := bot.Parse(env.Event, env.Destination, env.ReceivedAt, nil)
	if err != nil {
		p.release(ctx, key, h.WebhookEventID)
		res.Outcome, res.Err = OutcomeFailed, err
		return res
	}

	if p.newMessenger != nil {
		ev.Bind(p.newMessenger())
	}
	rctx, cancel := p.recordContext(ctx)
	recovered, stack, err := p.dispatch(rctx, ev)
	cancel()
	if stack != nil {
		res.Panicked = true
		panicValue, panicStack = recovered, stack
		p.reportCrash(ctx, ev, res, recovered, stack)
	}
	if err != nil {
		p.release(ctx, key, ev.WebhookEventID)
		res.Outcome, res.Err = OutcomeFailed, err
		return res
	}
	if cerr := p.store.Complete(context.WithoutCancel(ctx), key, p.keepFor); cerr != nil {
		// The effect happened; failing the record would run it again. Keep
		// the success and let the claim expire; sends carry retry keys.
		p.log.ErrorContext(ctx, "mark completed", "webhookEventId", ev.WebhookEventID, "error", cerr.Error())
	}
	res.Outcome = OutcomeOK
	if !ev.Timestamp.IsZero() && ev.Timestamp.Unix() > 0 {
		p.metrics.Duration("EndToEndLatency", p.now().Sub(ev.Timestamp))
	}
	return res
}

// release gives up a claim so the retry can run; a failed release only
// delays the retry until the claim expires.
func (p *Processor) release(ctx context.Context, key, id string) {
	if err := p.store.Release(context.WithoutCancel(ctx), key); err != nil {
		p.log.WarnContext(ctx, "release claim", "webhookEventId", id, "error", err.Error())
	}
}

// recordContext bounds the handler: the record timeout, and never closer
// than the margin to the invocation's own deadline.
func (p *Processor) recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := p.recordTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - p.margin; left < d {
			d = max(left, 100*time.Millisecond)
		}
	}
	return context.WithTimeout(ctx, d)
}

// dispatch runs the handler, turning a panic into an error plus the panic
// value and its stack.
func (p *Processor) dispatch(ctx context.Context, ev *bot.Event) (recovered any, stack []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			stack = debug.Stack()
			recovered = r
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return nil, nil, p.router.Dispatch(ctx, ev)
}

func (p *Processor) reportCrash(ctx context.Context, ev *bot.Event, res Result, recovered any, stack []byte) {
	p.metrics.Count("HandlerPanics", 1)
	if res.ReceiveCount > 1 || p.ops == nil {
		return // reported on the first receive only
	}
	rep := crash.New(recovered, stack,
		crash.WithFunction(p.function), crash.WithEvent(ev.Type, ev.WebhookEventID),
		crash.WithTraceID(res.TraceID), crash.WithRegion(p.region),
		crash.WithReceiveCount(res.ReceiveCount), crash.WithTime(p.now()), crash.WithSecrets(p.secrets...))
	body, merr := rep.Marshal()
	if merr != nil {
		p.log.ErrorContext(ctx, "crash report not built", "error", merr.Error())
		return
	}
	_, perr := p.ops.Publish(context.WithoutCancel(ctx), &sns.PublishInput{
		TopicArn: aws.String(p.opsTopic),
		Subject:  aws.String("linegate crash: " + ev.Type),
		Message:  aws.String(string(body)),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			crash.AttributeKind: {DataType: aws.String("String"), StringValue: aws.String(crash.KindCrash)},
		},
	})
	if perr != nil {
		p.log.ErrorContext(ctx, "crash report not published", "webhookEventId", ev.WebhookEventID, "error", perr.Error())
	}
}

func (p *Processor) account(ctx context.Context, res Result) {
	attrs := []any{"webhookEventId", res.WebhookEventID, "type", res.Type, "outcome", string(res.Outcome),
		"receiveCount", res.ReceiveCount, "durationMs", res.Duration.Milliseconds()}
	switch res.Outcome {
	case OutcomeOK:
		p.metrics.Count("RecordsProcessed", 1)
	case OutcomeDuplicate:
		p.metrics.Count("DuplicatesSkipped", 1)
	case OutcomeFailed:
		p.metrics.Count("RecordsFailed", 1)
		attrs = append(attrs, "error", res.Err.Error(), "panic", res.Panicked)
	}
	p.metrics.Duration("RecordDuration", res.Duration)
	if res.Outcome == OutcomeFailed {
		p.log.WarnContext(ctx, "record failed", attrs...)
	} else {
		p.log.InfoContext(ctx, "record processed", attrs...)
	}
}

func receiveCount(rec events.SQSMessage) int {
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	return n
}
