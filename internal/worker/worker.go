// Package worker processes SQS batches of LINE events: it unwraps each
// record's EventBridge envelope, skips events whose effect already happened,
// runs the bot's handler with a per-record deadline, recovers panics into
// crash reports, and reports failures per record so that one bad event never
// fails its batch.
//
// Records of one message group (one chat, on the FIFO chat queue) run one
// after the other in batch order, groups in parallel; the first failure of a
// group stops it for the batch. A failure that cannot succeed is
// dead-lettered at once, a transient one is retried with growing delays, and
// routes declared long are handed to the long-work queue.
//
// Each record goes through a pipeline of small steps (tracing, accounting,
// failure settling, decoding, deduplication, parsing, binding the event's
// step and session stores, long work, crash reports, the deadline, panic
// recovery) ending in the bot's router; (*Processor).pipeline lists them in
// order and says why the order matters.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/pkg/bot"
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
	// OutcomeHeld: handled, but LINE refused a push for the monthly limit and
	// the result was written to the HeldQueue (pkg/held) instead; deleted from
	// the queue, neither retried nor dead-lettered.
	OutcomeHeld Outcome = "held"
	// OutcomeDeadLettered: sent to the queue's dead-letter queue by the
	// worker and deleted (a permanent failure, an undecodable record, or a
	// transient failure on its last allowed receive).
	OutcomeDeadLettered Outcome = "dead-lettered"
	// OutcomeDeferred: not run because an earlier record of its chat failed
	// in this batch; reported as a failure and made visible again at once,
	// so it follows that record.
	OutcomeDeferred Outcome = "deferred"
	// OutcomeForwarded: its route is long; handed to the long-work queue,
	// where its handler runs, and deleted here.
	OutcomeForwarded Outcome = "forwarded"
	// OutcomeStale: an edit of a message (messageEdited) older than one
	// already handled for it; deleted without running the handler.
	OutcomeStale Outcome = "stale"
	// OutcomeDebounced: an event of a debounced route (bot.Debounce),
	// appended to its chat's burst, whose handler runs once for the whole
	// burst from a later flush; or a flush that found nothing due (a newer
	// event's flush ends the burst). Deleted.
	OutcomeDebounced Outcome = "debounced"
)

// ErrDeferred is the error of an OutcomeDeferred record.
var ErrDeferred = errors.New("not run: an earlier event of its chat failed in this batch")

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
	// Group is the record's MessageGroupId (its chat, on the FIFO chat
	// queue; "" on a standard queue). It is a raw LINE ID: hash it before
	// logging (telemetry.HashUserID).
	Group string
	// Long is true for a record of the long-work queue.
	Long bool
	// Queue is the name of the queue the record came from.
	Queue string
	// Channel is the record's channel ("" for the default one), known
	// once its envelope is decoded.
	Channel string
	// RetryIn is how long a failed record was hidden before its next
	// receive (0 when the worker did not set it).
	RetryIn time.Duration
	// Batch lists the webhookEventIds a debounce flush handled, oldest
	// first (its WebhookEventID is the flush's own event's); nil otherwise.
	Batch []string
	// DeadLetterReason says why an OutcomeDeadLettered record was:
	// "permanent", "malformed" or "retries-exhausted".
	DeadLetterReason string
	// DeadLetterQueue is the name of the queue an OutcomeDeadLettered
	// record was sent to.
	DeadLetterQueue string
	Duration        time.Duration
	TraceID         string
}

// dispatcher runs the bot for one event; *bot.Router satisfies it.
type dispatcher interface {
	Dispatch(ctx context.Context, e *bot.Event) error
}

// topicPublisher is the one SNS call the worker makes, for crash reports.
type topicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Span is what a tracer returns for one record: annotate it, then end it
// exactly once, with Panic when the handler panicked (so the trace shows the
// panic and its stack) and with End otherwise (err nil on success).
// *telemetry.Span satisfies it.
type Span interface {
	Annotate(key string, value any)
	End(err error)
	Panic(v any, stack []byte)
}

// StartSpan starts a trace span for a record. upstream is the record's
// trace header (telemetry.SQSTraceHeader: the webhook's trace), "" when
// absent.
type StartSpan func(ctx context.Context, name, upstream string) (context.Context, Span)

