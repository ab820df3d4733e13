package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Redacted replaces the value of every denied log attribute.
const Redacted = "[REDACTED]"

// Log attribute keys NewLogger adds from the context.
const (
	// LogKeyTraceID carries TraceID(ctx).
	LogKeyTraceID = "traceId"
	// LogKeyEventID carries the webhookEventId set with WithEventID.
	LogKeyEventID = "webhookEventId"
	// LogKeyRequestID carries the Lambda request id when ctx is an invocation's.
	LogKeyRequestID = "requestId"
)

// deniedKeys are attribute keys whose values are never logged, compared after
// normalising (lower case, '-' and '_' removed).
var deniedKeys = []string{"text", "replytoken", "token", "secret", "authorization", "signature",
	"xlinesignature", "password", "cookie", "body"}

// deniedFragments redact any key containing them ("channelAccessToken",
// "previousSecret", "x-line-signature").
var deniedFragments = []string{"token", "secret", "signature", "authorization", "password"}

type eventIDKey struct{}

// WithEventID returns ctx carrying the webhookEventId of the LINE event being
// handled; loggers from NewLogger add it to every record logged with ctx.
func WithEventID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, eventIDKey{}, id)
}

// EventID returns the webhookEventId WithEventID stored in ctx, "" if none.
func EventID(ctx context.Context) string {
	id, _ := ctx.Value(eventIDKey{}).(string)
	return id
}

// HashUserID returns a short, stable, non-reversible stand-in for a LINE user
// (or group/room) id: "u:" + the first 12 hex digits of SHA-256 over a fixed
// prefix and the id. User ids are only ever logged this way. "" stays "".
func HashUserID(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("linegate/user-id:" + id))
	return "u:" + hex.EncodeToString(sum[:6])
}

// LogOption tunes NewLogger.
type LogOption func(*logConfig)

type logConfig struct {
	level  slog.Leveler
	denied []string
}

// WithLevel fixes the minimum level, overriding AWS_LAMBDA_LOG_LEVEL.
func WithLevel(l slog.Leveler) LogOption {
	return func(c *logConfig) { c.level = l }
}

// WithRedactKeys adds keys to the deny-list of redacted attributes.
func WithRedactKeys(keys ...string) LogOption {
	return func(c *logConfig) { c.denied = append(c.denied, keys...) }
}

// NewLogger returns a logger writing one JSON object per line to w, in the
// shape Lambda's JSON log format uses ("timestamp", "level", "message").
// The level comes from WithLevel, else AWS_LAMBDA_LOG_LEVEL (set by the
// function's LoggingConfig: TRACE, DEBUG, INFO, WARN, ERROR, FATAL), else
// LOG_LEVEL, else INFO. Records logged with a context carry traceId,
// webhookEventId and requestId when the context has them; denied attributes
// (text, replyToken, tokens, secrets, signatures, authorization...) are
// replaced with "[REDACTED]".
//
// NewLogger writes anywhere (tests, linegate local); Lambda functions use
// NewLambdaLogger, which goes through lambdacontext's own handler.
func NewLogger(w io.Writer, opts ...LogOption) *slog.Logger {
	c := logConfig{}
	for _, o := range opts {
		o(&c)
	}
	if c.level == nil {
		c.level = levelFromEnv()
	}
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       c.level,
		ReplaceAttr: lambdacontext.ReplaceAttr,
	})
	h = NewRedactingHandler(h, c.denied...)
	return slog.New(&contextHandler{next: h})
}

// levelFromEnv reads AWS_LAMBDA_LOG_LEVEL, then LOG_LEVEL.
func levelFromEnv() slog.Level {
	for _, k := range []string{"AWS_LAMBDA_LOG_LEVEL", "LOG_LEVEL"} {
		if l, ok := parseLevel(os.Getenv(k)); ok {
			return l
		}
	}
	return slog.LevelInfo
}

// parseLevel maps Lambda's level names (case-insensitive) to slog levels.
func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE":
		return slog.LevelDebug - 4, true
	case "DEBUG":
		return slog.LevelDebug, true
	case "INFO":
		return slog.LevelInfo, true
	case "WARN", "WARNING":
		return slog.LevelWarn, true
	case "ERROR":
		return slog.LevelError, true
	case "FATAL":
		return slog.LevelError + 4, true
	}
	return 0, false
}

// FoldingLogs reports whether NewLambdaLogger writes JSON lines in this
// process, so that a record's log line can carry its invocation's EMF
// metrics (Metrics.Fold, WithFolding): outside Lambda, and in Lambda with the
// JSON log format. With Lambda's TEXT format a line is not a JSON object and
// CloudWatch would extract nothing from it.
func FoldingLogs() bool {
	f := os.Getenv("AWS_LAMBDA_LOG_FORMAT")
	return f == "" || f == "JSON"
}

