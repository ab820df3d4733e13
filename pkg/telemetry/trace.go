//go:build !xraylite

package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-xray-sdk-go/v2/header"
	"github.com/aws/aws-xray-sdk-go/v2/instrumentation/awsv2"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/ctxmissing"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/exception"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/sampling"
	"github.com/aws/aws-xray-sdk-go/v2/xray"
	"github.com/aws/aws-xray-sdk-go/v2/xraylog"
)

// noOpTraceID is the trace id the SDK gives unsampled segments.
const noOpTraceID = "1-00000000-000000000000000000000000"

func init() {
	// Safe defaults before any Configure call: a missing segment is silently
	// ignored (the SDK's default would log "failed to begin subsegment") and
	// the SDK's own chatter goes to stderr as JSON at WARN and above instead
	// of plain text on stdout, where it would corrupt JSON log lines.
	_ = xray.Configure(xray.Config{ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy()})
	xray.SetLogger(sdkLogger{log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), min: xraylog.LogLevelWarn})
}

// Configure sets where and how segments are emitted. It changes process-wide
// SDK state: call it once at start-up, before any segment exists. Without a
// call the SDK defaults apply (AWS_XRAY_DAEMON_ADDRESS or 127.0.0.1:2000),
// which is what Lambda needs. AWS_XRAY_CONTEXT_MISSING, when set, still
// overrides the silent missing-context strategy (the SDK's rule).
func Configure(opts ...ConfigOption) error {
	var c traceConfig
	for _, o := range opts {
		o(&c)
	}
	cfg := xray.Config{
		ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy(),
		ServiceVersion:         c.serviceVersion,
	}
	if c.daemonAddr != "" {
		addr, err := net.ResolveUDPAddr("udp", c.daemonAddr)
		if err != nil {
			return fmt.Errorf("telemetry: daemon address %q: %w", c.daemonAddr, err)
		}
		em, err := xray.NewDefaultEmitter(addr)
		if err != nil {
			return fmt.Errorf("telemetry: emitter for %s: %w", addr, err)
		}
		cfg.Emitter = pinnedEmitter{em}
		// A local batch of ten records with their DynamoDB and LINE calls
		// would otherwise be one segment document over UDP's 64 KB: stream
		// every finished subsegment on its own instead.
		stream, err := xray.NewDefaultStreamingStrategyWithMaxSubsegmentCount(1)
		if err != nil {
			return fmt.Errorf("telemetry: streaming strategy: %w", err)
		}
		cfg.StreamingStrategy = stream
	}
	if c.sampleAll {
		cfg.SamplingStrategy = sampleAll{}
	}
	if err := xray.Configure(cfg); err != nil {
		return fmt.Errorf("telemetry: configure x-ray: %w", err)
	}
	if c.sdkLog != nil {
		xray.SetLogger(sdkLogger{log: c.sdkLog, min: xraylog.LogLevelWarn})
	}
	return nil
}

// pinnedEmitter keeps an explicitly configured address: the SDK re-points
// emitters at AWS_XRAY_DAEMON_ADDRESS on every Configure, which would send a
// local run's segments away from its collector.
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

// Span is one X-Ray segment or subsegment. A nil *Span and a Span started
// without a trace in its context are no-ops, so callers never check. Methods
// are safe for concurrent use; End and Panic end the span once, later calls
// do nothing.
type Span struct {
	seg   *xray.Segment
	ended atomic.Bool
}

// hasTrace reports whether ctx carries a segment or a Lambda trace header the
// SDK can hang a subsegment on.
func hasTrace(ctx context.Context) bool {
	if sdkDisabled() {
		return false
	}
	if xray.GetSegment(ctx) != nil {
		return true
	}
	return lambdaHeader(ctx).Root != ""
}