// Processor handles SQS batches. It is safe for concurrent use.
type Processor struct {
	router        dispatcher
	store         idempotency.Store
	state         StateStore // steps and sessions; nil: none
	sessionTTL    time.Duration
	newMessenger  messengers // nil: records get no LINE client
	crash         crashReports
	concurrency   int
	inProgressFor time.Duration
	keepFor       time.Duration
	recordTimeout time.Duration
	margin        time.Duration
	now           func() time.Time
	log           *slog.Logger
	metrics       telemetry.Recorder
	observe       func(Result)
	completing    func(ctx context.Context, res Result) context.Context
	startSpan     StartSpan
	traceID       func(ctx context.Context) string
	eventContext  func(ctx context.Context, id string) context.Context
	intercept     func(ctx context.Context, e *bot.Event) (bool, error)
	queues        *queues
	retry         backoff.Policy
	routeQueues   map[string]string // route queue name -> URL (WithRouteQueues)
	loadingEvery  time.Duration
	long          queueRouter    // the router, when it knows route queues
	debounced     debounceRouter // the router, when it knows debounced routes
	sleep         func(ctx context.Context, d time.Duration) error

	run handler // the pipeline, built by New
}

// Option configures a Processor.
type Option func(*Processor)

// WithMessenger sets the factory for the LINE client a record's handler uses;
// it is called once per record (the SDK client is not goroutine-safe). It
// serves the default channel only: a record of a named channel fails
// (channel.ErrUnknown) unless WithChannelMessengers is given.
func WithMessenger(f func() bot.Messenger) Option {
	return func(p *Processor) {
		p.newMessenger = func(ch string) (bot.Messenger, error) {
			if ch != channel.Default {
				return nil, fmt.Errorf("%w: %q (this worker has no LINE client for it)", channel.ErrUnknown, ch)
			}
			return f(), nil
		}
	}
}

// WithChannelMessengers sets the factory for the LINE client of a record of
// channel ch (channel.Default for the default channel): the client that
// answers through that channel's token. It is called once per record; an
// error (a channel the worker was not configured with) fails the record,
// which is retried and, when it keeps failing, dead-lettered, so no event
// is lost while a channel's configuration reaches the worker.
func WithChannelMessengers(f func(ch string) (bot.Messenger, error)) Option {
	return func(p *Processor) { p.newMessenger = f }
}

// messengers gives the LINE client of a record of channel ch.
type messengers func(ch string) (bot.Messenger, error)

// WithCrashReports publishes a panicking record's crash report to the ops
// topic, once per event and 24 h (see WithCrashMarkers), redriven or not.
func WithCrashReports(api topicPublisher, topicARN string) Option {
	return func(p *Processor) { p.crash.pub, p.crash.topic = api, topicARN }
}

// WithStateStore keeps handlers' idempotent steps (bot.Once) and chat
// sessions (Event.Session) in s, normally the same table as the idempotency
// store. Without it Once and Session fail with bot.ErrNoSteps and
// bot.ErrNoSessions.
func WithStateStore(s StateStore) Option { return func(p *Processor) { p.state = s } }

// WithSessionTTL sets how long a chat session lives after its last save
// (default 24 h).
func WithSessionTTL(d time.Duration) Option { return func(p *Processor) { p.sessionTTL = d } }

// WithCrashMarkers sets how long one event's crash pages once (default 24 h):
// its crash marker's lifetime.
func WithCrashMarkers(d time.Duration) Option { return func(p *Processor) { p.crash.markFor = d } }

// WithConcurrency bounds how many records of a batch run at once (default 4).
func WithConcurrency(n int) Option { return func(p *Processor) { p.concurrency = max(1, n) } }

// WithFunctionTimeout sets how long an in-progress claim lasts: the function's
// timeout, after which a crashed invocation's claim expires (default 30 s).
func WithFunctionTimeout(d time.Duration) Option { return func(p *Processor) { p.inProgressFor = d } }

// WithRecordTimeout bounds one record's handler (default: the function
// timeout less a margin, and never past the invocation's deadline).
func WithRecordTimeout(d time.Duration) Option { return func(p *Processor) { p.recordTimeout = d } }

// WithKeepFor sets how long a completed marker is kept, that is how long a
// redelivered or redriven event is still recognised as a duplicate (default
// 48 h). New refuses less than 24 h, LINE's redelivery and retry-key window.
func WithKeepFor(d time.Duration) Option { return func(p *Processor) { p.keepFor = d } }

// WithIdentity names the function and region in crash reports.
func WithIdentity(function, region string) Option {
	return func(p *Processor) { p.crash.function, p.crash.region = function, region }
}

// WithSecrets are scrubbed from crash reports (besides anything token-shaped).
func WithSecrets(s ...string) Option {
	return func(p *Processor) { p.crash.secrets = append(p.crash.secrets, s...) }
}

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(p *Processor) { p.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Processor) { p.log = l } }

// WithMetrics records RecordsProcessed, RecordsFailed, DuplicatesSkipped,
// HandlerPanics and EndToEndLatency, among others (docs/metrics.md).
func WithMetrics(r telemetry.Recorder) Option { return func(p *Processor) { p.metrics = r } }

// WithObserver is called once per record with its result.
func WithObserver(f func(Result)) Option { return func(p *Processor) { p.observe = f } }

