// Package ingress is the webhook core: it verifies LINE's signature on the raw
// body, splits the body into events, hands every event to the bus and every
// event that has a chat to the chat queue (in body order, at the same time),
// and answers in milliseconds. It knows nothing of Lambda: adapters for API
// Gateway proxy events and net/http sit on top of Handle.
//
// One Handler serves every channel (official account) of the stack: the
// default one at /webhook, each named one at /webhook/NAME (WithChannel).
// The path picks the channel, whose own secrets and bot user ID check the
// body; the channel's name then travels with every event.
package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/internal/channel"
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
	// ErrChannel: the path names a channel the webhook does not serve (404).
	ErrChannel = errors.New("unknown channel")
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
// (eventbus.Publisher runs its PutEvents calls on goroutines anyway).
type publisher interface {
	Start(ctx context.Context, entries []eventbus.Entry) *eventbus.Publication
}

// queuer is the one call ingress makes on the chat queue.
type queuer interface {
	Send(ctx context.Context, msgs []chatqueue.Message) (chatqueue.Result, error)
}

// Handler is the webhook core. It is safe for concurrent use.
type Handler struct {
	pub          publisher
	queue        queuer
	source       string
	region       string
	secrets      [][]byte   // the default channel's, from WithSecrets
	refresh      *refresher // the default channel's re-read (WithSecretRefresh); nil: never
	botUserID    string     // the default channel's (WithBotUserID)
	def          *webhookChannel
	named        map[string]*webhookChannel // by name (WithChannel)
	namedOpts    []Channel
	maxBody      int64
	maxEvents    int
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

// Channel is a named channel's webhook (WithChannel): what its bodies are
// checked against.
type Channel struct {
	// Name is the channel's name (channel.Valid), the last element of its
	// webhook's path: /webhook/NAME.
	Name string
	// Secrets are the channel secrets its bodies may be signed with: the
	// current one first, then the previous one during a rotation; empty
	// ones are ignored, at least one is required.
	Secrets []string
	// BotUserID, when set, refuses (401) a body whose destination is not
	// this channel's bot.
	BotUserID string
	// Reread, when set, re-reads Secrets after a well-formed signature
	// that does not verify, at most once per Cooldown
	// (DefaultRefreshCooldown when not positive), as WithSecretRefresh
	// does for the default channel.
	Reread   func(ctx context.Context) ([]string, error)
	Cooldown time.Duration
}

// WithChannel serves a named channel beside the default one: its bodies
// (HandleChannel with its name; /webhook/NAME through the adapters) are
// checked against its own secrets and bot user ID only, so a body signed
// for one channel is refused on another's path; its events travel with
// its name (envelope.Detail.Channel) and its chats are its own message
// groups (chatqueue.ChannelGroupID).
func WithChannel(c Channel) Option { return func(h *Handler) { h.namedOpts = append(h.namedOpts, c) } }

// webhookChannel is what one channel's requests are checked against.
type webhookChannel struct {
	name      string                  // "" for the default channel
	keys      atomic.Pointer[keyring] // what signatures are checked against; swapped by a re-read
	refresh   *refresher              // nil: the secrets are never re-read
	botUserID string
}

// logAttrs name a named channel in log lines (nothing for the default).
func (c *webhookChannel) logAttrs() []any {
	if c.name == channel.Default {
		return nil
	}
	return []any{"channel", c.name}
}

func newWebhookChannel(name string, secrets [][]byte, refresh *refresher, botUserID string) *webhookChannel {
	c := &webhookChannel{name: name, refresh: refresh, botUserID: botUserID}
	c.keys.Store(&keyring{verifier: signature.NewVerifier(secrets...), secrets: secrets})
	return c
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

// WithBotUserID rejects (401) bodies for the default channel whose
// destination is not this bot's user ID, for deployments where the webhook
// URL might leak along with a secret of another channel. Empty disables the
// check. (A named channel's is Channel.BotUserID.)
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
	if h.refresh != nil && h.refresh.read == nil {
		return nil, errors.New("ingress: WithSecretRefresh needs a read function")
	}
	h.def = newWebhookChannel(channel.Default, h.secrets, h.refresh, h.botUserID)
	for _, c := range h.namedOpts {
		if err := channel.Valid(c.Name); err != nil {
			return nil, fmt.Errorf("ingress: %w", err)
		}
		if _, dup := h.named[c.Name]; dup {
			return nil, fmt.Errorf("ingress: channel %q given twice", c.Name)
		}
		secrets := nonEmpty(c.Secrets)
		if len(secrets) == 0 {
			return nil, fmt.Errorf("ingress: channel %q has no secret", c.Name)
		}
		var r *refresher
		if c.Reread != nil {
			r = &refresher{read: c.Reread, cooldown: cmp.Or(max(c.Cooldown, 0), DefaultRefreshCooldown)}
		}
		if h.named == nil {
			h.named = map[string]*webhookChannel{}
		}
		h.named[c.Name] = newWebhookChannel(c.Name, secrets, r, c.BotUserID)
	}
	h.namedOpts = nil
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
	bodyChannel   = []byte(`{"error":"unknown channel"}`)
	bodyInvalid   = []byte(`{"error":"invalid body"}`)
	bodyEventSize = []byte(`{"error":"event too large"}`)
	bodyPublish   = []byte(`{"error":"events not handed off, retry"}`)
)

// Handle runs the webhook contract for one request and returns the response
// plus, for rejected requests, an error wrapping the sentinel that explains it:
//
//	404 the channel is not one the webhook serves (HandleChannel);
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
	return h.HandleChannel(ctx, channel.Default, method, sig, body)
}

