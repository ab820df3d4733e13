// Package xraytrace is the tracing seam's X-Ray backend, over the AWS X-Ray
// SDK for Go v2 (aws-xray-sdk-go), the default: TRACING unset or "xray". It is
// the only package that imports the SDK, which entered maintenance on
// 2026-02-25 and reaches end of support on 2027-02-25
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-sdk-migration.html);
// internal/telemetry/otelxray is the way out.
//
// In Lambda nothing needs configuring: the SDK sends to the daemon at
// AWS_XRAY_DAEMON_ADDRESS, and the invocation's facade segment comes from the
// trace header aws-lambda-go puts in each invoke's context, so
// StartInvocation records nothing of its own. Outside Lambda (`linegate
// local`) a Backend built with options carries its configuration in the
// context of every invocation it starts instead of in the SDK's process-wide
// state, so two runtimes in one process each send to their own collector.
//
// New, not an init function, sets what the SDK needs process-wide (a missing
// segment is ignored silently, the SDK's own messages go to stderr as JSON at
// WARN and above): importing a package changes nothing.
//
// Cross-trace links: the SDK's segment document has no "links" member, so a
// link is the seam's annotations (upstreamTraceId, upstreamParentId) only.
package xraytrace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-xray-sdk-go/v2/header"
	"github.com/aws/aws-xray-sdk-go/v2/instrumentation/awsv2"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/ctxmissing"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/exception"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/sampling"
	"github.com/aws/aws-xray-sdk-go/v2/xray"
	"github.com/aws/aws-xray-sdk-go/v2/xraylog"

	"github.com/linegate/linegate/internal/telemetry"
)

// noOpTraceID is the trace id the SDK gives unsampled segments.
const noOpTraceID = "1-00000000-000000000000000000000000"

// Option tunes New.
type Option func(*config)

type config struct {
	daemonAddr     string
	sampleAll      bool
	serviceVersion string
	invocations    bool
}

// WithDaemonAddress makes segments go to the X-Ray daemon (or the local
// collector) at addr ("127.0.0.1:2000"), whatever AWS_XRAY_DAEMON_ADDRESS
// says. Finished subsegments are then streamed one by one, so a large batch
// never makes a segment document over UDP's 64 KB.
func WithDaemonAddress(addr string) Option {
	return func(c *config) { c.daemonAddr = addr }
}

// WithSampleAll samples every invocation without a sampled parent. Use it
// for local runs: the SDK's default sampling keeps 1 trace/s + 5%.
func WithSampleAll() Option {
	return func(c *config) { c.sampleAll = true }
}

// WithServiceVersion records v as the service version of every segment.
func WithServiceVersion(v string) Option {
	return func(c *config) { c.serviceVersion = v }
}

// WithInvocationSegments makes StartInvocation begin a root segment per
// invocation, as Lambda's facade segment does: for runtimes that run
// invocations themselves (`linegate local`). Without it (Lambda), the
// facade is the invocation and StartInvocation records nothing.
func WithInvocationSegments() Option {
	return func(c *config) { c.invocations = true }
}

// Backend is the X-Ray SDK behind the seam (telemetry.Backend). It is
// immutable and safe for concurrent use.
type Backend struct {
	cfg         *xray.Config // nil: the SDK's process-wide configuration
	invocations bool
}

// setupOnce guards what every Backend needs of the SDK's process-wide state.
var setupOnce sync.Once

// setupProcess makes a missing segment a silent no-op (the SDK's default
// logs "failed to begin subsegment" for every untraced call) and routes the
// SDK's own chatter to stderr as JSON at WARN and above instead of plain text
// on stdout, where it would corrupt JSON log lines.
func setupProcess() {
	_ = xray.Configure(xray.Config{ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy()})
	xray.SetLogger(sdkLogger{log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), min: xraylog.LogLevelWarn})
}

