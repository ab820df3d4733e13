// Package ingress is the webhook core: it verifies LINE's signature on the raw
// body, splits the body into events, hands every event to the bus and every
// event that has a chat to the chat queue (in body order, at the same time),
// and answers in milliseconds. It knows nothing of Lambda: adapters for API
// Gateway proxy events and net/http sit on top of Handle.
package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/telemetry"
)

// DefaultMaxBodyBytes is the default request body limit (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// maxDetailType is EventBridge's DetailType length limit.
const maxDetailType = 128

// DefaultMaxEvents bounds the events of one webhook body. LINE batches a few
// events per request; thousands are an attack or a bug, refused before any
// is published.
const DefaultMaxEvents = 1000

// MaxDepth bounds JSON nesting. LINE's events nest a handful of levels;
// EventBridge processes at most 1100, and a deep document is a cheap way to
// burn CPU.
const MaxDepth = 64

// Sentinel errors, one per rejected-request status, so adapters and tests can
// branch with errors.Is.
var (
	ErrMethod    = errors.New("method not allowed")
	ErrTooLarge  = errors.New("body or event too large")
	ErrSignature = errors.New("invalid signature")
	ErrBody      = errors.New("invalid body")
	ErrPublish   = errors.New("events not handed off")
	ErrBot       = errors.New("unexpected destination")
)

// Metric names the handler records through WithMetrics (docs/metrics.md lists
// every metric of every function). A request answered 200 records nothing:
// API Gateway's own metrics (Count, Latency, IntegrationLatency) count and
// time every request for free, and the chat queue's NumberOfMessagesSent
// counts its events, so only what goes wrong is written to CloudWatch Logs,
// which bills every byte (docs/cost.md).
const (
	// MetricSignaturesRejected counts requests refused with 401 for a missing
	// or wrong signature.
	MetricSignaturesRejected = "SignaturesRejected"
	// MetricRequestsRejected counts requests refused for another reason: 405,
	// 413, 400, and 401 for a destination that is not this bot.
	MetricRequestsRejected = "RequestsRejected"
)

// publisher is the one call ingress makes on the bus: Start sends the
// entries and returns while the calls are on their way, so the request's
// goroutine sends to the chat queue meanwhile and the two round trips
// overlap without ingress starting a goroutine of its own
// (eventbus.Publisher runs its PutEvents calls on goroutines anyway). The
// publisher may read entries, and the bytes they point to, until Wait
// returns, and must keep nothing after: the handler writes the next
// request's entries into the same memory.
type publisher interface {
	Start(ctx context.Context, entries []eventbus.Entry) *eventbus.Publication
}

// queuer is the one call ingress makes on the chat queue. Send must not
// keep msgs, nor the bytes they point to, once it returns (as publisher;
// chatqueue.Sender copies them into its SendMessageBatch input).
type queuer interface {
	Send(ctx context.Context, msgs []chatqueue.Message) (chatqueue.Result, error)
}

// Handler is the webhook core. It is safe for concurrent use.
type Handler struct {
	pub          publisher
	queue        queuer
	source       string
	region       string
	secrets      [][]byte
	keys         atomic.Pointer[keyring] // what signatures are checked against; swapped by a re-read
	refresh      *refresher              // nil: the secrets are never re-read
	maxBody      int64
	maxEvents    int
	botUserID    string
	now          func() time.Time
	traceHeader  func(ctx context.Context) string
	log          *slog.Logger
	metrics      telemetry.Recorder
	logEachEvent bool
}

// Option configures a Handler.
type Option func(*Handler)

// WithSecrets sets the channel secrets a signature may be made with: the
// current one first, then the previous one during a rotation. Empty ones are
// ignored. At least one is required.
func WithSecrets(secrets ...string) Option {
	return func(h *Handler) {
		for _, s := range secrets {
			if s != "" {
				h.secrets = append(h.secrets, []byte(s))
			}
		}
	}
}

// WithMaxBodyBytes sets the body limit; larger requests get 413.
func WithMaxBodyBytes(n int64) Option { return func(h *Handler) { h.maxBody = n } }