// WithCompletionContext sets f, which gives the context the completion of
// a handled record's claim is written with: res is the record's Result as
// it will be reported (Outcome ok, held or forwarded). linegate local (with
// --state) puts the event log's final outcome in it, so that outcome is
// written in the same transaction as the completion and a crash cannot
// leave one without the other.
func WithCompletionContext(f func(ctx context.Context, res Result) context.Context) Option {
	return func(p *Processor) { p.completing = f }
}

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

// WithIntercept runs f before the bot's router for every event; when f
// reports it handled the event, the router does not run (ChatOps: the
// operator's taps on alert cards never reach the bot).
func WithIntercept(f func(ctx context.Context, e *bot.Event) (bool, error)) Option {
	return func(p *Processor) { p.intercept = f }
}

// WithQueues lets the worker act on the queues its records come from (the
// SQS client in Lambda): dead-letter a failure that cannot succeed on its
// first receive, space a transient failure's receives with WithRetryBackoff,
// make the rest of a failed chat's records visible again, and hand long work
// to its route queue (WithRouteQueues). Without it a failed record just fails, and SQS's
// visibility timeout and redrive policy decide the rest.
func WithQueues(api queueAPI) Option { return func(p *Processor) { p.queues = newQueues(api) } }

// WithRetryBackoff sets how long a transiently failed record stays hidden,
// by receive count (default DefaultRetryBackoff).
func WithRetryBackoff(b backoff.Policy) Option { return func(p *Processor) { p.retry = b } }

// WithRouteQueues is the worker's queue table: each route queue a route
// names with bot.Queue, by name, with its URL. An event whose route names
// one is sent there from any other queue, and runs when it comes from one
// (told apart by queue name). Debounced routes wait on the one named
// "long". A table that lacks a queue the router's routes name fails New;
// without a table every route runs where it is received. An empty URL
// removes the name from the table.
func WithRouteQueues(table map[string]string) Option {
	return func(p *Processor) {
		if p.routeQueues == nil {
			p.routeQueues = map[string]string{}
		}
		for name, url := range table {
			if url == "" {
				delete(p.routeQueues, name) // a later option unsets a queue
				continue
			}
			p.routeQueues[name] = url
		}
	}
}

// WithLongQueue is WithRouteQueues with the one queue named "long".
func WithLongQueue(url string) Option { return WithRouteQueues(map[string]string{longQueue: url}) }

// longQueue is the route queue of long work, which debounced routes also
// wait on (bot.Queue("long")).
const longQueue = "long"

// ErrRouteQueue is returned by New when the router's routes name a route
// queue the worker's queue table lacks.
var ErrRouteQueue = errors.New("worker: a route names a route queue the worker's queue table (ROUTE_QUEUES) lacks")

// withSleep replaces how a debounce flush that arrived early waits for its
// due time (tests: a sleep that advances a fake clock).
func withSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(p *Processor) { p.sleep = f }
}

// WithLoadingRefresh sets how often long work re-shows the loading
// animation (default DefaultLoadingRefresh).
func WithLoadingRefresh(d time.Duration) Option { return func(p *Processor) { p.loadingEvery = d } }

// New returns a Processor running router with store for idempotency.
func New(router dispatcher, store idempotency.Store, opts ...Option) (*Processor, error) {
	p := &Processor{
		router: router, store: store, concurrency: 4,
		inProgressFor: 30 * time.Second, keepFor: 48 * time.Hour, margin: 2 * time.Second, sessionTTL: 24 * time.Hour,
		now: time.Now, log: slog.Default(), metrics: telemetry.Discard,
		observe:   func(Result) {},
		startSpan: func(ctx context.Context, _, _ string) (context.Context, Span) { return ctx, nopSpan{} },
		traceID:   func(context.Context) string { return "" },
		retry:     DefaultRetryBackoff, loadingEvery: DefaultLoadingRefresh, sleep: backoff.Sleep,
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
	if p.sessionTTL <= 0 {
		return nil, fmt.Errorf("worker: the session TTL must be positive, got %v", p.sessionTTL)
	}
	if p.crash.markFor <= 0 {
		p.crash.markFor = 24 * time.Hour
	}
	p.crash.marks = store
	if p.recordTimeout == 0 {
		p.recordTimeout = max(p.inProgressFor-p.margin, time.Second)
	}
	if qr, ok := router.(queueRouter); ok {
		p.long = qr
	}
	if err := p.checkRouteQueues(router); err != nil {
		return nil, err
	}
	if dr, ok := router.(debounceRouter); ok {
		p.debounced = dr
	}
	p.run = chain(p.pipeline(), dispatch(p.router))
	return p, nil
}

type nopSpan struct{}

func (nopSpan) Annotate(string, any) {}
func (nopSpan) End(error)            {}
func (nopSpan) Panic(any, []byte)    {}

// Handle processes a batch and returns once every record has finished.
// Records of one message group (a chat, on the FIFO chat queue) run one
// after the other in batch order; records of different groups, and records
// without a group, run in parallel, at most WithConcurrency at a time. The
// first record of a group that fails stops its group: the group's later
// records are not run (OutcomeDeferred), reported as failures and made
// visible again at once, so they follow the failed one when SQS delivers it
// again. The response lists every record that failed or was deferred, so
// SQS deletes the others and delivers only those again. The error is always
// nil, even when ctx has ended: no failure fails the whole batch. A record
// that ctx's end cut short fails on its own (the idempotency store or the
// handler sees ctx's error) and is listed in the response like any other.
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	var mu sync.Mutex
	var wg sync.WaitGroup
	fail := func(id string) {
		mu.Lock()
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		mu.Unlock()
	}
	sem := make(chan struct{}, p.concurrency)
	for _, lane := range lanes(ev.Records) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			stopped := false
			for _, msg := range lane {
				if stopped {
					p.deferRecord(ctx, msg)
					fail(msg.MessageId)
					continue
				}
				if res := p.process(ctx, msg, len(ev.Records) == 1); res.Outcome == OutcomeFailed {
					fail(msg.MessageId)
					stopped = true
				}
			}
		}()
	}
	wg.Wait()
	return resp, nil
}