// New returns the X-Ray backend. The first call sets up the SDK's
// process-wide state (see the package doc). Without options segments follow
// the SDK's process-wide configuration (AWS_XRAY_DAEMON_ADDRESS or
// 127.0.0.1:2000), which is what Lambda needs; with WithDaemonAddress,
// WithSampleAll or WithServiceVersion the configuration travels in the
// context of each invocation the Backend starts, and the process-wide one
// stays as it was. AWS_XRAY_CONTEXT_MISSING, when set, still overrides the
// silent missing-context strategy (the SDK's rule).
func New(opts ...Option) (*Backend, error) {
	setupOnce.Do(setupProcess)
	var c config
	for _, o := range opts {
		o(&c)
	}
	b := &Backend{invocations: c.invocations}
	if c.daemonAddr == "" && !c.sampleAll && c.serviceVersion == "" {
		return b, nil
	}
	cfg, err := c.sdkConfig()
	if err != nil {
		return nil, err
	}
	// ContextWithConfig validates the configuration against the environment
	// once; withConfig then only attaches the result.
	ctx, err := xray.ContextWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("xraytrace: configuration: %w", err)
	}
	b.cfg = xray.GetRecorder(ctx)
	return b, nil
}

// sdkConfig builds the SDK configuration the options describe. Fields left
// nil fall back to the process-wide configuration.
func (c config) sdkConfig() (xray.Config, error) {
	cfg := xray.Config{
		ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy(),
		ServiceVersion:         c.serviceVersion,
	}
	if c.daemonAddr != "" {
		addr, err := net.ResolveUDPAddr("udp", c.daemonAddr)
		if err != nil {
			return xray.Config{}, fmt.Errorf("xraytrace: daemon address %q: %w", c.daemonAddr, err)
		}
		em, err := xray.NewDefaultEmitter(addr)
		if err != nil {
			return xray.Config{}, fmt.Errorf("xraytrace: emitter for %s: %w", addr, err)
		}
		cfg.Emitter = pinnedEmitter{em}
		// A local batch of ten records with their DynamoDB and LINE calls
		// would otherwise be one segment document over UDP's 64 KB: stream
		// every finished subsegment on its own instead.
		stream, err := xray.NewDefaultStreamingStrategyWithMaxSubsegmentCount(1)
		if err != nil {
			return xray.Config{}, fmt.Errorf("xraytrace: streaming strategy: %w", err)
		}
		cfg.StreamingStrategy = stream
	}
	if c.sampleAll {
		cfg.SamplingStrategy = sampleAll{}
	}
	return cfg, nil
}

// withConfig returns ctx carrying b's configuration (unchanged without one).
func (b *Backend) withConfig(ctx context.Context) context.Context {
	if b.cfg == nil {
		return ctx
	}
	return context.WithValue(ctx, xray.RecorderContextKey{}, b.cfg)
}

// hasTrace reports whether ctx carries a segment or a Lambda trace header the
// SDK can hang a subsegment on.
func hasTrace(ctx context.Context) bool {
	if xray.SdkDisabled() {
		return false
	}
	if xray.GetSegment(ctx) != nil {
		return true
	}
	_, ok := telemetry.InvokeHeader(ctx)
	return ok
}

// Start begins a subsegment under the segment in ctx, or under the Lambda
// invocation's facade segment (telemetry.Backend).
func (b *Backend) Start(ctx context.Context, name string, o telemetry.SpanOptions) (context.Context, telemetry.BackendSpan, bool) {
	if !hasTrace(ctx) {
		return ctx, nil, false
	}
	if xray.GetSegment(ctx) == nil {
		ctx = b.withConfig(ctx) // the facade follows this Backend's configuration
	}
	c, seg := xray.BeginSubsegment(ctx, name)
	if seg == nil {
		return ctx, nil, false
	}
	if o.AWS != nil {
		seg.Lock()
		seg.Namespace = "aws"
		seg.GetAWS()["operation"] = o.AWS.Operation
		seg.GetAWS()["region"] = o.AWS.Region
		seg.Unlock()
	}
	return c, &span{seg: seg}, true
}

