package otelxray

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/linegate/linegate/internal/telemetry"
)

// HeaderName is the HTTP header AWS services read and write a trace in.
const HeaderName = "X-Amzn-Trace-Id"

// Propagator carries OpenTelemetry span contexts in X-Ray's trace header,
// X-Amzn-Trace-Id: "Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=<0|1>"
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-concepts.html#xray-concepts-tracingheader),
// the format every AWS service understands (propagation.TextMapPropagator).
// The trace id's 16 bytes are Root's two hex groups, the span id is Parent,
// and the sampled flag is Sampled. Trace state is not carried.
type Propagator struct{}

var _ propagation.TextMapPropagator = Propagator{}

// Inject writes the header of the span context in ctx into carrier; an
// invalid span context writes nothing.
func (Propagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	carrier.Set(HeaderName, HeaderOf(sc).String())
}

// Extract returns ctx carrying the remote span context carrier's header
// names; ctx unchanged when the header is missing or invalid.
func (Propagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	h, err := telemetry.ParseTraceHeader(carrier.Get(HeaderName))
	if err != nil {
		return ctx
	}
	sc, ok := SpanContextOf(h)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Fields names the header Inject writes.
func (Propagator) Fields() []string { return []string{HeaderName} }

// HeaderOf is sc as an X-Ray header: Root from the trace id, Parent the span
// id, Sampled the sampled flag. An invalid sc is the zero Header.
func HeaderOf(sc trace.SpanContext) telemetry.Header {
	if !sc.IsValid() {
		return telemetry.Header{}
	}
	return telemetry.Header{Root: telemetry.FormatTraceID(sc.TraceID()), Parent: sc.SpanID().String(), Sampled: sc.IsSampled()}
}

// SpanContextOf is h as a remote span context; ok is false when h has no
// valid Root or no Parent (OpenTelemetry needs both ids).
func SpanContextOf(h telemetry.Header) (trace.SpanContext, bool) {
	tid, err := telemetry.ParseTraceID(h.Root)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(h.Parent)
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	if h.Sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}

// InvokeParent is the span context of the Lambda invocation ctx belongs to:
// its trace header as aws-lambda-go put it in the invoke's context
// (telemetry.InvokeHeader; never _X_AMZN_TRACE_ID, which concurrent invokes
// share). Lambda's own segment for the invocation is its Parent, so the
// function's span hangs under it in X-Ray. ok is false outside Lambda.
func InvokeParent(ctx context.Context) (trace.SpanContext, bool) {
	h, ok := telemetry.InvokeHeader(ctx)
	if !ok {
		return trace.SpanContext{}, false
	}
	return SpanContextOf(h)
}

// LinkOf is the span link to upstream, a span of another trace (the
// webhook's PutEvents call, named by an SQS record's AWSTraceHeader: see
// SQSLink). ok is false when upstream names no span.
func LinkOf(upstream telemetry.Header) (trace.Link, bool) {
	sc, ok := SpanContextOf(upstream)
	if !ok {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// SQSLink is the span link of one SQS record: to the span its AWSTraceHeader
// system attribute names (attrs is an events.SQSMessage's Attributes). Under
// OpenTelemetry the consumer makes these links itself, one per message
// (https://opentelemetry.io/docs/specs/semconv/faas/aws-lambda/). ok is
// false when the record carries no usable header.
func SQSLink(attrs map[string]string) (trace.Link, bool) {
	h, err := telemetry.ParseTraceHeader(telemetry.SQSTraceHeader(attrs))
	if err != nil {
		return trace.Link{}, false
	}
	return LinkOf(h)
}
