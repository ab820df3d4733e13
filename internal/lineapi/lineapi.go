// Package lineapi sends LINE messages the way an asynchronous worker must:
// reply while the reply token is fresh and push otherwise (or when LINE says
// the token is invalid), push with a deterministic X-Line-Retry-Key so a
// retried record never sends twice, and retry 5xx, 429 and transport failures
// with capped exponential backoff that never outlives the context deadline.
//
// It is built on github.com/line/line-bot-sdk-go/v8/linebot/messaging_api.
// A Client is meant for one invocation (one SQS record or one alarm): the SDK
// client is not goroutine-safe with WithContext, so every attempt builds its
// own SDK client bound to the attempt's context.
package lineapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/keepalive"
	"github.com/linegate/linegate/internal/telemetry"
)

// DefaultBaseURL is LINE's Messaging API endpoint.
const DefaultBaseURL = "https://api.line.me"

// Defaults of the options.
const (
	// DefaultMaxAttempts bounds the attempts of one call, the first included.
	DefaultMaxAttempts = 4
	// DefaultBackoffBase is the ceiling of the first retry's random wait.
	DefaultBackoffBase = 200 * time.Millisecond
	// DefaultBackoffMax caps the ceiling of any retry's random wait.
	DefaultBackoffMax = 2 * time.Second
	// DefaultRetryAfterCap is the longest Retry-After honoured; a longer one
	// ends the retries so the queue's redelivery takes over.
	DefaultRetryAfterCap = 10 * time.Second
	// DefaultReplyWindow is how old an event may be for its reply token to be
	// used: tokens live one minute, minus a 10 s margin for the call itself.
	DefaultReplyWindow = 50 * time.Second
	// DefaultHTTPTimeout bounds one HTTP attempt of the default HTTP client.
	DefaultHTTPTimeout = 10 * time.Second
	// MaxMessages is how many messages one reply or push may carry.
	MaxMessages = 5
)

// Metric names this package records through WithMetrics (docs/metrics.md
// lists every metric of every function). "Calls" are the client's methods
// (a reply, a push, a loading animation); "requests" are their HTTP attempts.
const (
	MetricReplies         = "LineRepliesSent"        // replies LINE accepted
	MetricPushes          = "LinePushesSent"         // pushes LINE accepted (first time)
	MetricReplyFallbacks  = "LineReplyFallbacks"     // sends with a reply token that pushed instead
	MetricRateLimited     = "LineRequestsThrottled"  // HTTP attempts answered 429, retried or not
	MetricErrors          = "LineCallsFailed"        // calls that returned an error to their caller
	MetricDuplicatePushes = "LinePushesDeduplicated" // pushes answered 409: already sent with that retry key
	MetricRetries         = "LineRequestsRetried"    // HTTP attempts repeated after a failure
	MetricLatency         = "LineRequestLatency"     // duration of each HTTP attempt
	// MetricRepliesAssumed counts replies taken as delivered without LINE's
	// word: an earlier attempt of the same reply is on record (Target.Ledger)
	// and LINE now refuses the token as used.
	MetricRepliesAssumed = "LineRepliesAssumedDelivered"
)

// Via says how a message was delivered.
type Via string

// The two delivery paths.
const (
	ViaReply Via = "reply" // answered with the event's reply token
	ViaPush  Via = "push"  // pushed to Target.To
)

// Target says where a Send goes: the event's reply token while it is fresh,
// else a push to To.
type Target struct {
	// ReplyToken is the event's reply token ("" if the event has none).
	ReplyToken string
	// EventTime is the LINE event's timestamp; the reply token is used only
	// while EventTime is within the reply window.
	EventTime time.Time
	// To is the user, group or room ID to push to.
	To string
	// WebhookEventID is the event's webhookEventId; with Index it derives the
	// push's retry key. Empty means pushes carry no retry key.
	WebhookEventID string
	// Index numbers the sends made for one event (0, 1, ...), so each gets its
	// own retry key.
	Index int
	// Channel is the event's channel ("" for the default one), which
	// scopes the retry key (ChannelRetryKey).
	Channel string
	// Ledger, when set, records the reply's attempt durably before it is
	// made, so that a retry of the event (after a crash, a timeout, or a
	// failure after the reply) never pushes an answer a reply may already
	// have delivered. nil: no record (a crash between a reply and the end of
	// its record may then answer twice).
	Ledger ReplyLedger
}