// StartSubsegment starts a subsegment named name under the segment in ctx (or,
// in Lambda, under the invocation's facade segment). The returned context
// carries it, so nested calls and instrumented clients hang below it. Without
// a trace in ctx it returns ctx unchanged and a no-op Span.
func StartSubsegment(ctx context.Context, name string) (context.Context, *Span) {
	if !hasTrace(ctx) {
		return ctx, &Span{}
	}
	c, seg := xray.BeginSubsegment(ctx, name)
	if seg == nil {
		return ctx, &Span{}
	}
	return c, &Span{seg: seg}
}

// StartAWSCall records a call to an AWS service the way the SDK
// instrumentation does (a subsegment named for the service, namespace "aws",
// the operation in its aws metadata). Emulated services, such as the
// in-memory cloud of `linegate local`, use it so their calls show up in
// traces exactly like the real ones.
func StartAWSCall(ctx context.Context, service, operation, region string) (context.Context, *Span) {
	c, s := StartSubsegment(ctx, service)
	if s.seg == nil {
		return c, s
	}
	s.seg.Lock()
	s.seg.Namespace = "aws"
	s.seg.GetAWS()["operation"] = operation
	s.seg.GetAWS()["region"] = region
	s.seg.Unlock()
	return c, s
}

// StartSegment starts a root segment named name, for code that runs outside
// Lambda (linegate local starts one per function invocation, as Lambda's
// facade segment does). With a parent header carrying a Root, the segment
// continues that trace and takes its sampling decision; otherwise it starts a
// new trace sampled by the configured strategy. The segment is emitted when
// End is called (or when ctx is cancelled). With AWS_XRAY_SDK_DISABLED=true it
// returns a no-op Span.
func StartSegment(ctx context.Context, name string, parent Header) (context.Context, *Span) {
	if sdkDisabled() {
		return ctx, &Span{}
	}
	if parent.Root == "" {
		c, seg := xray.BeginSegment(ctx, name)
		return c, &Span{seg: seg}
	}
	h := &header.Header{TraceID: parent.Root, ParentID: parent.Parent, SamplingDecision: header.NotSampled}
	if parent.Sampled {
		h.SamplingDecision = header.Sampled
	}
	// The SDK only honours an incoming decision together with a request.
	req := &http.Request{Method: "INVOKE", Host: name, URL: &url.URL{Path: "/" + name}}
	c, seg := xray.NewSegmentFromHeader(ctx, name, req, h)
	return c, &Span{seg: seg}
}

// Annotate adds an indexed, searchable annotation. Values that are not a
// string, bool or number are recorded as their fmt.Sprint text; key characters
// other than letters, digits and '_' become '_' (X-Ray drops such keys).
func (s *Span) Annotate(key string, value any) {
	if s == nil || s.seg == nil || key == "" {
		return
	}
	_ = s.seg.AddAnnotation(annotationKey(key), annotationValue(value))
}

// Metadata adds non-indexed data (any JSON-encodable value) under the
// "default" namespace. Never pass secrets or message text.
func (s *Span) Metadata(key string, value any) {
	if s == nil || s.seg == nil || key == "" {
		return
	}
	_ = s.seg.AddMetadata(key, value)
}

