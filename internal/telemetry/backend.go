package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Kind is what a span stands for, as OpenTelemetry's span kinds say it and
// X-Ray's segment types follow: the invocation a function serves, a call it
// makes, or work inside it.
type Kind int

// The kinds of span the seam starts.
const (
	// KindInternal is work inside an invocation (a record, a step).
	KindInternal Kind = iota
	// KindServer is one invocation of a function (StartInvocation).
	KindServer
	// KindClient is a call to another service (StartAWSCall, HTTPClient).
	KindClient
)

// AWSCall names one call to an AWS service, as the SDK instrumentation
// records it: the service ("EventBridge", "SQS", "DynamoDB"), the operation
// ("PutEvents") and the region.
type AWSCall struct {
	Service, Operation, Region string
}

// SpanOptions describe the span a Backend starts.
type SpanOptions struct {
	Kind Kind
	// AWS is set for a call to an AWS service (StartAWSCall).
	AWS *AWSCall
}

// Backend is one tracing implementation behind the seam: the X-Ray SDK
// (internal/telemetry/xraytrace, the default) or OpenTelemetry
// (internal/telemetry/otelxray, TRACING=otel). The cores never see it: they
// call Start, Link, Annotate and End, and the composition root (compose.Main,
// `linegate local`) picks the Backend with SetDefault or WithBackend.
// Implementations are safe for concurrent use.
type Backend interface {
	// Start begins a span named name under the span in ctx or, in Lambda,
	// under the invocation whose trace header ctx carries (InvokeHeader).
	// ok is false, and nothing is recorded, when ctx holds no trace to hang
	// the span on.
	Start(ctx context.Context, name string, o SpanOptions) (_ context.Context, _ BackendSpan, ok bool)
	// StartInvocation begins the span of one invocation of the function
	// name; parent is the invocation's trace header (InvokeHeader, zero
	// when there is none). A backend whose runtime records invocations
	// itself (Lambda's facade segment under the X-Ray SDK) returns ok false.
	StartInvocation(ctx context.Context, name string, parent Header) (_ context.Context, _ BackendSpan, ok bool)
	// Header is the trace header a call made now with ctx carries
	// downstream: the current span as Parent. Zero when ctx has no trace.
	Header(ctx context.Context) Header
	// RoundTripper returns base traced: a request whose context holds a
	// trace becomes a client span named after the host and carries the
	// X-Amzn-Trace-Id header; any other goes to base untouched.
	RoundTripper(base http.RoundTripper) http.RoundTripper
	// Flush sends every finished span still buffered; it returns when they
	// have left the process or ctx is done.
	Flush(ctx context.Context) error
	// Shutdown flushes and stops the backend's background work.
	Shutdown(ctx context.Context) error
}

// BackendSpan is one span as a Backend records it. The seam's Span calls End
// or Panic at most once; what is called after that may be ignored.
// Implementations are safe for concurrent use.
type BackendSpan interface {
	// SetAttribute records key=value; indexed attributes are the ones X-Ray
	// indexes for search (annotations), the others are metadata.
	SetAttribute(key string, value any, indexed bool)
	// AddLink records that this span's work was caused by upstream, a span
	// of another trace. A backend without native links (the X-Ray SDK)
	// ignores it: the seam also records the link as annotations.
	AddLink(upstream Header)
	// SetHTTPStatus records the HTTP status answered or received.
	SetHTTPStatus(code int)
	// End ends the span; a non-nil err marks it failed with err's message.
	End(err error)
	// Panic records a recovered panic and its stack, and ends the span.
	Panic(value any, stack []Frame)
	// TraceID is the span's trace id in X-Ray's format, "" when unsampled.
	TraceID() string
	// ID is the span's id (16 hex digits).
	ID() string
}

// backendBox lets an interface value live in an atomic.Pointer.
type backendBox struct{ b Backend }

// defaultBackend is the process-wide Backend (SetDefault); nil means noop.
var defaultBackend atomic.Pointer[backendBox]

type backendKey struct{}

// SetDefault makes b the Backend of every context that carries none
// (WithBackend): what a function's main does once, at start, with the
// backend TRACING names. nil restores the default, which records nothing.
func SetDefault(b Backend) {
	if b == nil {
		defaultBackend.Store(nil)
		return
	}
	defaultBackend.Store(&backendBox{b})
}

// WithBackend returns ctx carrying b: spans started with ctx (and contexts
// derived from it) go to b whatever the process default is. `linegate
// local` runs several functions, and tests run several runtimes, in one
// process this way. A nil b returns ctx unchanged.
func WithBackend(ctx context.Context, b Backend) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, backendKey{}, b)
}

// backendOf is the Backend of ctx: its own (WithBackend), else the process
// default, else noop.
func backendOf(ctx context.Context) Backend {
	if b, ok := ctx.Value(backendKey{}).(Backend); ok {
		return b
	}
	if box := defaultBackend.Load(); box != nil {
		return box.b
	}
	return noop{}
}

// noop is the Backend of a process that chose none: nothing is recorded.
type noop struct{}

func (noop) Start(ctx context.Context, _ string, _ SpanOptions) (context.Context, BackendSpan, bool) {
	return ctx, nil, false
}

func (noop) StartInvocation(ctx context.Context, _ string, _ Header) (context.Context, BackendSpan, bool) {
	return ctx, nil, false
}

func (noop) Header(context.Context) Header                         { return Header{} }
func (noop) RoundTripper(base http.RoundTripper) http.RoundTripper { return base }
func (noop) Flush(context.Context) error                           { return nil }
func (noop) Shutdown(context.Context) error                        { return nil }