// NewLambdaLogger is NewLogger for code running in Lambda: records go through
// aws-lambda-go's lambdacontext log handler, so they follow the function's
// LoggingConfig (AWS_LAMBDA_LOG_FORMAT JSON or TEXT, AWS_LAMBDA_LOG_LEVEL) and
// carry the requestId, with linegate's traceId, webhookEventId and redaction
// added on top. Outside Lambda (no AWS_LAMBDA_LOG_FORMAT) it is NewLogger on
// stdout, so logs stay JSON.
func NewLambdaLogger(opts ...LogOption) *slog.Logger {
	if os.Getenv("AWS_LAMBDA_LOG_FORMAT") == "" {
		return NewLogger(os.Stdout, opts...)
	}
	c := logConfig{}
	for _, o := range opts {
		o(&c)
	}
	h := NewRedactingHandler(lambdacontext.NewLogHandler(), c.denied...)
	return slog.New(&contextHandler{next: h, noRequestID: true})
}

// contextHandler adds the trace id, webhookEventId and Lambda request id found
// in the record's context. Attributes are added to the record, so inside a
// WithGroup they land in that group.
type contextHandler struct {
	next slog.Handler
	// noRequestID: the wrapped handler (lambdacontext's) adds requestId itself.
	noRequestID bool
}

// Enabled defers to the wrapped handler.
func (h *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle adds the context's ids to r and passes it on. An id the record
// already carries (a caller logged webhookEventId itself) is not added
// again: every key appears once per line.
func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := TraceID(ctx); id != "" && !hasAttr(r, LogKeyTraceID) {
			r.AddAttrs(slog.String(LogKeyTraceID, id))
		}
		if id := EventID(ctx); id != "" && !hasAttr(r, LogKeyEventID) {
			r.AddAttrs(slog.String(LogKeyEventID, id))
		}
		if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" && !h.noRequestID {
			r.AddAttrs(slog.String(LogKeyRequestID, lc.AwsRequestID))
		}
	}
	return h.next.Handle(ctx, r)
}

// hasAttr reports whether r has a top-level attribute named key.
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithAttrs returns the wrapper around next.WithAttrs.
func (h *contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &contextHandler{next: h.next.WithAttrs(as), noRequestID: h.noRequestID}
}

// WithGroup returns the wrapper around next.WithGroup.
func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{next: h.next.WithGroup(name), noRequestID: h.noRequestID}
}

// NewRedactingHandler wraps next so that attributes whose key is denied —
// the built-in list (text, replyToken, token, secret, authorization,
// signature, password, cookie, body, and any key containing token, secret,
// signature, authorization or password) plus extra — reach next as
// "[REDACTED]". Keys compare case-insensitively, ignoring '-' and '_'.
// Groups are searched recursively and LogValuers resolved first; a denied
// group is redacted whole. The record's message itself is not inspected:
// never put user text or secrets in a message.
func NewRedactingHandler(next slog.Handler, extra ...string) slog.Handler {
	deny := make(map[string]bool, len(deniedKeys)+len(extra))
	for _, k := range append(append([]string(nil), deniedKeys...), extra...) {
		deny[normalizeKey(k)] = true
	}
	return &redactingHandler{next: next, deny: deny}
}

type redactingHandler struct {
	next slog.Handler
	deny map[string]bool
}

// Enabled defers to the wrapped handler.
func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle passes on a copy of r with denied attributes redacted.
func (h *redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.redact(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs redacts as and returns the wrapper around next.WithAttrs.
func (h *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.redact(a)
	}
	return &redactingHandler{next: h.next.WithAttrs(red), deny: h.deny}
}

// WithGroup returns the wrapper around next.WithGroup.
func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name), deny: h.deny}
}

func (h *redactingHandler) redact(a slog.Attr) slog.Attr {
	if doc, ok := a.Value.Any().(emfMembers); ok && a.Key == "" {
		return slog.Attr{Value: doc.LogValue()} // metric names and values, never a secret
	}
	if h.denied(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		return slog.Attr{Key: a.Key, Value: v}
	}
	group := v.Group()
	red := make([]slog.Attr, len(group))
	for i, g := range group {
		red[i] = h.redact(g)
	}
	return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
}

func (h *redactingHandler) denied(key string) bool {
	k := normalizeKey(key)
	if k == "" {
		return false
	}
	if h.deny[k] {
		return true
	}
	for _, f := range deniedFragments {
		if strings.Contains(k, f) {
			return true
		}
	}
	return false
}

// normalizeKey lower-cases key and drops '-' and '_'.
func normalizeKey(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToLower(key))
}
