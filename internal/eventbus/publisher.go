// Package eventbus hands the webhook's entries to EventBridge: batches of at
// most 10 entries and under 1 MB, only failed retryable entries re-sent, all
// within a deadline well inside LINE's timeout. What an entry carries is
// package envelope's contract.
package eventbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/awserr"
	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/batch"
	"github.com/linegate/linegate/internal/telemetry"
)

// DefaultSource is the EventBridge Source of every entry the webhook publishes.
const DefaultSource = "line.webhook"

// EventBridge limits (PutEvents). Entry size is computed the way EventBridge
// documents it: Source + DetailType + Detail + Resources, in UTF-8 bytes.
// Since 2026-01-29 an event may be up to 1 MB; a request carries at most 10
// entries.
const (
	MaxEntries      = 10
	MaxRequestBytes = 1 << 20
	MaxEntryBytes   = 1 << 20
)

// Retryable PutEvents per-entry error codes: only these are re-sent. Anything
// else (MalformedDetail, InvalidArgument, AccessDenied…) fails the same way
// every time.
var retryableCodes = map[string]bool{
	"InternalFailure":     true,
	"ThrottlingException": true,
}

// noSDKRetries turns the SDK's retryer off for PutEvents: Publish retries
// itself, per entry and within its deadline, so there is one retry layer.
func noSDKRetries(o *eventbridge.Options) { o.Retryer = aws.NopRetryer{} }

// ErrNotAccepted is returned by Publish when at least one entry did not reach
// the bus. The webhook answers 500 so that LINE redelivers; events that did
// reach the bus are deduplicated downstream by webhookEventId.
var ErrNotAccepted = errors.New("eventbus: not every event was accepted")

// Metric names the publisher records through WithMetrics (docs/metrics.md
// lists every metric of every function). A publication the bus took whole
// on the first try records nothing: the webhook's answer and API Gateway's
// metrics say it, and the X-Ray trace of a sampled request times the call
// (docs/cost.md).
const (
	// MetricPublishRetries counts entries re-sent after a retryable failure,
	// once per entry and retry round.
	MetricPublishRetries = "PublishRetries"
	// MetricPublishFailures counts entries that did not reach the bus
	// (rejected, too large, or still pending at the deadline).
	MetricPublishFailures = "PublishFailures"
)

// Entry is one LINE event ready for the bus.
type Entry struct {
	DetailType  string // the LINE event's type
	Detail      []byte // the marshalled Envelope
	TraceHeader string // the trace header (telemetry.TraceHeader), passed through to the rules' targets
	EventID     string // webhookEventId, for logs only
}

// Size is the entry's size as EventBridge counts it against its limits.
func (e Entry) Size(source string) int { return len(source) + len(e.DetailType) + len(e.Detail) }

// Failure describes one entry that did not reach the bus.
type Failure struct {
	EventID string
	Code    string
	Message string
}

// Result reports what Publish did. Accepted + len(Failed) == entries given.
type Result struct {
	Accepted int
	Calls    int // PutEvents calls made, retries included
	Retried  int // entries re-sent after a retryable failure
	Failed   []Failure
}

// eventPutter is the one call the publisher makes: the EventBridge client and
// the in-memory bus both satisfy it.
type eventPutter interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Publisher hands entries to one event bus: batches of at most 10 entries and
// MaxRequestBytes, concurrent calls, only failed retryable entries re-sent,
// all within a deadline so the webhook always answers before LINE gives up.
// It is safe for concurrent use.
type Publisher struct {
	api        eventPutter
	bus        string
	source     string
	deadline   time.Duration
	backoff    time.Duration
	maxBackoff time.Duration
	parallel   int
	maxEntry   int
	maxRequest int
	log        *slog.Logger
	metrics    telemetry.Recorder
	sleep      func(ctx context.Context, d time.Duration) error
	jitter     backoff.Jitter
}

// Option configures a Publisher.
type Option func(*Publisher)

// WithSource sets the Source of every entry (default "line.webhook").
func WithSource(s string) Option { return func(p *Publisher) { p.source = s } }

// WithDeadline bounds a whole Publish, retries included (default 800 ms, well
// inside LINE's 1-2 s webhook timeout).
func WithDeadline(d time.Duration) Option { return func(p *Publisher) { p.deadline = d } }

// WithBackoff sets the first retry delay and its cap (default 25 ms, 200 ms).
func WithBackoff(first, max time.Duration) Option {
	return func(p *Publisher) { p.backoff, p.maxBackoff = first, max }
}

// WithParallelism bounds concurrent PutEvents calls per Publish (default 4).
func WithParallelism(n int) Option { return func(p *Publisher) { p.parallel = max(1, n) } }

// WithLimits overrides the per-entry and per-request byte limits (tests, or a
// bus with other limits).
func WithLimits(entry, request int) Option {
	return func(p *Publisher) { p.maxEntry, p.maxRequest = entry, request }
}

// WithLogger sets the logger for failed entries (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Publisher) { p.log = l } }

