// Package otelxray is the tracing seam's OpenTelemetry backend (TRACING=otel):
// the OpenTelemetry Go SDK, made to speak X-Ray with the small AWS pieces
// written here against their documented formats instead of the contrib
// modules (propagators/aws, otelaws, the Lambda detector), which lost their
// maintainer and are deprecated:
//
//   - IDGenerator: X-Ray trace ids (8 hex digits of epoch seconds + 24
//     random), which X-Ray requires;
//   - Propagator: the X-Amzn-Trace-Id header every AWS service reads;
//   - InvokeParent: each invocation's parent, Lambda's own segment, from the
//     trace header in the invoke's context (never _X_AMZN_TRACE_ID, which
//     aws-lambda-go no longer sets per invoke when invokes run concurrently);
//   - SQSLink / LinkOf: a record's span linked to the producer named by its
//     AWSTraceHeader, which under OpenTelemetry nobody else does;
//   - UDPExporter: OTLP over UDP to the X-Ray daemon Lambda runs in every
//     sandbox (AWS_XRAY_DAEMON_ADDRESS), the collector-free path the AWS
//     Distro for OpenTelemetry takes; no Go exporter for it is published.
//
// Spans are batched and leave when each invocation ends
// (telemetry.StartInvocation's span flushes), before the sandbox can freeze.
// Annotations (the seam's indexed attributes) are listed in the
// "aws.xray.annotations" attribute, which X-Ray's OTLP conversion indexes.
package otelxray

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/linegate/linegate/internal/telemetry"
)

// ScopeName is the instrumentation scope of every span the seam starts.
const ScopeName = "github.com/linegate/linegate/internal/telemetry"

// AnnotationsKey is the span attribute listing which attributes are X-Ray
// annotations (indexed for search); the others become metadata. X-Ray's
// OpenTelemetry conversion reads it (the collector exporter's
// aws.xray.annotations, awsxrayexporter).
const AnnotationsKey = "aws.xray.annotations"

// Attribute keys of the semantic conventions the seam's spans carry.
const (
	attrHTTPStatus   = "http.response.status_code"
	attrHTTPMethod   = "http.request.method"
	attrURL          = "url.full"
	attrServer       = "server.address"
	attrRPCSystem    = "rpc.system"
	attrRPCService   = "rpc.service"
	attrRPCMethod    = "rpc.method"
	attrRegion       = "cloud.region"
	attrInvocationID = "faas.invocation_id"
	attrExcType      = "exception.type"
	attrExcMessage   = "exception.message"
	attrExcStack     = "exception.stacktrace"
	rpcSystemAWS     = "aws-api"
)

// Option tunes New.
type Option func(*options)

type options struct {
	daemon    string
	sampleAll bool
	ratio     float64
	service   string
	region    string
	version   string
	log       *slog.Logger
	exporter  sdktrace.SpanExporter
	ids       sdktrace.IDGenerator
}

// WithDaemonAddress sends datagrams to addr (AWS_XRAY_DAEMON_ADDRESS's value
// in Lambda; the local collector's address in `linegate local`). Default:
// DefaultDaemonAddress.
func WithDaemonAddress(addr string) Option { return func(o *options) { o.daemon = addr } }

// WithSampleAll samples every trace that starts here; the default keeps
// DefaultSampleRatio of them. A parent's decision (Lambda's Sampled) always
// wins.
func WithSampleAll() Option { return func(o *options) { o.sampleAll = true } }

// DefaultSampleRatio is the share of new traces (ones without a parent's
// decision) that are sampled: X-Ray's default rule keeps 5% beyond its first
// request each second.
const DefaultSampleRatio = 0.05

// WithService names the service the spans belong to (the function: X-Ray
// shows it as the node's name), its region and version (resource attributes
// service.name, cloud.region, service.version / faas.version).
func WithService(name, region, version string) Option {
	return func(o *options) { o.service, o.region, o.version = name, region, version }
}

// WithLogger sets where the exporter reports what it could not send
// (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithExporter replaces the UDP exporter (tests).
func WithExporter(e sdktrace.SpanExporter) Option { return func(o *options) { o.exporter = e } }

// WithIDGenerator replaces the X-Ray id generator (tests).
func WithIDGenerator(g sdktrace.IDGenerator) Option { return func(o *options) { o.ids = g } }