// ReplyLedger is the durable record of one event's reply attempt (the
// worker backs it with idempotency.Attempts in the idempotency table).
//
// Send calls Begin before it uses a fresh reply token, and Attempted before
// it would push in place of a reply token it no longer trusts (too old).
// When an earlier attempt is on record, the token may have been used by it:
// Send tries the reply once more (the earlier attempt may never have left),
// and takes LINE's "Invalid reply token" as delivered instead of pushing.
// When LINE refuses a first attempt with a clear answer (nothing delivered),
// Send clears the record before it pushes or returns, so the retry starts
// afresh.
type ReplyLedger interface {
	// Begin records the attempt; earlier reports that one was already on
	// record (and nothing new was recorded).
	Begin(ctx context.Context) (earlier bool, err error)
	// Attempted reports whether an attempt is on record, recording nothing.
	Attempted(ctx context.Context) (bool, error)
	// Clear forgets the attempt: LINE refused it, nothing was delivered.
	Clear(ctx context.Context) error
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL points the client at another Messaging API (linemock, a proxy).
func WithBaseURL(u string) Option { return func(c *Client) { c.baseURL = u } }

// WithHTTPClient sets the HTTP client (default: 10 s timeout per attempt,
// over a keep-alive pool the process's clients share). Pass the process's
// one client: a Client is made per record, its connections must not be.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.httpClient = hc } }

// WithClock sets the clock used for the reply window and deadline checks.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithSleep replaces the backoff wait (tests). It must return early with an
// error when ctx is done.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = f }
}

// WithMaxAttempts bounds the attempts of one call, the first included
// (default 4; values < 1 mean 1).
func WithMaxAttempts(n int) Option { return func(c *Client) { c.maxAttempts = max(1, n) } }

// WithBackoff sets the capped exponential backoff: the wait before retry n is
// uniformly random in [0, min(max, base·2^(n-1))] (full jitter). Default
// 200 ms, 2 s.
func WithBackoff(base, maxWait time.Duration) Option {
	return func(c *Client) { c.backoff.First, c.backoff.Max = base, maxWait }
}

// WithRetryAfterCap sets the longest Retry-After the client waits for; a
// longer one ends the retries at once (default 10 s).
func WithRetryAfterCap(d time.Duration) Option { return func(c *Client) { c.retryAfterCap = d } }

// WithLogger sets the logger (default slog.Default()). Tokens, reply tokens
// and message text are never logged.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithMetrics counts LineRepliesSent, LinePushesSent, LineReplyFallbacks,
// LineRequestsThrottled, LineCallsFailed, LinePushesDeduplicated and
// LineRequestsRetried, and records LineRequestLatency per HTTP attempt.
func WithMetrics(r telemetry.Recorder) Option { return func(c *Client) { c.metrics = r } }

// TokenSource supplies channel access tokens: the long-lived token read
// from SSM, or short-lived tokens minted from the channel's credentials
// (pkg/linetoken). One source is shared by every Client of a container, so
// a token is cached per container and refreshed before it expires.
type TokenSource interface {
	// Token returns a token valid now.
	Token(ctx context.Context) (string, error)
	// Refresh returns a new token after LINE refused stale with 401 (expired,
	// revoked or rotated mid-flight). The client calls it at most once per
	// call.
	Refresh(ctx context.Context, stale string) (string, error)
}

// WithTokenSource takes the token of every call from src instead of the
// fixed token given to New, and refreshes it once on a 401.
func WithTokenSource(src TokenSource) Option { return func(c *Client) { c.tokens.src = src } }

// tokens is the fixed token of New, or a TokenSource.
type tokens struct {
	fixed string
	src   TokenSource
}

func (t tokens) Token(ctx context.Context) (string, error) {
	if t.src == nil {
		return t.fixed, nil
	}
	return t.src.Token(ctx)
}

func (t tokens) CanRefresh() bool { return t.src != nil }

func (t tokens) Refresh(ctx context.Context, stale string) (string, error) {
	return t.src.Refresh(ctx, stale)
}

// Client calls the Messaging API with one channel access token. Make one per
// invocation; it holds no connection state of its own beyond the HTTP client.
type Client struct {
	tokens        tokens
	baseURL       string
	httpClient    *http.Client
	now           func() time.Time
	sleep         func(ctx context.Context, d time.Duration) error
	maxAttempts   int
	backoff       backoff.Policy
	retryAfterCap time.Duration
	replyWindow   time.Duration
	log           *slog.Logger
	metrics       telemetry.Recorder
}