// StartInvocation begins a root segment (WithInvocationSegments only): a new
// trace sampled by the configured strategy, or, with a parent carrying a
// Root, that trace under its sampling decision (telemetry.Backend).
func (b *Backend) StartInvocation(ctx context.Context, name string, parent telemetry.Header) (context.Context, telemetry.BackendSpan, bool) {
	if !b.invocations || xray.SdkDisabled() {
		return ctx, nil, false
	}
	ctx = b.withConfig(ctx)
	if parent.Root == "" {
		c, seg := xray.BeginSegment(ctx, name)
		return c, &span{seg: seg}, seg != nil
	}
	h := &header.Header{TraceID: parent.Root, ParentID: parent.Parent, SamplingDecision: header.NotSampled}
	if parent.Sampled {
		h.SamplingDecision = header.Sampled
	}
	// The SDK only honours an incoming decision together with a request.
	req := &http.Request{Method: "INVOKE", Host: name, URL: &url.URL{Path: "/" + name}}
	c, seg := xray.NewSegmentFromHeader(ctx, name, req, h)
	return c, &span{seg: seg}, seg != nil
}

// Header is the trace header under the (sub)segment in ctx, else the Lambda
// invocation's (telemetry.Backend).
func (b *Backend) Header(ctx context.Context) telemetry.Header {
	if xray.SdkDisabled() {
		return telemetry.Header{}
	}
	if seg := xray.GetSegment(ctx); seg != nil {
		seg.RLock()
		id, root := seg.ID, seg.ParentSegment
		seg.RUnlock()
		if root == nil {
			return telemetry.Header{}
		}
		root.RLock()
		h := telemetry.Header{Root: root.TraceID, Parent: id, Sampled: root.Sampled}
		root.RUnlock()
		if h.Root == noOpTraceID {
			return telemetry.Header{}
		}
		return h
	}
	h, _ := telemetry.InvokeHeader(ctx)
	return h
}

// RoundTripper routes a request through the SDK's round tripper when its
// context is traced (telemetry.Backend).
func (b *Backend) RoundTripper(base http.RoundTripper) http.RoundTripper {
	return &traceTransport{base: base, traced: xray.RoundTripper(base)}
}

// InstrumentAWS makes every call of clients built from cfg a subsegment of
// the segment in the call's context (the SDK's awsv2 instrumentation).
// Calls without a trace in their context run untraced and silently.
func (b *Backend) InstrumentAWS(cfg *aws.Config) {
	if cfg == nil {
		return
	}
	awsv2.AWSV2Instrumentor(&cfg.APIOptions)
}

// Flush does nothing: the SDK emits each (sub)segment when it closes.
func (b *Backend) Flush(context.Context) error { return nil }

// Shutdown does nothing: the SDK keeps no background work of a Backend's.
func (b *Backend) Shutdown(context.Context) error { return nil }

// traceTransport routes a request through the X-Ray round tripper only when
// its context carries a trace.
type traceTransport struct {
	base, traced http.RoundTripper
}

// RoundTrip sends r through X-Ray when its context is traced. The SDK sets
// the trace header on the request it is given, so it gets a copy: a
// RoundTripper must not change the caller's request.
func (t *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if hasTrace(r.Context()) {
		return t.traced.RoundTrip(r.Clone(r.Context()))
	}
	return t.base.RoundTrip(r)
}

// span is one X-Ray segment or subsegment (telemetry.BackendSpan).
type span struct {
	seg *xray.Segment
}

// SetAttribute adds an annotation (indexed) or metadata. Annotation values
// that are not a string, bool or number are recorded as their text; key
// characters other than letters, digits and '_' become '_' (X-Ray drops
// such keys).
func (s *span) SetAttribute(key string, value any, indexed bool) {
	if indexed {
		_ = s.seg.AddAnnotation(annotationKey(key), annotationValue(value))
		return
	}
	_ = s.seg.AddMetadata(key, value)
}

// AddLink does nothing: the SDK's segment document has no links, so the
// seam's annotations are the link.
func (s *span) AddLink(telemetry.Header) {}