// lanes groups a batch's records by MessageGroupId, in batch order; a
// record without a group is a lane of its own.
func lanes(records []events.SQSMessage) [][]events.SQSMessage {
	var out [][]events.SQSMessage
	byGroup := map[string]int{}
	for _, m := range records {
		g := m.Attributes["MessageGroupId"]
		if g == "" {
			out = append(out, []events.SQSMessage{m})
			continue
		}
		i, ok := byGroup[g]
		if !ok {
			i = len(out)
			byGroup[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m)
	}
	return out
}

// process runs one message through the pipeline to an outcome; only says
// it is its invocation's only record.
func (p *Processor) process(ctx context.Context, msg events.SQSMessage, only bool) Result {
	r := &record{msg: msg, long: p.isLong(msg), only: only, result: Result{MessageID: msg.MessageId, ReceiveCount: receiveCount(msg),
		Group: msg.Attributes["MessageGroupId"], Queue: queueName(msg.EventSourceARN)}}
	r.result.Long = r.long
	r.settle(p.run(ctx, r))
	return r.result
}

// isLong reports whether msg came from a route queue.
func (p *Processor) isLong(msg events.SQSMessage) bool {
	if msg.EventSourceARN == "" {
		return false
	}
	name := queueName(msg.EventSourceARN)
	for _, url := range p.routeQueues {
		if queueName(url) == name {
			return true
		}
	}
	return false
}

// checkRouteQueues fails when the worker has a queue table and router
// names (Queues) a route queue it lacks: such a route would run where it
// is received, behind the chat's quick replies.
func (p *Processor) checkRouteQueues(router dispatcher) error {
	qr, ok := router.(interface{ Queues() []string })
	if !ok || len(p.routeQueues) == 0 {
		return nil
	}
	var missing []string
	for _, name := range qr.Queues() {
		if _, ok := p.routeQueues[name]; !ok {
			missing = append(missing, strconv.Quote(name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrRouteQueue, strings.Join(missing, ", "))
	}
	return nil
}

// deferRecord accounts for a record not run because an earlier one of its
// chat failed, and makes it visible again at once.
func (p *Processor) deferRecord(ctx context.Context, msg events.SQSMessage) {
	res := Result{MessageID: msg.MessageId, ReceiveCount: receiveCount(msg), Group: msg.Attributes["MessageGroupId"],
		Queue: queueName(msg.EventSourceARN), Outcome: OutcomeDeferred, Err: ErrDeferred}
	if _, d, err := envelope.Decode([]byte(msg.Body)); err == nil {
		res.Channel = d.Channel
		if h, err := bot.Peek(d.Event); err == nil {
			res.WebhookEventID, res.Type = h.WebhookEventID, h.Type
		}
	}
	if p.queues != nil {
		if err := p.queues.changeVisibility(context.WithoutCancel(ctx), msg, 0); err != nil {
			p.log.WarnContext(ctx, "deferred record not made visible: it waits for its visibility timeout", "messageId", msg.MessageId, "error", err.Error())
		}
	}
	p.metrics.Count("RecordsDeferred", 1)
	p.log.InfoContext(ctx, "record deferred", "webhookEventId", res.WebhookEventID, "messageId", msg.MessageId, "outcome", string(res.Outcome), "receiveCount", res.ReceiveCount,
		"lane", telemetry.HashUserID(res.Group))
	p.observe(res)
}

func receiveCount(msg events.SQSMessage) int {
	n, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	return n
}