// New returns a Client for the channel access token (WithTokenSource
// replaces it with a source of short-lived or re-readable tokens).
func New(token string, opts ...Option) *Client {
	c := &Client{
		tokens:        tokens{fixed: token},
		baseURL:       DefaultBaseURL,
		now:           time.Now,
		sleep:         backoff.Sleep,
		maxAttempts:   DefaultMaxAttempts,
		backoff:       backoff.Policy{First: DefaultBackoffBase, Max: DefaultBackoffMax, Jitter: backoff.Full},
		retryAfterCap: DefaultRetryAfterCap,
		replyWindow:   DefaultReplyWindow,
		log:           slog.Default(),
		metrics:       telemetry.Discard,
	}
	for _, o := range opts {
		o(c)
	}
	if c.httpClient == nil {
		c.httpClient = &http.Client{Timeout: DefaultHTTPTimeout, Transport: defaultTransport()}
	}
	// The SDK always sets X-Line-Retry-Key, empty when there is none; LINE
	// must not see an empty (invalid) key, so it is dropped on the way out.
	hc := *c.httpClient
	hc.Transport = dropEmptyRetryKey{next: transportOf(c.httpClient)}
	c.httpClient = &hc
	return c
}

// retryKeyNamespace is the fixed namespace of RetryKey's name-based UUIDs.
var retryKeyNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/linegate/linegate/internal/lineapi#retry-key"))

// RetryKey returns the X-Line-Retry-Key for the index-th push made for a
// webhook event: a name-based (SHA-1) UUID, so the same event and index give
// the same key on every retry and redelivery, and different ones differ.
// An event of a named channel is named by its scoped id
// (channel.Scope(channel, webhookEventID): ChannelRetryKey).
func RetryKey(webhookEventID string, index int) string {
	name := webhookEventID + "\x00" + strconv.Itoa(index)
	return uuid.NewSHA1(retryKeyNamespace, []byte(name)).String()
}

// ChannelRetryKey is RetryKey for an event of channel ch: the default
// channel's keys are RetryKey's, a named channel's are apart from every
// other channel's.
func ChannelRetryKey(ch, webhookEventID string, index int) string {
	return RetryKey(channel.Scope(ch, webhookEventID), index)
}

// Reply sends msgs (1 to 5) with a reply token. A token LINE rejects gives an
// error that matches ErrInvalidReplyToken.
func (c *Client) Reply(ctx context.Context, replyToken string, msgs ...messaging_api.MessageInterface) error {
	return c.finish(ctx, "reply", c.reply(ctx, replyToken, msgs))
}

// Push sends msgs (1 to 5) to a user, group or room. retryKey (a UUID, see
// RetryKey) makes retries safe: LINE answers 409 to a key it already
// accepted, which Push counts and reports as success. Without a retry key an
// attempt that fails with no clear answer (5xx, timeout) is not retried,
// since it may have been delivered.
func (c *Client) Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error {
	return c.finish(ctx, "push", c.push(ctx, to, retryKey, msgs))
}

// Send delivers msgs for an event: a reply when t has a reply token and
// t.EventTime is within the reply window, else (or when LINE rejects the
// token) a push to t.To with ChannelRetryKey(t.Channel, t.WebhookEventID,
// t.Index). It returns
// the path taken.
func (c *Client) Send(ctx context.Context, t Target, msgs ...messaging_api.MessageInterface) (Via, error) {
	via, err := c.send(ctx, t, msgs)
	return via, c.finish(ctx, "send", err)
}

// ShowLoading shows the loading animation in a one-on-one chat for about
// seconds, rounded up to LINE's allowed values (5 to 60, a multiple of 5).
func (c *Client) ShowLoading(ctx context.Context, chatID string, seconds int) error {
	if chatID == "" {
		return c.finish(ctx, "loading", fmt.Errorf("lineapi: loading: %w: empty chat ID", ErrInvalidRequest))
	}
	req := &messaging_api.ShowLoadingAnimationRequest{ChatId: chatID, LoadingSeconds: int32(LoadingSeconds(seconds))}
	_, err := c.do(ctx, "loading", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, _, err := api.ShowLoadingAnimationWithHttpInfo(req)
		return res, err
	})
	return c.finish(ctx, "loading", err)
}

// MarkAsRead marks the user's messages in a chat read, up to and including
// the message whose markAsReadToken (from its webhook event) is given
// (POST /v2/bot/chat/markAsRead). LINE's read tokens do not expire and
// marking again changes nothing, so the call is retried like any
// idempotent one. A token LINE does not accept is a 400: permanent.
func (c *Client) MarkAsRead(ctx context.Context, markAsReadToken string) error {
	if markAsReadToken == "" {
		return c.finish(ctx, "read", fmt.Errorf("lineapi: mark as read: %w: empty markAsReadToken", ErrInvalidRequest))
	}
	req := &messaging_api.MarkMessagesAsReadByTokenRequest{MarkAsReadToken: markAsReadToken}
	_, err := c.do(ctx, "read", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, _, err := api.MarkMessagesAsReadByTokenWithHttpInfo(req)
		return res, err
	})
	return c.finish(ctx, "read", err)
}