// WithMetrics records PublishRetries and PublishFailures.
func WithMetrics(r telemetry.Recorder) Option { return func(p *Publisher) { p.metrics = r } }

// WithSleep replaces the backoff sleep (tests).
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(p *Publisher) { p.sleep = f }
}

// NewPublisher returns a Publisher for the named bus.
func NewPublisher(api eventPutter, bus string, opts ...Option) *Publisher {
	p := &Publisher{
		api: api, bus: bus, source: DefaultSource,
		deadline: 800 * time.Millisecond, backoff: 25 * time.Millisecond, maxBackoff: 200 * time.Millisecond,
		parallel: 4, maxEntry: MaxEntryBytes, maxRequest: MaxRequestBytes,
		log: slog.Default(), metrics: telemetry.Discard, sleep: backoff.Sleep, jitter: backoff.Equal,
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Source is the Source every entry is published with.
func (p *Publisher) Source() string { return p.source }

// Publish sends every entry to the bus. It returns nil only when every entry
// was accepted; otherwise the error wraps ErrNotAccepted and Result.Failed
// names each entry that did not make it (logged with its webhookEventId).
// It is Start followed by Wait.
func (p *Publisher) Publish(ctx context.Context, entries []Entry) (Result, error) {
	return p.Start(ctx, entries).Wait()
}

// Publication is a Publish under way: Start returns it as soon as the first
// PutEvents calls are on their way, so the caller's goroutine can do other
// I/O meanwhile (the webhook sends to its chat queue) instead of starting a
// goroutine of its own; Wait gives Publish's outcome.
type Publication struct {
	p       *Publisher
	ctx     context.Context
	cancel  context.CancelFunc
	entries []Entry
	pending []int
	// last is, per entry still pending, the retryable failure that kept it
	// pending: what is reported if the deadline passes before it goes through.
	last   map[int]Failure
	flight *flight // the round on its way, nil before or between rounds
	res    Result
	err    error
	done   bool
}

// Done returns a Publication that is already over, with res and err as its
// outcome: for a publisher that finishes in memory (a stub, an emulator),
// which has nothing to overlap.
func Done(res Result, err error) *Publication {
	return &Publication{res: res, err: err, done: true}
}

// over are the finished Publications of the usual stub outcome, so a stub
// accepting everything need not allocate one per call.
var over = func() []Publication {
	out := make([]Publication, MaxEntries+1)
	for n := range out {
		out[n] = Publication{res: Result{Accepted: n}, done: true}
	}
	return out
}()

// Accepted is Done(Result{Accepted: n}, nil), shared for small n: its
// Wait only reads it.
func Accepted(n int) *Publication {
	if n >= 0 && n < len(over) {
		return &over[n]
	}
	return Done(Result{Accepted: n}, nil)
}

// Start starts sending every entry to the bus and returns while the calls
// are on their way (at most the parallelism of them, each on its own
// goroutine). The caller must keep entries, and the bytes they point to,
// unchanged until Wait returns, and must call Wait.
func (p *Publisher) Start(ctx context.Context, entries []Entry) *Publication {
	if len(entries) == 0 {
		return Accepted(0)
	}
	pb := &Publication{p: p, entries: entries, pending: make([]int, 0, len(entries)),
		last: make(map[int]Failure)}
	pb.ctx, pb.cancel = context.WithTimeout(ctx, p.deadline)
	for i, e := range entries {
		if size := e.Size(p.source); size > p.maxEntry {
			pb.res.Failed = append(pb.res.Failed, Failure{EventID: e.EventID, Code: "EntryTooLarge",
				Message: fmt.Sprintf("entry is %d bytes, over the %d-byte limit", size, p.maxEntry)})
			continue
		}
		pb.pending = append(pb.pending, i)
	}
	if len(pb.pending) > 0 && pb.ctx.Err() == nil {
		pb.flight = p.fly(pb.ctx, entries, pb.pending)
	}
	return pb
}

// Wait waits for the calls Start made, re-sends the failed retryable
// entries (with backoff, within the deadline) and returns what Publish
// returns. Calling it again returns the same.
func (pb *Publication) Wait() (Result, error) {
	if pb.done {
		return pb.res, pb.err
	}
	pb.done = true
	defer pb.cancel()
	p, res := pb.p, &pb.res
	delay := p.backoff
	for attempt := 0; len(pb.pending) > 0; attempt++ {
		if attempt > 0 {
			res.Retried += len(pb.pending)
			p.metrics.Count(MetricPublishRetries, float64(len(pb.pending)))
			if err := p.sleep(pb.ctx, p.jitter(delay)); err != nil {
				break
			}
			delay = min(2*delay, p.maxBackoff)
			if pb.ctx.Err() != nil {
				break
			}
			pb.flight = p.fly(pb.ctx, pb.entries, pb.pending)
		}
		if pb.flight == nil {
			break
		}
		retry, failed, calls := pb.flight.land(pb.last)
		pb.flight = nil
		res.Calls += calls
		res.Failed = append(res.Failed, failed...)
		pb.pending = retry
	}
	for _, i := range pb.pending {
		f := Failure{EventID: pb.entries[i].EventID, Code: "DeadlineExceeded",
			Message: fmt.Sprintf("publish deadline (%v) passed before the bus accepted the entry", p.deadline)}
		if l, ok := pb.last[i]; ok {
			f.Code, f.Message = l.Code, f.Message+"; last error: "+l.Message
		}
		res.Failed = append(res.Failed, f)
	}
	res.Accepted = len(pb.entries) - len(res.Failed)
	if len(res.Failed) == 0 {
		return *res, nil
	}
	p.metrics.Count(MetricPublishFailures, float64(len(res.Failed)))
	for _, f := range res.Failed {
		p.log.ErrorContext(pb.ctx, "event not published", "webhookEventId", f.EventID, "code", f.Code, "reason", f.Message)
	}
	pb.err = fmt.Errorf("%w: %d of %d events (%s: %s)", ErrNotAccepted, len(res.Failed), len(pb.entries),
		res.Failed[0].Code, res.Failed[0].Message)
	return *res, pb.err
}

// flight is one round of PutEvents calls on its way: the pending entries
// in batches, sent by at most the publisher's parallelism of goroutines,
// each taking the next batch until none is left.
type flight struct {
	batches [][]int
	outs    []outcome
	wg      sync.WaitGroup
}

// outcome is what one batch's call came to.
type outcome struct {
	retry  []int
	why    []Failure // why[k] is why retry[k] is retried
	failed []Failure
}

// fly starts one round: the pending entries, once, in batches.
func (p *Publisher) fly(ctx context.Context, entries []Entry, pending []int) *flight {
	f := &flight{batches: p.batches(entries, pending)}
	f.outs = make([]outcome, len(f.batches))
	var next atomic.Int64
	workers := min(p.parallel, len(f.batches))
	f.wg.Add(workers)
	for range workers {
		go func() {
			defer f.wg.Done()
			for b := int(next.Add(1) - 1); b < len(f.batches); b = int(next.Add(1) - 1) {
				o := &f.outs[b]
				o.retry, o.why, o.failed = p.send(ctx, entries, f.batches[b])
			}
		}()
	}
	return f
}

// land waits for the round and sorts its outcome into entries to retry
// (recording why in last) and entries that failed for good.
func (f *flight) land(last map[int]Failure) (retry []int, failed []Failure, calls int) {
	f.wg.Wait()
	for _, o := range f.outs {
		for k, i := range o.retry {
			if o.why[k].Code != codeDeadline || last[i].Code == "" {
				last[i] = o.why[k]
			}
		}
		retry = append(retry, o.retry...)
		failed = append(failed, o.failed...)
	}
	return retry, failed, len(f.batches)
}

// batches splits idx into groups of at most MaxEntries entries whose summed
// size stays under the request limit.
func (p *Publisher) batches(entries []Entry, idx []int) [][]int {
	return batch.Split(idx, MaxEntries, p.maxRequest, func(i int) int { return entries[i].Size(p.source) })
}

// codeDeadline is the code of an entry whose call ran out of time.
const codeDeadline = awserr.CodeDeadline

// send makes one PutEvents call for batch. It returns the entries worth
// another try with why, and the entries that failed for good.
func (p *Publisher) send(ctx context.Context, entries []Entry, batch []int) (retry []int, why []Failure, failed []Failure) {
	in := &eventbridge.PutEventsInput{Entries: make([]types.PutEventsRequestEntry, len(batch))}
	for k, i := range batch {
		e := entries[i]
		in.Entries[k] = types.PutEventsRequestEntry{
			EventBusName: aws.String(p.bus),
			Source:       aws.String(p.source),
			DetailType:   aws.String(e.DetailType),
			Detail:       aws.String(string(e.Detail)),
		}
		if e.TraceHeader != "" {
			in.Entries[k].TraceHeader = aws.String(e.TraceHeader)
		}
	}
	out, err := p.api.PutEvents(ctx, in, noSDKRetries)
	if err == nil && (out == nil || len(out.Entries) != len(batch)) {
		err = fmt.Errorf("put events: %d results for %d entries", entriesOf(out), len(batch))
	}
	if err != nil {
		// The whole call failed: every entry shares its fate.
		code, msg, again := awserr.Classify(err)
		for _, i := range batch {
			f := Failure{EventID: entries[i].EventID, Code: code, Message: msg}
			if again {
				retry, why = append(retry, i), append(why, f)
			} else {
				failed = append(failed, f)
			}
		}
		return retry, why, failed
	}
	for k, r := range out.Entries {
		if r.ErrorCode == nil || *r.ErrorCode == "" {
			continue
		}
		f := Failure{EventID: entries[batch[k]].EventID, Code: *r.ErrorCode, Message: aws.ToString(r.ErrorMessage)}
		if retryableCodes[*r.ErrorCode] {
			retry, why = append(retry, batch[k]), append(why, f)
			continue
		}
		failed = append(failed, f)
	}
	return retry, why, failed
}

func entriesOf(out *eventbridge.PutEventsOutput) int {
	if out == nil {
		return 0
	}
	return len(out.Entries)
}
