package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-xray-sdk-go/v2/header"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/exception"
	"github.com/aws/aws-xray-sdk-go/v2/xray"
)

// Annotation keys (*Span).Link writes; the collector reads the same names.
const (
	// AnnotationUpstreamTraceID holds the trace id of the trace that caused
	// this one (the webhook's trace, seen from the worker).
	AnnotationUpstreamTraceID = "upstreamTraceId"
	// AnnotationUpstreamParentID holds the id of the upstream (sub)segment
	// that handed the work off (the PutEvents subsegment).
	AnnotationUpstreamParentID = "upstreamParentId"
)

// noOpTraceID is the trace id the SDK gives unsampled segments.
const noOpTraceID = "1-00000000-000000000000000000000000"

// lambdaTraceEnv is the environment variable the Lambda runtime sets to the
// current invocation's trace header.
const lambdaTraceEnv = "_X_AMZN_TRACE_ID"

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
	if xray.SdkDisabled() {
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
// new trace sampled by the configured strategy. The configuration is the
// Tracer's when ctx went through (*Tracer).Context, else the process-wide
// one; the segment's subsegments follow it. The segment is emitted when End
// is called (or when ctx is cancelled). With AWS_XRAY_SDK_DISABLED=true it
// returns a no-op Span.
func StartSegment(ctx context.Context, name string, parent Header) (context.Context, *Span) {
	if xray.SdkDisabled() {
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
			Stack:   parseStack(stack, maxStackFrames),
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
	if xray.SdkDisabled() {
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

// lambdaHeader returns the invocation's trace header aws-lambda-go put in ctx.
func lambdaHeader(ctx context.Context) Header {
	s, _ := ctx.Value(xray.LambdaTraceHeaderKey).(string)
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

// maxStackFrames bounds the frames recorded for a panic (the SDK's own cap).
const maxStackFrames = 32

// parseStack turns runtime/debug.Stack output into the frames of an X-Ray
// exception: pairs of "pkg.Func(args)" and "\t/path/file.go:123 +0x1d" lines.
// Lines that do not fit the pattern are skipped; at most limit frames are
// returned.
func parseStack(stack []byte, limit int) []exception.Stack {
	lines := strings.Split(string(stack), "\n")
	var out []exception.Stack
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
		out = append(out, exception.Stack{Path: loc[:colon], Line: line, Label: fn})
		i++
	}
	return out
}

// newExceptionID returns a random 16-hex-digit id for an exception record
// (the SDK only mints them for errors it formats itself).
func newExceptionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
