package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// Annotation keys (*Span).Link writes; the local collector reads the same
// names. Annotations are indexed by X-Ray, so the console filter
// `annotation.upstreamTraceId = "1-..."` finds every downstream trace of one
// webhook, whichever backend recorded it.
const (
	// AnnotationUpstreamTraceID holds the trace id of the trace that caused
	// this one (the webhook's trace, seen from the worker).
	AnnotationUpstreamTraceID = "upstreamTraceId"
	// AnnotationUpstreamParentID holds the id of the upstream span that
	// handed the work off (the PutEvents call).
	AnnotationUpstreamParentID = "upstreamParentId"
)

// flushTimeout bounds the flush that ends an invocation: spans go to a
// daemon on the same host, so a flush that takes longer has lost its
// daemon, and the invocation must not wait on it.
const flushTimeout = 2 * time.Second

// Span is one traced unit of work: an invocation, a record, a call. A nil
// *Span and a Span started without a trace in its context are no-ops, so
// callers never check. Methods are safe for concurrent use; End and Panic end
// the span once, later calls do nothing.
type Span struct {
	impl  BackendSpan
	flush Backend // an invocation's span flushes its backend when it ends
	ended atomic.Bool
}

// Start begins a span named name under the span in ctx (or, in Lambda, under
// the invocation's). The returned context carries it, so nested spans and
// instrumented clients hang below it. Without a trace in ctx it returns ctx
// unchanged and a no-op Span.
func Start(ctx context.Context, name string) (context.Context, *Span) {
	return start(ctx, name, SpanOptions{})
}

// StartAWSCall records a call to an AWS service the way the SDK
// instrumentation does: a client span named for the service, with the
// operation and region. Emulated services, such as the in-memory cloud of
// `linegate local`, use it so their calls show up in traces exactly like the
// real ones.
func StartAWSCall(ctx context.Context, service, operation, region string) (context.Context, *Span) {
	return start(ctx, service, SpanOptions{Kind: KindClient, AWS: &AWSCall{Service: service, Operation: operation, Region: region}})
}

func start(ctx context.Context, name string, o SpanOptions) (context.Context, *Span) {
	c, impl, ok := backendOf(ctx).Start(ctx, name, o)
	if !ok || impl == nil {
		return ctx, &Span{}
	}
	return c, &Span{impl: impl}
}

// StartInvocation begins the span of one invocation of the function name:
// its parent is the invocation's trace header (InvokeHeader) when ctx
// carries one. Under the X-Ray SDK in Lambda the runtime's facade segment is
// the invocation, so this returns ctx unchanged and a no-op Span; under
// OpenTelemetry, and in `linegate local`, it is a span of its own. Ending it
// flushes the backend (at most a couple of seconds): a Lambda sandbox may
// freeze as soon as the handler returns, so every span of the invocation
// leaves before that.
func StartInvocation(ctx context.Context, name string) (context.Context, *Span) {
	b := backendOf(ctx)
	parent, _ := InvokeHeader(ctx)
	c, impl, ok := b.StartInvocation(ctx, name, parent)
	if !ok || impl == nil {
		return ctx, &Span{flush: b}
	}
	return c, &Span{impl: impl, flush: b}
}

// Flush sends every finished span the backend of ctx still buffers (at most
// a couple of seconds). Ending an invocation's span already does it.
func Flush(ctx context.Context) error {
	return flush(ctx, backendOf(ctx))
}

func flush(ctx context.Context, b Backend) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	return b.Flush(ctx)
}

// Annotate adds an indexed, searchable attribute (an X-Ray annotation).
// Values that are not a string, bool or number are recorded as their text.
// Never pass secrets or message text.
func (s *Span) Annotate(key string, value any) {
	if s == nil || s.impl == nil || key == "" {
		return
	}
	s.impl.SetAttribute(key, value, true)
}

// Metadata adds non-indexed data (any JSON-encodable value). Never pass
// secrets or message text.
func (s *Span) Metadata(key string, value any) {
	if s == nil || s.impl == nil || key == "" {
		return
	}
	s.impl.SetAttribute(key, value, false)
}

// Link records that this span's work was caused by the span upstream names,
// in another trace: the webhook's PutEvents call, seen from the worker's
// record. The traces stay separate. The link is recorded twice: as the
// annotations AnnotationUpstreamTraceID and AnnotationUpstreamParentID
// (searchable in X-Ray under either backend) and, where the backend has them,
// as a native span link (OpenTelemetry).
func (s *Span) Link(upstream Header) {
	if s == nil || s.impl == nil || upstream.Root == "" {
		return
	}
	s.impl.AddLink(upstream)
	s.Annotate(AnnotationUpstreamTraceID, upstream.Root)
	if upstream.Parent != "" {
		s.Annotate(AnnotationUpstreamParentID, upstream.Parent)
	}
}

// SetHTTPStatus records the HTTP status this span answered or received and
// flags it the X-Ray way: 4xx is an error, 429 also a throttle, 5xx a fault.
func (s *Span) SetHTTPStatus(code int) {
	if s == nil || s.impl == nil {
		return
	}
	s.impl.SetHTTPStatus(code)
}

// End ends the span. A non-nil err marks it as a fault and records err's
// message as the exception (never put secrets in error messages). Ending an
// invocation's span flushes its backend.
func (s *Span) End(err error) {
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	if s.impl != nil {
		s.impl.End(err)
	}
	s.flushBackend()
}

// Panic records a recovered panic — its value and the frames of the stack
// from runtime/debug.Stack (functions and lines, never argument values) — as
// a fault with a "panic" exception, and ends the span.
func (s *Span) Panic(v any, stack []byte) {
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	if s.impl != nil {
		s.impl.Panic(v, StackFrames(stack, MaxStackFrames))
	}
	s.flushBackend()
}

func (s *Span) flushBackend() {
	if s.flush != nil {
		_ = flush(context.Background(), s.flush)
	}
}

// TraceID returns the trace id of the span, "" for a no-op span.
func (s *Span) TraceID() string {
	if s == nil || s.impl == nil {
		return ""
	}
	return s.impl.TraceID()
}

// ID returns the span's id, "" for a no-op span.
func (s *Span) ID() string {
	if s == nil || s.impl == nil {
		return ""
	}
	return s.impl.ID()
}

// TraceHeader returns the trace header a downstream call made now should
// carry ("Root=...;Parent=<current span id>;Sampled=1"): the TraceHeader
// field of PutEvents entries, the AWSTraceHeader of SQS messages. It is ""
// when ctx carries no trace.
func TraceHeader(ctx context.Context) string {
	return backendOf(ctx).Header(ctx).String()
}

// TraceID returns the current trace id for logs and crash reports: the
// trace of the span in ctx, else of the Lambda invocation ctx belongs to
// (InvokeHeader); "" when there is none.
func TraceID(ctx context.Context) string {
	if h := backendOf(ctx).Header(ctx); h.Root != "" {
		return h.Root
	}
	h, _ := InvokeHeader(ctx)
	return h.Root
}

// HTTPClient returns a copy of c (http.DefaultClient when nil) whose requests
// become client spans named after the host, carrying X-Amzn-Trace-Id, when
// their context holds a trace; the backend is the request context's.
// Requests without a trace go straight to the original transport: no
// header, no noise.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *c
	out.Transport = &traceTransport{base: base}
	return &out
}

// traceTransport hands each request to the tracing of its context's backend.
type traceTransport struct {
	base http.RoundTripper
}

// RoundTrip sends r through its context's backend.
func (t *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return backendOf(r.Context()).RoundTripper(t.base).RoundTrip(r)
}