// SetHTTPStatus records the status and flags the segment the X-Ray way.
func (s *span) SetHTTPStatus(code int) {
	s.seg.Lock()
	defer s.seg.Unlock()
	if s.seg.Dummy {
		return
	}
	s.seg.GetHTTP().GetResponse().Status = code
	switch {
	case code == http.StatusTooManyRequests:
		s.seg.Error, s.seg.Throttle = true, true
	case code >= 400 && code < 500:
		s.seg.Error = true
	case code >= 500 && code < 600:
		s.seg.Fault = true
	}
}

// End closes the segment; a non-nil err is its fault and exception.
func (s *span) End(err error) { s.seg.Close(err) }

// Panic records a "panic" exception with the stack's frames as a fault and
// closes the segment.
func (s *span) Panic(v any, frames []telemetry.Frame) {
	s.seg.Lock()
	if !s.seg.Dummy {
		s.seg.Fault = true
		cause := s.seg.GetCause()
		cause.WorkingDirectory, _ = os.Getwd()
		stack := make([]exception.Stack, len(frames))
		for i, f := range frames {
			stack[i] = exception.Stack{Path: f.File, Line: f.Line, Label: f.Function}
		}
		cause.Exceptions = append(cause.Exceptions, exception.Exception{
			ID:      newExceptionID(),
			Type:    "panic",
			Message: fmt.Sprint(v),
			Stack:   stack,
		})
	}
	s.seg.Unlock()
	s.seg.Close(nil)
}

// TraceID is the segment's trace id, "" when unsampled.
func (s *span) TraceID() string {
	s.seg.RLock()
	defer s.seg.RUnlock()
	if s.seg.TraceID == noOpTraceID {
		return ""
	}
	return s.seg.TraceID
}

// ID is the (sub)segment's id.
func (s *span) ID() string {
	s.seg.RLock()
	defer s.seg.RUnlock()
	return s.seg.ID
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
	case int8, int16, int32, int64:
		return int(reflect.ValueOf(x).Int())
	case uint8, uint16, uint32, uint64:
		return uint(reflect.ValueOf(x).Uint())
	case fmt.Stringer:
		return x.String()
	case error:
		return x.Error()
	default:
		return fmt.Sprint(x)
	}
}

// newExceptionID returns a random 16-hex-digit id for an exception record
// (the SDK only mints them for errors it formats itself).
func newExceptionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pinnedEmitter keeps an explicitly configured address: the SDK re-points
// emitters at AWS_XRAY_DAEMON_ADDRESS on every Configure and
// ContextWithConfig, which would send a local run's segments away from its
// collector.
type pinnedEmitter struct{ *xray.DefaultEmitter }

// RefreshEmitterWithAddress ignores the SDK's re-pointing (see pinnedEmitter).
func (pinnedEmitter) RefreshEmitterWithAddress(*net.UDPAddr) {}

// sampleAll is a sampling strategy that keeps every trace.
type sampleAll struct{}

// ShouldTrace samples every request.
func (sampleAll) ShouldTrace(*sampling.Request) *sampling.Decision {
	return &sampling.Decision{Sample: true}
}

// sdkLogger adapts slog to the SDK's logger interface.
type sdkLogger struct {
	log *slog.Logger
	min xraylog.LogLevel
}

// Log forwards WARN and ERROR messages to slog, dropping missing-context ones.
func (l sdkLogger) Log(level xraylog.LogLevel, msg fmt.Stringer) {
	if level < l.min {
		return
	}
	text := msg.String()
	if strings.Contains(text, "context missing") || strings.Contains(text, "cannot be found") {
		// A call without a trace is expected (tests, local runs, background
		// work); AWS_XRAY_CONTEXT_MISSING=LOG_ERROR (Lambda's setting) would
		// otherwise log it on every untraced AWS call.
		return
	}
	lvl := slog.LevelWarn
	if level >= xraylog.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "x-ray sdk: "+text)
}