// Backend is OpenTelemetry behind the seam (telemetry.Backend): a tracer
// provider of its own (never the global one), with X-Ray ids, a sampler that
// follows the parent, and a batch processor flushed per invocation. Safe for
// concurrent use.
type Backend struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns the OpenTelemetry backend. It changes no process-wide state:
// the global tracer provider and propagator stay as they were.
func New(opts ...Option) (*Backend, error) {
	o := options{ratio: DefaultSampleRatio}
	for _, opt := range opts {
		opt(&o)
	}
	exp := o.exporter
	if exp == nil {
		udp, err := NewUDPExporter(o.daemon, o.log)
		if err != nil {
			return nil, err
		}
		exp = udp
	}
	root := sdktrace.TraceIDRatioBased(o.ratio)
	if o.sampleAll {
		root = sdktrace.AlwaysSample()
	}
	ids := o.ids
	if ids == nil {
		ids = NewIDGenerator(nil, nil)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithIDGenerator(ids),
		sdktrace.WithSampler(sdktrace.ParentBased(root)),
		sdktrace.WithResource(newResource(o)),
		sdktrace.WithBatcher(exp),
	)
	return &Backend{tp: tp, tracer: tp.Tracer(ScopeName)}, nil
}

// newResource describes the process: the service (X-Ray's node name) and,
// in Lambda, the cloud it runs in (the attributes the deprecated Lambda
// detector set).
func newResource(o options) *resource.Resource {
	attrs := []attribute.KeyValue{
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("cloud.provider", "aws"),
	}
	if o.service != "" {
		attrs = append(attrs, attribute.String("service.name", o.service), attribute.String("faas.name", o.service),
			attribute.String("cloud.platform", "aws_lambda"))
	}
	if o.region != "" {
		attrs = append(attrs, attribute.String(attrRegion, o.region))
	}
	if o.version != "" {
		attrs = append(attrs, attribute.String("service.version", o.version), attribute.String("faas.version", o.version))
	}
	return resource.NewSchemaless(attrs...)
}

// Start begins a span under the span in ctx, or under the Lambda invocation
// whose header ctx carries (telemetry.Backend).
func (b *Backend) Start(ctx context.Context, name string, o telemetry.SpanOptions) (context.Context, telemetry.BackendSpan, bool) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		sc, ok := InvokeParent(ctx)
		if !ok {
			return ctx, nil, false
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(spanKindOf(o.Kind))}
	if o.AWS != nil {
		opts = append(opts, trace.WithAttributes(attribute.String(attrRPCSystem, rpcSystemAWS),
			attribute.String(attrRPCService, o.AWS.Service), attribute.String(attrRPCMethod, o.AWS.Operation),
			attribute.String(attrRegion, o.AWS.Region)))
	}
	c, s := b.tracer.Start(ctx, name, opts...)
	return c, &span{s: s}, true
}

// StartInvocation begins a server span for one invocation: a child of
// Lambda's segment when parent (the invoke's header) names it, else the root
// of a new trace (telemetry.Backend).
func (b *Backend) StartInvocation(ctx context.Context, name string, parent telemetry.Header) (context.Context, telemetry.BackendSpan, bool) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if sc, ok := SpanContextOf(parent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		opts = append(opts, trace.WithAttributes(attribute.String(attrInvocationID, lc.AwsRequestID)))
	}
	c, s := b.tracer.Start(ctx, name, opts...)
	return c, &span{s: s}, true
}

// Header is the trace header under the span in ctx, else the Lambda
// invocation's (telemetry.Backend).
func (b *Backend) Header(ctx context.Context) telemetry.Header {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return HeaderOf(sc)
	}
	h, _ := telemetry.InvokeHeader(ctx)
	return h
}

// Flush exports every finished span still in the batch (telemetry.Backend).
func (b *Backend) Flush(ctx context.Context) error {
	if err := b.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("otelxray: flush: %w", err)
	}
	return nil
}

// Shutdown flushes and stops the batch processor and closes the exporter
// (telemetry.Backend).
func (b *Backend) Shutdown(ctx context.Context) error {
	if err := b.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("otelxray: shutdown: %w", err)
	}
	return nil
}