// WithChatQueue sends every event that has a chat (a user, group or room in
// its source) to q as well, in body order, while the bus gets every event:
// 200 only when both took everything. Without it only the bus is used.
func WithChatQueue(q queuer) Option { return func(h *Handler) { h.queue = q } }

// WithSource sets the Source the bus publishes with (default
// "line.webhook"): the size limit counts it, and chat queue messages carry
// it as EventBridge would.
func WithSource(s string) Option { return func(h *Handler) { h.source = s } }

// WithRegion names the region in the chat queue messages' envelope.
func WithRegion(r string) Option { return func(h *Handler) { h.region = r } }

// WithBotUserID rejects (401) bodies whose destination is not this bot's user
// ID, for deployments where the webhook URL might leak along with a secret of
// another channel. Empty disables the check.
func WithBotUserID(id string) Option { return func(h *Handler) { h.botUserID = id } }

// WithClock sets the clock stamping receivedAt (tests).
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithTraceHeader supplies the trace header each entry carries, so the trace
// continues through EventBridge and SQS to the worker.
func WithTraceHeader(f func(ctx context.Context) string) Option {
	return func(h *Handler) { h.traceHeader = f }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithMetrics records SignaturesRejected and RequestsRejected (and, with
// WithSecretRefresh, SecretRereads and SecretRotations).
func WithMetrics(r telemetry.Recorder) Option { return func(h *Handler) { h.metrics = r } }

// WithEventLogs turns the per-event "event accepted" log line, logged at
// DEBUG, on or off (default on).
func WithEventLogs(on bool) Option { return func(h *Handler) { h.logEachEvent = on } }

// New returns a Handler publishing to pub.
func New(pub publisher, opts ...Option) (*Handler, error) {
	h := &Handler{pub: pub, source: eventbus.DefaultSource, maxBody: DefaultMaxBodyBytes, maxEvents: DefaultMaxEvents, now: time.Now, log: slog.Default(),
		metrics: telemetry.Discard, logEachEvent: true, traceHeader: func(context.Context) string { return "" }}
	for _, o := range opts {
		o(h)
	}
	if pub == nil {
		return nil, errors.New("ingress: a publisher is required")
	}
	if len(h.secrets) == 0 {
		return nil, errors.New("ingress: at least one channel secret is required")
	}
	if h.maxBody <= 0 {
		return nil, fmt.Errorf("ingress: body limit must be positive, got %d", h.maxBody)
	}
	h.keys.Store(&keyring{verifier: signature.NewVerifier(h.secrets...), secrets: h.secrets})
	if h.refresh != nil && h.refresh.read == nil {
		return nil, errors.New("ingress: WithSecretRefresh needs a read function")
	}
	return h, nil
}

// Response is what the webhook answers: a status and a short JSON body that
// never echoes input.
type Response struct {
	Status int
	Body   []byte
}

var (
	bodyMethod    = []byte(`{"error":"method not allowed"}`)
	bodyTooLarge  = []byte(`{"error":"body too large"}`)
	bodySignature = []byte(`{"error":"invalid signature"}`)
	bodyBot       = []byte(`{"error":"unexpected destination"}`)
	bodyInvalid   = []byte(`{"error":"invalid body"}`)
	bodyEventSize = []byte(`{"error":"event too large"}`)
	bodyPublish   = []byte(`{"error":"events not handed off, retry"}`)
)

// Handle runs the webhook contract for one request and returns the response
// plus, for rejected requests, an error wrapping the sentinel that explains it:
//
//	405 not POST; 413 body over the limit; 401 signature missing or wrong
//	(nothing parsed, nothing published; with WithSecretRefresh a well-formed
//	signature that does not verify first re-reads the secrets, at most once
//	per cooldown); 400 signed but not a JSON object with
//	an "events" array of typed events, keys spelled exactly; 401 destination
//	is not this bot (when configured); 413 an event whose envelope would be
//	over the bus's entry limit or the queue's message limit (nothing
//	published: retrying cannot help); 500 the bus or the chat queue did not
//	take every event; 200 otherwise, also for LINE's verify request with no
//	events.
func (h *Handler) Handle(ctx context.Context, method, sig string, body []byte) (Response, error) {
	start := h.now()
	return h.handle(ctx, start, method, sig, body)
}

func (h *Handler) handle(ctx context.Context, start time.Time, method, sig string, body []byte) (Response, error) {
	if method != "POST" {
		h.metrics.Count(MetricRequestsRejected, 1)
		return Response{405, bodyMethod}, ErrMethod
	}
	if int64(len(body)) > h.maxBody {
		h.metrics.Count(MetricRequestsRejected, 1)
		return Response{413, bodyTooLarge}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(body))
	}
	if !h.verify(ctx, body, sig) {
		h.metrics.Count(MetricSignaturesRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", "invalid signature", "bytes", len(body))
		return Response{401, bodySignature}, ErrSignature
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	b, err := parseBodyInto(sc.events, body, h.maxEvents)
	if err != nil {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", err.Error())
		return Response{400, bodyInvalid}, err
	}
	if h.botUserID != "" && b.destination != h.botUserID {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", "destination is not this bot")
		return Response{401, bodyBot}, ErrBot
	}
	sc.events = b.events
	if len(b.events) == 0 {
		return Response{200, okBody(0)}, nil
	}
	if err := h.handOffs(ctx, b, start, sc); err != nil {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", err.Error())
		return Response{413, bodyEventSize}, err
	}
	entries := sc.entries
	if err := h.handOff(ctx, sc); err != nil {
		return Response{500, bodyPublish}, err
	}
	// One line per event at DEBUG (LOG_LEVEL=DEBUG): at INFO the worker's
	// "record processed" line and API Gateway's metrics already say it, and
	// CloudWatch Logs bills every line (docs/cost.md).
	if h.logEachEvent && h.log.Enabled(ctx, slog.LevelDebug) {
		for i, e := range entries {
			h.log.DebugContext(ctx, "event accepted", "webhookEventId", e.EventID, "type", e.DetailType, "queued", b.events[i].chat != "")
		}
	}
	return Response{200, okBody(len(entries))}, nil
}

// handOff gives sc's entries to the bus and its messages to the chat queue
// at once: the bus's calls start, the chat queue is sent to on this
// goroutine while they are on their way, and then the bus is waited for.
// It returns nil only when both took everything.
func (h *Handler) handOff(ctx context.Context, sc *scratch) error {
	bus := h.pub.Start(ctx, sc.entries)
	var qerr error
	if len(sc.msgs) > 0 {
		_, qerr = h.queue.Send(ctx, sc.msgs)
	}
	_, perr := bus.Wait()
	if err := errors.Join(perr, qerr); err != nil {
		return fmt.Errorf("%w: %w", ErrPublish, err)
	}
	return nil
}

// scratch is the memory one request's accept path writes into: the events
// read, the one buffer holding all its envelopes, and the bus entries and
// chat queue messages (views into the buffer). Requests take one from scratchPool and give it
// back when they answer, so a warm webhook writes into memory it already
// has (no allocation, no garbage to collect, caches warm) — which is why
// publisher and queuer must keep nothing once they return.
type scratch struct {
	events  []event
	buf     []byte
	entries []eventbus.Entry
	msgs    []chatqueue.Message
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Above these, a request's memory is left to the collector rather than
// kept for the next one: a rare huge body must not pin its memory.
const (
	maxPooledBuf    = 256 << 10
	maxPooledEvents = 256
)

// release drops what sc points to (bodies, strings) and puts
// it back in the pool.
func (sc *scratch) release() {
	clear(sc.events)
	clear(sc.entries)
	clear(sc.msgs)
	sc.events, sc.entries, sc.msgs, sc.buf = sc.events[:0], sc.entries[:0], sc.msgs[:0], sc.buf[:0]
	if cap(sc.buf) > maxPooledBuf {
		sc.buf = nil
	}
	if cap(sc.events) > maxPooledEvents {
		sc.events, sc.entries, sc.msgs = nil, nil, nil
	}
	scratchPool.Put(sc)
}

// okBodies are the usual 200 bodies, made once.
var okBodies = func() [][]byte {
	out := make([][]byte, 17)
	for n := range out {
		out[n] = appendOK(nil, n)
	}
	return out
}()

// okBody is {"accepted":n}; the caller must not modify it.
func okBody(n int) []byte {
	if n < len(okBodies) {
		return okBodies[n]
	}
	return appendOK(make([]byte, 0, 24), n)
}

func appendOK(b []byte, n int) []byte {
	b = append(b, `{"accepted":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

// handOffs builds into sc, for every event in body order, its bus entry
// and, for an event with a chat when a chat queue is configured, its queue
// message. An event whose entry would be over the bus's limit, or whose
// message over the queue's, fails the whole body with ErrTooLarge (413:
// LINE would redeliver a 500 forever).
//
// Every size is known before anything is written, so all the Details and
// message bodies go into one buffer; a chat event's Detail is written once,
// inside its message body, and the bus entry shares it.
func (h *Handler) handOffs(ctx context.Context, b body, receivedAt time.Time, sc *scratch) error {
	w := envelope.NewWriter(b.destination, receivedAt, envelope.Head{Source: h.source, Region: h.region})
	size, queued := 0, 0
	for i := range b.events {
		ev := &b.events[i]
		queue := ev.chat != "" && h.queue != nil
		if queue {
			ev.dedup = chatqueue.DedupID(ev.webhookEventID, ev.raw)
		}
		ev.item = envelope.NewItem(ev.dedup, ev.typ, ev.chat, ev.raw)
		detail := w.DetailLen(&ev.item)
		if n := len(h.source) + len(ev.typ) + detail; n > eventbus.MaxEntryBytes {
			return fmt.Errorf("%w: events[%d] would be a %d-byte bus entry (limit %d)", ErrTooLarge, i, n, eventbus.MaxEntryBytes)
		}
		if !queue {
			size += detail
			continue
		}
		n := w.EventLen(&ev.item)
		if n > chatqueue.MaxMessageBytes {
			return fmt.Errorf("%w: events[%d] would be a %d-byte queue message (limit %d)", ErrTooLarge, i, n, chatqueue.MaxMessageBytes)
		}
		size += n
		queued++
	}
	trace := h.traceHeader(ctx)
	buf := sc.buf[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	entries := sc.entries[:0]
	if cap(entries) < len(b.events) {
		entries = make([]eventbus.Entry, 0, len(b.events))
	}
	msgs := sc.msgs[:0]
	if cap(msgs) < queued {
		msgs = make([]chatqueue.Message, 0, queued)
	}
	sc.buf, sc.entries, sc.msgs = buf, entries, msgs // kept for the next request, whatever happens below
	for i := range b.events {
		ev := &b.events[i]
		start := len(buf)
		if ev.dedup == "" {
			buf = w.AppendDetail(buf, &ev.item)
			entries = append(entries, eventbus.Entry{DetailType: ev.typ, Detail: buf[start:len(buf):len(buf)], TraceHeader: trace, EventID: ev.webhookEventID})
			continue
		}
		var detail []byte
		buf, detail = w.AppendEvent(buf, &ev.item)
		entries = append(entries, eventbus.Entry{DetailType: ev.typ, Detail: detail, TraceHeader: trace, EventID: ev.webhookEventID})
		m := chatqueue.Message{Body: envelope.SafeForSQS(buf[start:len(buf):len(buf)]), Group: chatqueue.GroupID(ev.chat),
			DedupID: ev.dedup, TraceHeader: trace, EventID: ev.webhookEventID}
		if len(m.Body) > chatqueue.MaxMessageBytes { // escaped noncharacters made it longer
			sc.entries, sc.msgs = entries, msgs
			return fmt.Errorf("%w: events[%d] would be a %d-byte queue message (limit %d)", ErrTooLarge, i, len(m.Body), chatqueue.MaxMessageBytes)
		}
		msgs = append(msgs, m)
	}
	sc.entries, sc.msgs = entries, msgs
	return nil
}