// finish counts and logs an error a public method is about to return.
func (c *Client) finish(ctx context.Context, op string, err error) error {
	if err != nil {
		c.metrics.Count(MetricErrors, 1)
		c.log.ErrorContext(ctx, "line api call failed", "op", op, "error", err.Error())
	}
	return err
}

func (c *Client) reply(ctx context.Context, replyToken string, msgs []messaging_api.MessageInterface) error {
	_, err := c.replyCall(ctx, replyToken, msgs)
	return err
}

// replyCall is reply, reporting what its attempts learnt: whether LINE may
// have acted on one of them.
func (c *Client) replyCall(ctx context.Context, replyToken string, msgs []messaging_api.MessageInterface) (callResult, error) {
	if replyToken == "" {
		return callResult{}, fmt.Errorf("lineapi: reply: %w: empty reply token", ErrInvalidRequest)
	}
	if err := checkMessages(msgs); err != nil {
		return callResult{}, fmt.Errorf("lineapi: reply: %w", err)
	}
	req := &messaging_api.ReplyMessageRequest{ReplyToken: replyToken, Messages: msgs}
	res, err := c.do(ctx, "reply", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, _, err := api.ReplyMessageWithHttpInfo(req)
		return res, err
	})
	if err != nil && res.ambiguous && errors.Is(err, ErrInvalidReplyToken) {
		// An earlier attempt failed without an answer (5xx, timeout) and now
		// the token, valid a moment ago, is used: that attempt used it. Pushing
		// now would deliver the messages twice.
		c.log.WarnContext(ctx, "line reply token consumed by an unanswered attempt; treating as delivered",
			"op", "reply", "requestId", res.requestID)
		err = nil
	}
	if err != nil {
		return res, err
	}
	c.metrics.Count(MetricReplies, 1)
	return res, nil
}

func (c *Client) push(ctx context.Context, to, retryKey string, msgs []messaging_api.MessageInterface) error {
	if to == "" {
		return fmt.Errorf("lineapi: push: %w: empty recipient", ErrInvalidRequest)
	}
	if retryKey != "" {
		if _, err := uuid.Parse(retryKey); err != nil {
			return fmt.Errorf("lineapi: push: %w: retry key is not a UUID: %w", ErrInvalidRequest, err)
		}
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("lineapi: push: %w", err)
	}
	req := &messaging_api.PushMessageRequest{To: to, Messages: msgs}
	_, err := c.do(ctx, "push", retryKey != "", func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, _, err := api.PushMessageWithHttpInfo(req, retryKey)
		return res, err
	})
	if apiErr, ok := errors.AsType[*APIError](err); ok && apiErr.Status == http.StatusConflict && retryKey != "" {
		c.metrics.Count(MetricDuplicatePushes, 1)
		c.log.InfoContext(ctx, "line push already accepted for retry key",
			"op", "push", "retryKey", retryKey, "requestId", apiErr.RequestID,
			"acceptedRequestId", apiErr.AcceptedRequestID)
		return nil
	}
	if err != nil {
		return err
	}
	c.metrics.Count(MetricPushes, 1)
	return nil
}

func (c *Client) send(ctx context.Context, t Target, msgs []messaging_api.MessageInterface) (Via, error) {
	var replyErr error
	if t.ReplyToken != "" {
		age := c.now().Sub(t.EventTime)
		fresh := !t.EventTime.IsZero() && age < c.replyWindow
		earlier, err := c.earlierAttempt(ctx, t.Ledger, fresh)
		if err != nil {
			return ViaReply, err
		}
		if fresh || earlier {
			via, done, err := c.replyFirst(ctx, t, earlier, msgs)
			if done {
				return via, err
			}
			replyErr = err
			c.log.InfoContext(ctx, "line reply token rejected; pushing instead", "op", "send",
				"webhookEventId", t.WebhookEventID)
		} else {
			c.log.DebugContext(ctx, "line reply token too old; pushing instead", "op", "send",
				"webhookEventId", t.WebhookEventID, "eventAge", age.String())
		}
		c.metrics.Count(MetricReplyFallbacks, 1)
	}
	if t.To == "" {
		err := fmt.Errorf("lineapi: send: %w: no recipient to push to", ErrInvalidRequest)
		return ViaPush, errors.Join(err, replyErr)
	}
	key := ""
	if t.WebhookEventID != "" {
		key = ChannelRetryKey(t.Channel, t.WebhookEventID, t.Index)
	}
	return ViaPush, c.push(ctx, t.To, key, msgs)
}