func spanKindOf(k telemetry.Kind) trace.SpanKind {
	switch k {
	case telemetry.KindServer:
		return trace.SpanKindServer
	case telemetry.KindClient:
		return trace.SpanKindClient
	}
	return trace.SpanKindInternal
}

// span is one OpenTelemetry span (telemetry.BackendSpan).
type span struct {
	s trace.Span

	mu          sync.Mutex
	annotations []string
}

// SetAttribute records key=value; an indexed key joins AnnotationsKey.
func (s *span) SetAttribute(key string, value any, indexed bool) {
	s.s.SetAttributes(attributeOf(key, value, indexed))
	if !indexed {
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.annotations, key) {
		s.annotations = append(s.annotations, key)
	}
	s.mu.Unlock()
}

// AddLink links the span to upstream's span.
func (s *span) AddLink(upstream telemetry.Header) {
	if l, ok := LinkOf(upstream); ok {
		s.s.AddLink(l)
	}
}

// SetHTTPStatus records the status; a 5xx is the span's error status (X-Ray
// reads 4xx from the status code as an error, 429 as a throttle).
func (s *span) SetHTTPStatus(code int) {
	s.s.SetAttributes(attribute.Int(attrHTTPStatus, code))
	if code >= 500 && code < 600 {
		s.s.SetStatus(codes.Error, http.StatusText(code))
	}
}

// End records err as an exception and the error status, and ends the span.
func (s *span) End(err error) {
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.finish()
}

// Panic records a "panic" exception with the frames of its stack, the error
// status, and ends the span.
func (s *span) Panic(v any, frames []telemetry.Frame) {
	msg := fmt.Sprint(v)
	var stack strings.Builder
	for _, f := range frames {
		fmt.Fprintf(&stack, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
	}
	s.s.AddEvent("exception", trace.WithAttributes(attribute.String(attrExcType, "panic"),
		attribute.String(attrExcMessage, msg), attribute.String(attrExcStack, stack.String())))
	s.s.SetStatus(codes.Error, "panic: "+msg)
	s.finish()
}

func (s *span) finish() {
	s.mu.Lock()
	if len(s.annotations) > 0 {
		s.s.SetAttributes(attribute.StringSlice(AnnotationsKey, s.annotations))
	}
	s.mu.Unlock()
	s.s.End()
}

// TraceID is the trace id in X-Ray's format, "" when the span is not sampled.
func (s *span) TraceID() string {
	sc := s.s.SpanContext()
	if !sc.IsSampled() {
		return ""
	}
	return telemetry.FormatTraceID(sc.TraceID())
}

// ID is the span id.
func (s *span) ID() string { return s.s.SpanContext().SpanID().String() }

// attributeOf converts a seam value: strings, bools and numbers keep their
// type; an annotation of any other type is its text (as under X-Ray), other
// metadata its JSON.
func attributeOf(key string, v any, indexed bool) attribute.KeyValue {
	switch x := v.(type) {
	case string:
		return attribute.String(key, x)
	case bool:
		return attribute.Bool(key, x)
	case int:
		return attribute.Int(key, x)
	case int8:
		return attribute.Int64(key, int64(x))
	case int16:
		return attribute.Int64(key, int64(x))
	case int32:
		return attribute.Int64(key, int64(x))
	case int64:
		return attribute.Int64(key, x)
	case uint8:
		return attribute.Int64(key, int64(x))
	case uint16:
		return attribute.Int64(key, int64(x))
	case uint32:
		return attribute.Int64(key, int64(x))
	case uint:
		return uintAttribute(key, uint64(x))
	case uint64:
		return uintAttribute(key, x)
	case float32:
		return attribute.Float64(key, float64(x))
	case float64:
		return attribute.Float64(key, x)
	case fmt.Stringer:
		return attribute.String(key, x.String())
	case error:
		return attribute.String(key, x.Error())
	}
	if !indexed {
		if b, err := json.Marshal(v); err == nil {
			return attribute.String(key, string(b))
		}
	}
	return attribute.String(key, fmt.Sprint(v))
}

// uintAttribute keeps an unsigned value as an integer when it fits int64.
func uintAttribute(key string, v uint64) attribute.KeyValue {
	if v <= math.MaxInt64 {
		return attribute.Int64(key, int64(v))
	}
	return attribute.String(key, fmt.Sprint(v))
}
