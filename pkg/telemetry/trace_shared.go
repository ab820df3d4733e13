package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// This file holds the tracing code both tracer builds share: the SDK-based one
// (trace.go, the default) and the lightweight one (trace_lite.go, built with
// -tags xraylite). Nothing here imports the X-Ray SDK.

// Annotation keys (*Span).Link writes; the collector reads the same names.
const (
	// AnnotationUpstreamTraceID holds the trace id of the trace that caused
	// this one (the webhook's trace, seen from the worker).
	AnnotationUpstreamTraceID = "upstreamTraceId"
	// AnnotationUpstreamParentID holds the id of the upstream (sub)segment
	// that handed the work off (the PutEvents subsegment).
	AnnotationUpstreamParentID = "upstreamParentId"
)

// lambdaTraceHeaderKey is the context key aws-lambda-go stores the invocation's
// trace header under (a plain string key, so it is matched by value; the SDK
// names it xray.LambdaTraceHeaderKey).
const lambdaTraceHeaderKey = "x-amzn-trace-id"

// lambdaTraceEnv is the environment variable the Lambda runtime sets to the
// current invocation's trace header.
const lambdaTraceEnv = "_X_AMZN_TRACE_ID"

// ConfigOption tunes Configure.
type ConfigOption func(*traceConfig)

type traceConfig struct {
	daemonAddr     string
	sampleAll      bool
	serviceVersion string
	sdkLog         *slog.Logger
}

// WithDaemonAddress makes segments go to the X-Ray daemon (or the local
// collector) at addr ("127.0.0.1:2000"). An explicit address wins over
// AWS_XRAY_DAEMON_ADDRESS; without this option the SDK's rule applies (the
// environment variable, else 127.0.0.1:2000).
func WithDaemonAddress(addr string) ConfigOption {
	return func(c *traceConfig) { c.daemonAddr = addr }
}

// WithSampleAll samples every segment started by StartSegment without a
// sampled parent. Use it for local runs: the default sampling keeps only
// 1 trace/s + 5%.
func WithSampleAll() ConfigOption {
	return func(c *traceConfig) { c.sampleAll = true }
}

// WithServiceVersion records v as the service version of every segment.
func WithServiceVersion(v string) ConfigOption {
	return func(c *traceConfig) { c.serviceVersion = v }
}

// WithSDKLogger routes the X-Ray SDK's own WARN and ERROR messages to l
// (default: JSON on stderr). The lightweight tracer (-tags xraylite) logs
// nothing and ignores it.
func WithSDKLogger(l *slog.Logger) ConfigOption {
	return func(c *traceConfig) { c.sdkLog = l }
}

// sdkDisabled reports whether AWS_XRAY_SDK_DISABLED turns tracing off (read
// on every call, as the SDK does).
func sdkDisabled() bool {
	return strings.EqualFold(os.Getenv("AWS_XRAY_SDK_DISABLED"), "true")
}

// lambdaHeader returns the invocation's trace header aws-lambda-go put in ctx.
func lambdaHeader(ctx context.Context) Header {
	s, _ := ctx.Value(lambdaTraceHeaderKey).(string)
	if s == "" {
		return Header{}
	}
	h, err := ParseTraceHeader(s)
	if err != nil {
		return Header{}
	}
	return h
}

// ambientTraceID is the trace id TraceID falls back to without a segment in
// ctx: the Lambda header in ctx, else the _X_AMZN_TRACE_ID variable.
func ambientTraceID(ctx context.Context) string {
	if h := lambdaHeader(ctx); h.Root != "" {
		return h.Root
	}
	if env := os.Getenv(lambdaTraceEnv); env != "" {
		if h, err := ParseTraceHeader(env); err == nil {
			return h.Root
		}
	}
	return ""
}

// Link records that this span's work was caused by the (sub)segment upstream
// names, in another trace: the webhook's PutEvents subsegment, seen from the
// worker. See the package doc for the representation.
func (s *Span) Link(upstream Header) {
	if upstream.Root == "" {
		return
	}
	s.Annotate(AnnotationUpstreamTraceID, upstream.Root)
	if upstream.Parent != "" {
		s.Annotate(AnnotationUpstreamParentID, upstream.Parent)
	}
}

// annotationKey maps key to the characters X-Ray keeps in annotation keys.
func annotationKey(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return r
		}
		return '_'
	}, key)
}

// annotationValue converts v to one of the types X-Ray accepts (string,
// bool, int, uint, float64).
func annotationValue(v any) any {
	switch x := v.(type) {
	case string, bool, int, uint, float64:
		return x
	case float32:
		return float64(x)
	case int8:
		return int(x)
	case int16:
		return int(x)
	case int32:
		return int(x)
	case int64:
		return int(x)
	case uint8:
		return uint(x)
	case uint16:
		return uint(x)
	case uint32:
		return uint(x)
	case uint64:
		return uint(x)
	case fmt.Stringer:
		return x.String()
	case error:
		return x.Error()
	default:
		return fmt.Sprint(x)
	}
}

// maxStackFrames bounds the frames recorded for a panic (the SDK's own cap).
const maxStackFrames = 32

// stackFrame is one frame of an exception's stack in a segment document.
type stackFrame struct {
	Path  string `json:"path,omitempty"`
	Line  int    `json:"line,omitempty"`
	Label string `json:"label,omitempty"`
}

// parseStack turns runtime/debug.Stack output into X-Ray stack frames:
// pairs of "pkg.Func(args)" and "\t/path/file.go:123 +0x1d" lines. Lines that
// do not fit the pattern are skipped; at most limit frames are returned.
func parseStack(stack []byte, limit int) []stackFrame {
	lines := strings.Split(string(stack), "\n")
	var out []stackFrame
	for i := 0; i+1 < len(lines) && len(out) < limit; i++ {
		fn := lines[i]
		loc := lines[i+1]
		if fn == "" || strings.HasPrefix(fn, "\t") || !strings.HasPrefix(loc, "\t") {
			continue
		}
		loc = strings.TrimPrefix(loc, "\t")
		if sp := strings.LastIndexByte(loc, ' '); sp > 0 {
			loc = loc[:sp]
		}
		colon := strings.LastIndexByte(loc, ':')
		if colon <= 0 {
			continue
		}
		line, err := strconv.Atoi(loc[colon+1:])
		if err != nil {
			continue
		}
		if p := strings.LastIndexByte(fn, '('); p > 0 {
			fn = fn[:p]
		}
		out = append(out, stackFrame{Path: loc[:colon], Line: line, Label: fn})
		i++
	}
	return out
}

// newExceptionID returns a random 16-hex-digit id (exception records, and the
// lightweight tracer's (sub)segment ids).
func newExceptionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