// earlierAttempt asks the ledger (nil: none) whether an earlier attempt of
// this reply is on record. A fresh token is about to be used, so its
// attempt is recorded in the same step (Begin); a token too old to use is
// only looked up (Attempted). A ledger that cannot answer fails the send:
// the record is retried, and nothing was sent.
func (c *Client) earlierAttempt(ctx context.Context, l ReplyLedger, fresh bool) (bool, error) {
	if l == nil {
		return false, nil
	}
	var earlier bool
	var err error
	if fresh {
		earlier, err = l.Begin(ctx)
	} else {
		earlier, err = l.Attempted(ctx)
	}
	if err != nil {
		return false, fmt.Errorf("lineapi: send: the record of the reply attempt: %w", err)
	}
	return earlier, nil
}

// replyFirst makes the reply of a Send. done reports that the send is over
// (delivered, or failed with err); otherwise LINE refused the token on a
// first attempt with a clear answer, nothing was delivered, err is that
// refusal and the caller pushes instead.
//
// With an earlier attempt on record (earlier), the token may have been used
// by it: a refusal of the token then counts as delivered — pushing would
// repeat an answer the chat may have — and the record stays. On a first
// attempt, a clear refusal of any kind (nothing delivered) clears the
// record, so the event's retry starts afresh; an answer LINE may have acted
// on (5xx, a timeout) keeps it.
func (c *Client) replyFirst(ctx context.Context, t Target, earlier bool, msgs []messaging_api.MessageInterface) (via Via, done bool, err error) {
	res, err := c.replyCall(ctx, t.ReplyToken, msgs)
	switch {
	case err == nil:
		return ViaReply, true, nil
	case earlier && errors.Is(err, ErrInvalidReplyToken):
		c.metrics.Count(MetricRepliesAssumed, 1)
		c.log.WarnContext(ctx, "line reply token already used and this reply was attempted before (a crash or a retry after it); treating it as delivered",
			"op", "send", "webhookEventId", t.WebhookEventID)
		return ViaReply, true, nil
	}
	if t.Ledger != nil && !earlier && !res.ambiguous && ctx.Err() == nil {
		if cerr := t.Ledger.Clear(ctx); cerr != nil {
			// The record stays: a retry will take a refused token as
			// delivered. Pushing now still delivers this time.
			c.log.WarnContext(ctx, "the record of a refused reply attempt was not cleared", "op", "send",
				"webhookEventId", t.WebhookEventID, "error", cerr.Error())
		}
	}
	if !errors.Is(err, ErrInvalidReplyToken) {
		return ViaReply, true, err
	}
	return ViaReply, false, err
}

// Loading-animation limits: LINE accepts 5 to 60 seconds in steps of 5.
const (
	minLoadingSeconds = 5
	maxLoadingSeconds = 60
)

// LoadingSeconds rounds seconds to a value LINE accepts for the loading
// animation: up to the next multiple of 5, within 5 and 60.
func LoadingSeconds(seconds int) int {
	switch {
	case seconds <= minLoadingSeconds:
		return minLoadingSeconds
	case seconds >= maxLoadingSeconds:
		return maxLoadingSeconds
	}
	return (seconds + 4) / 5 * 5
}

func checkMessages(msgs []messaging_api.MessageInterface) error {
	if len(msgs) < 1 || len(msgs) > MaxMessages {
		return fmt.Errorf("%w: %d messages, want 1 to %d", ErrInvalidRequest, len(msgs), MaxMessages)
	}
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("%w: message %d is nil", ErrInvalidRequest, i)
		}
	}
	return nil
}

type dropEmptyRetryKey struct{ next http.RoundTripper }

func (d dropEmptyRetryKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if vs, ok := r.Header[http.CanonicalHeaderKey(headerRetryKey)]; ok && (len(vs) == 0 || vs[0] == "") {
		r = r.Clone(r.Context())
		r.Header.Del(headerRetryKey)
	}
	return d.next.RoundTrip(r)
}

// defaultTransport is the keep-alive pool of clients made without
// WithHTTPClient, shared by all of them: one client is made per record.
var defaultTransport = sync.OnceValue(func() *http.Transport { return keepalive.Transport(keepalive.Conns) })

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}