// SetHTTPStatus records the HTTP status this span answered or received and
// flags it the X-Ray way: 4xx is an error, 429 also a throttle, 5xx a fault.
func (s *Span) SetHTTPStatus(code int) {
	if s == nil || s.seg == nil {
		return
	}
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

// End ends the span. A non-nil err marks it as a fault and records err's
// message as the exception (never put secrets in error messages).
func (s *Span) End(err error) {
	if s == nil || s.seg == nil {
		return
	}
	if s.ended.CompareAndSwap(false, true) {
		s.seg.Close(err)
	}
}

// Panic records a recovered panic — its value and the stack from
// runtime/debug.Stack — as a fault with a "panic" exception, and ends the span.
func (s *Span) Panic(v any, stack []byte) {
	if s == nil || s.seg == nil {
		return
	}
	if !s.ended.CompareAndSwap(false, true) {
		return
	}
	s.seg.Lock()
	if !s.seg.Dummy {
		s.seg.Fault = true
		cause := s.seg.GetCause()
		cause.WorkingDirectory, _ = os.Getwd()
		cause.Exceptions = append(cause.Exceptions, exception.Exception{
			ID:      newExceptionID(),
			Type:    "panic",
			Message: fmt.Sprint(v),
			Stack:   sdkStack(parseStack(stack, maxStackFrames)),
		})
	}
	s.seg.Unlock()
	s.seg.Close(nil)
}

// TraceID returns the trace id of the span, "" for a no-op span.
func (s *Span) TraceID() string {
	if s == nil || s.seg == nil {
		return ""
	}
	s.seg.RLock()
	defer s.seg.RUnlock()
	if s.seg.TraceID == noOpTraceID {
		return ""
	}
	return s.seg.TraceID
}

// ID returns the (sub)segment id, "" for a no-op span.
func (s *Span) ID() string {
	if s == nil || s.seg == nil {
		return ""
	}
	s.seg.RLock()
	defer s.seg.RUnlock()
	return s.seg.ID
}

// segmentOf returns the (sub)segment in ctx, nil when there is none or the
// SDK is disabled (AWS_XRAY_SDK_DISABLED=true gives hollow segments).
func segmentOf(ctx context.Context) *xray.Segment {
	if sdkDisabled() {
		return nil
	}
	return xray.GetSegment(ctx)
}

// TraceHeader returns the trace header a downstream call made now should
// carry ("Root=...;Parent=<current (sub)segment id>;Sampled=1"), for the
// TraceHeader field of PutEvents entries. It is "" when ctx carries no trace.
func TraceHeader(ctx context.Context) string {
	if seg := segmentOf(ctx); seg != nil {
		seg.RLock()
		id, root := seg.ID, seg.ParentSegment
		seg.RUnlock()
		if root == nil {
			return ""
		}
		root.RLock()
		h := Header{Root: root.TraceID, Parent: id, Sampled: root.Sampled}
		root.RUnlock()
		if h.Root == "" || h.Root == noOpTraceID {
			return ""
		}
		return h.String()
	}
	return lambdaHeader(ctx).String()
}

// TraceID returns the current trace id for logs and crash reports: from the
// segment in ctx, else from the Lambda trace header aws-lambda-go put in ctx,
// else from the _X_AMZN_TRACE_ID environment variable; "" when there is none.
func TraceID(ctx context.Context) string {
	if seg := segmentOf(ctx); seg != nil {
		seg.RLock()
		root := seg.ParentSegment
		seg.RUnlock()
		if root != nil {
			root.RLock()
			id := root.TraceID
			root.RUnlock()
			if id != noOpTraceID {
				return id
			}
			return ""
		}
	}
	return ambientTraceID(ctx)
}

// InstrumentAWS makes every call of clients built from cfg (EventBridge, SQS,
// SNS, DynamoDB, SSM, ...) a subsegment of the segment in the call's context.
// Calls without a trace in their context run untraced and silently.
func InstrumentAWS(cfg *aws.Config) {
	if cfg == nil {
		return
	}
	awsv2.AWSV2Instrumentor(&cfg.APIOptions)
}

// HTTPClient returns a copy of c (http.DefaultClient when nil) whose requests
// become subsegments named after the host, carrying X-Amzn-Trace-Id, when
// their context holds a trace. Requests without one go straight to the
// original transport: no header, no SDK warning.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *c
	out.Transport = &traceTransport{base: base, traced: xray.RoundTripper(base)}
	return &out
}

// traceTransport routes a request through the X-Ray round tripper only when
// its context carries a trace.
type traceTransport struct {
	base, traced http.RoundTripper
}

// RoundTrip sends r through X-Ray when its context is traced.
func (t *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if hasTrace(r.Context()) {
		return t.traced.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}

// sdkStack converts parsed frames to the SDK's exception stack type.
func sdkStack(frames []stackFrame) []exception.Stack {
	out := make([]exception.Stack, len(frames))
	for i, f := range frames {
		out[i] = exception.Stack{Path: f.Path, Line: f.Line, Label: f.Label}
	}
	return out
}