// HandleChannel is Handle for the channel named ch (channel.Default: the
// default channel, as Handle): the body is checked against that channel's
// secrets and bot user ID only, and its events carry the channel's name.
// A channel the webhook does not serve (WithChannel) is answered 404 and
// nothing is read.
func (h *Handler) HandleChannel(ctx context.Context, ch, method, sig string, body []byte) (Response, error) {
	start := h.now()
	return h.handle(ctx, start, ch, method, sig, body)
}

// channel is the webhook of the channel named ch; nil when none.
func (h *Handler) channel(ch string) *webhookChannel {
	if ch == channel.Default {
		return h.def
	}
	return h.named[ch]
}

func (h *Handler) handle(ctx context.Context, start time.Time, ch, method, sig string, body []byte) (Response, error) {
	c := h.channel(ch)
	if c == nil {
		h.metrics.Count(MetricRequestsRejected, 1)
		name := "(not a channel name)"
		if channel.Valid(ch) == nil {
			name = ch
		}
		h.log.WarnContext(ctx, "webhook rejected", "reason", "unknown channel", "channel", name)
		return Response{404, bodyChannel}, fmt.Errorf("%w: %s", ErrChannel, name)
	}
	if method != "POST" {
		h.metrics.Count(MetricRequestsRejected, 1)
		return Response{405, bodyMethod}, ErrMethod
	}
	if int64(len(body)) > h.maxBody {
		h.metrics.Count(MetricRequestsRejected, 1)
		return Response{413, bodyTooLarge}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(body))
	}
	if !h.verify(ctx, c, body, sig) {
		h.metrics.Count(MetricSignaturesRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", append(c.logAttrs(), "reason", "invalid signature", "bytes", len(body))...)
		return Response{401, bodySignature}, ErrSignature
	}
	b, err := parseBody(body, h.maxEvents)
	if err != nil {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", err.Error())
		return Response{400, bodyInvalid}, err
	}
	if c.botUserID != "" && b.destination != c.botUserID {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", append(c.logAttrs(), "reason", "destination is not this bot")...)
		return Response{401, bodyBot}, ErrBot
	}
	if len(b.events) == 0 {
		return Response{200, okBody(0)}, nil
	}
	entries, msgs, err := h.handOffs(ctx, c.name, b, start)
	if err != nil {
		h.metrics.Count(MetricRequestsRejected, 1)
		h.log.WarnContext(ctx, "webhook rejected", "reason", err.Error())
		return Response{413, bodyEventSize}, err
	}
	if err := h.handOff(ctx, entries, msgs); err != nil {
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

// handOff gives the entries to the bus and the messages to the chat queue
// at once: the bus's calls start, the chat queue is sent to on this
// goroutine while they are on their way, and then the bus is waited for.
// It returns nil only when both took everything.
func (h *Handler) handOff(ctx context.Context, entries []eventbus.Entry, msgs []chatqueue.Message) error {
	bus := h.pub.Start(ctx, entries)
	var qerr error
	if len(msgs) > 0 {
		_, qerr = h.queue.Send(ctx, msgs)
	}
	_, perr := bus.Wait()
	if err := errors.Join(perr, qerr); err != nil {
		return fmt.Errorf("%w: %w", ErrPublish, err)
	}
	return nil
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

// handOffs builds, for every event in body order, its bus entry and, for
// an event with a chat when a chat queue is configured, its queue message
// (the EventBridge event a rule would have put on a queue, around the same
// Detail). An event whose entry would be over the bus's limit, or whose
// message over the queue's, fails the whole body with ErrTooLarge (413:
// LINE would redeliver a 500 forever); nothing is handed off then. All of
// a body's envelopes are written into one buffer, located by their offsets
// until it is written.
func (h *Handler) handOffs(ctx context.Context, ch string, b body, receivedAt time.Time) ([]eventbus.Entry, []chatqueue.Message, error) {
	size := 0
	for _, ev := range b.events {
		size += 2*(len(ev.raw)+len(b.destination)+len(ch)+len(ev.chat)) + envelopeRoom
	}
	buf := make([]byte, 0, size)
	type span struct{ detail, msg, end int } // msg == end: no message
	spans := make([]span, len(b.events))
	var dedups []string
	for i, ev := range b.events {
		sp := &spans[i]
		sp.detail = len(buf)
		buf = envelope.AppendDetail(buf, b.destination, ch, ev.chat, receivedAt, ev.raw)
		sp.msg = len(buf)
		if n := len(h.source) + len(ev.typ) + sp.msg - sp.detail; n > eventbus.MaxEntryBytes {
			return nil, nil, fmt.Errorf("%w: events[%d] would be a %d-byte bus entry (limit %d)", ErrTooLarge, i, n, eventbus.MaxEntryBytes)
		}
		if ev.chat != "" && h.queue != nil {
			dedup := chatqueue.ChannelDedupID(ch, ev.webhookEventID, ev.raw)
			dedups = append(dedups, dedup)
			head := envelope.Head{ID: dedup, DetailType: ev.typ, Source: h.source, Region: h.region, Time: receivedAt}
			buf = envelope.AppendEvent(buf, head, buf[sp.detail:sp.msg])
		}
		sp.end = len(buf)
	}
	trace := h.traceHeader(ctx)
	entries := make([]eventbus.Entry, len(b.events))
	msgs := make([]chatqueue.Message, 0, len(dedups))
	for i, ev := range b.events {
		sp := spans[i]
		entries[i] = eventbus.Entry{DetailType: ev.typ, Detail: buf[sp.detail:sp.msg:sp.msg], TraceHeader: trace, EventID: ev.webhookEventID}
		if sp.msg == sp.end {
			continue
		}
		m := chatqueue.Message{Body: envelope.SafeForSQS(buf[sp.msg:sp.end:sp.end]), Group: chatqueue.ChannelGroupID(ch, ev.chat),
			DedupID: dedups[len(msgs)], TraceHeader: trace, EventID: ev.webhookEventID}
		if len(m.Body) > chatqueue.MaxMessageBytes {
			return nil, nil, fmt.Errorf("%w: events[%d] would be a %d-byte queue message (limit %d)", ErrTooLarge, i, len(m.Body), chatqueue.MaxMessageBytes)
		}
		msgs = append(msgs, m)
	}
	return entries, msgs, nil
}

// envelopeRoom is what an event's Detail and queue message hold besides
// its raw bytes and its strings: their keys, the times, the source and the
// region (a guess of the buffer's size: more is appended when it is short).
const envelopeRoom = 512
