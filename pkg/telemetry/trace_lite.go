//go:build xraylite

package telemetry

// The lightweight tracer: the same API as trace.go, without the X-Ray SDK,
// whose core package drags grpc, protobuf and fasthttp into the binary
// (+10 MB). Built with -tags xraylite (the webhook's Lambda build).
//
// Model. Every (sub)segment is written, when it ends and only when its trace
// is sampled, as its own segment document in one UDP datagram to the daemon:
// a root segment as a segment document, every subsegment as an independent
// subsegment document (type "subsegment", trace_id, parent_id). Subsegments
// are never nested into their parent's document, so nothing waits for
// children and a span that never ends costs nothing but itself.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Span is one X-Ray segment or subsegment. A nil *Span and a Span started
// without a trace in its context are no-ops, so callers never check. Methods
// are safe for concurrent use; End and Panic end the span once, later calls
// do nothing.
type Span struct {
	// Set at creation, read-only afterwards; id == "" marks a no-op span.
	id, traceID, parentID, name string
	subsegment                  bool // emitted with type "subsegment"
	sampled                     bool
	start                       time.Time

	mu          sync.Mutex
	stop        func() bool // stops the ctx-cancel watcher of a segment
	ended       bool
	namespace   string
	annotations map[string]any
	metadata    map[string]json.RawMessage
	aws         map[string]any
	request     *httpRequestDoc
	status      int
	contentLen  int64
	errorFlag   bool
	fault       bool
	throttle    bool
	exceptions  []exceptionDoc
}

// spanKey is the context key of the current *Span.
type spanKey struct{}

// spanOf returns the live span in ctx, nil when there is none or tracing is
// disabled.
func spanOf(ctx context.Context) *Span {
	if sdkDisabled() {
		return nil
	}
	s, _ := ctx.Value(spanKey{}).(*Span)
	if s == nil || s.id == "" {
		return nil
	}
	return s
}

// hasTrace reports whether ctx carries a span or a Lambda trace header a
// subsegment can hang on.
func hasTrace(ctx context.Context) bool {
	if sdkDisabled() {
		return false
	}
	return spanOf(ctx) != nil || lambdaHeader(ctx).Root != ""
}

// StartSubsegment starts a subsegment named name under the span in ctx (or,
// in Lambda, under the invocation's facade segment named by the trace header
// aws-lambda-go put in ctx). The returned context carries it, so nested calls
// and instrumented clients hang below it. Without a trace in ctx it returns
// ctx unchanged and a no-op Span. The subsegment is emitted on End when its
// trace is sampled.
func StartSubsegment(ctx context.Context, name string) (context.Context, *Span) {
	if sdkDisabled() {
		return ctx, &Span{}
	}
	s := &Span{id: newExceptionID(), name: name, subsegment: true, start: time.Now()}
	if p := spanOf(ctx); p != nil {
		s.traceID, s.parentID, s.sampled = p.traceID, p.id, p.sampled
	} else {
		h := lambdaHeader(ctx)
		if h.Root == "" {
			return ctx, &Span{}
		}
		// An independent subsegment needs a parent_id; Lambda always sends
		// the facade's id, so a header without one is not worth emitting.
		s.traceID, s.parentID, s.sampled = h.Root, h.Parent, h.Sampled && h.Parent != ""
	}
	return context.WithValue(ctx, spanKey{}, s), s
}

// StartAWSCall records a call to an AWS service the way the SDK
// instrumentation does (a subsegment named for the service, namespace "aws",
// the operation in its aws metadata). Emulated services, such as the
// in-memory cloud of `linegate local`, use it so their calls show up in
// traces exactly like the real ones.
func StartAWSCall(ctx context.Context, service, operation, region string) (context.Context, *Span) {
	c, s := StartSubsegment(ctx, service)
	if s.id == "" {
		return c, s
	}
	s.mu.Lock()
	s.namespace = "aws"
	s.aws = map[string]any{"operation": operation, "region": region}
	s.mu.Unlock()
	return c, s
}

// StartSegment starts a root segment named name, for code that runs outside
// Lambda (linegate local starts one per function invocation, as Lambda's
// facade segment does). With a parent header carrying a Root, the segment
// continues that trace and takes its sampling decision; otherwise it starts a
// new trace sampled by the configured rule (WithSampleAll: every trace; else
// the first trace of each second plus 5% of the rest). The segment is emitted
// when End is called (or when ctx is cancelled). With
// AWS_XRAY_SDK_DISABLED=true it returns a no-op Span.
func StartSegment(ctx context.Context, name string, parent Header) (context.Context, *Span) {
	if sdkDisabled() {
		return ctx, &Span{}
	}
	now := time.Now()
	s := &Span{id: newExceptionID(), name: name, start: now}
	if parent.Root != "" {
		s.traceID, s.parentID, s.sampled = parent.Root, parent.Parent, parent.Sampled
	} else {
		s.traceID, s.sampled = newTraceID(now), tracer.sample(now)
	}
	c := context.WithValue(ctx, spanKey{}, s)
	stop := context.AfterFunc(ctx, func() { s.End(nil) })
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	return c, s
}

// newTraceID returns a new X-Ray trace id: "1-", the epoch seconds in 8 hex
// digits, "-", 24 random hex digits.
func newTraceID(now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("1-%08x-%s", uint32(now.Unix()), hex.EncodeToString(b[:]))
}

// live reports whether s records anything: a real, sampled span.
func (s *Span) live() bool { return s != nil && s.id != "" && s.sampled }

// Annotate adds an indexed, searchable annotation. Values that are not a
// string, bool or number are recorded as their fmt.Sprint text; key characters
// other than letters, digits and '_' become '_' (X-Ray drops such keys).
func (s *Span) Annotate(key string, value any) {
	if !s.live() || key == "" {
		return
	}
	v := annotationValue(value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.annotations == nil {
		s.annotations = map[string]any{}
	}
	s.annotations[annotationKey(key)] = v
}

// Metadata adds non-indexed data (any JSON-encodable value) under the
// "default" namespace. The value is encoded now, so later changes to it are
// not seen; a value that cannot be encoded is dropped. Never pass secrets or
// message text.
func (s *Span) Metadata(key string, value any) {
	if !s.live() || key == "" {
		return
	}
	b, err := json.Marshal(value)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metadata == nil {
		s.metadata = map[string]json.RawMessage{}
	}
	s.metadata[key] = b
}

// SetHTTPStatus records the HTTP status this span answered or received and
// flags it the X-Ray way: 4xx is an error, 429 also a throttle, 5xx a fault.
func (s *Span) SetHTTPStatus(code int) {
	if !s.live() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = code
	switch {
	case code == http.StatusTooManyRequests:
		s.errorFlag, s.throttle = true, true
	case code >= 400 && code < 500:
		s.errorFlag = true
	case code >= 500 && code < 600:
		s.fault = true
	}
}

// End ends the span and, when its trace is sampled, emits it. A non-nil err
// marks it as a fault and records err's message as the exception, with the
// caller's stack (never put secrets in error messages).
func (s *Span) End(err error) {
	if s == nil || s.id == "" {
		return
	}
	var ex *exceptionDoc
	if err != nil && s.sampled {
		ex = &exceptionDoc{
			ID: newExceptionID(), Type: strings.TrimPrefix(fmt.Sprintf("%T", err), "*"),
			Message: err.Error(), Stack: callerStack(2),
		}
	}
	s.finish(ex)
}

// Panic records a recovered panic — its value and the stack from
// runtime/debug.Stack — as a fault with a "panic" exception, and ends the span.
func (s *Span) Panic(v any, stack []byte) {
	if s == nil || s.id == "" {
		return
	}
	var ex *exceptionDoc
	if s.sampled {
		ex = &exceptionDoc{ID: newExceptionID(), Type: "panic", Message: fmt.Sprint(v),
			Stack: parseStack(stack, maxStackFrames)}
	}
	s.finish(ex)
}

// finish ends s once: it records ex (if any) as a fault and emits s.
func (s *Span) finish(ex *exceptionDoc) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	if ex != nil {
		s.fault = true
		s.exceptions = append(s.exceptions, *ex)
	}
	var doc *segmentDoc
	if s.sampled {
		doc = s.documentLocked(time.Now())
	}
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if doc != nil {
		tracer.emit(doc)
	}
}

// TraceID returns the trace id of the span, "" for a no-op span. Unlike the
// SDK build, an unsampled span reports its (real) trace id too.
func (s *Span) TraceID() string {
	if s == nil {
		return ""
	}
	return s.traceID
}

// ID returns the (sub)segment id, "" for a no-op span.
func (s *Span) ID() string {
	if s == nil {
		return ""
	}
	return s.id
}

// downstream is the trace header a call made under s carries.
func (s *Span) downstream() Header {
	return Header{Root: s.traceID, Parent: s.id, Sampled: s.sampled}
}

// TraceHeader returns the trace header a downstream call made now should
// carry ("Root=...;Parent=<current (sub)segment id>;Sampled=1"), for the
// TraceHeader field of PutEvents entries. It is "" when ctx carries no trace.
func TraceHeader(ctx context.Context) string {
	if s := spanOf(ctx); s != nil {
		return s.downstream().String()
	}
	if sdkDisabled() {
		return ""
	}
	return lambdaHeader(ctx).String()
}

// TraceID returns the current trace id for logs and crash reports: from the
// span in ctx, else from the Lambda trace header aws-lambda-go put in ctx,
// else from the _X_AMZN_TRACE_ID environment variable; "" when there is none.
func TraceID(ctx context.Context) string {
	if s := spanOf(ctx); s != nil {
		return s.traceID
	}
	return ambientTraceID(ctx)
}

// callerStack returns up to maxStackFrames frames of the caller's stack,
// skip frames above callerStack's caller.
func callerStack(skip int) []stackFrame {
	pc := make([]uintptr, maxStackFrames)
	n := runtime.Callers(skip+2, pc)
	frames := runtime.CallersFrames(pc[:n])
	out := make([]stackFrame, 0, n)
	for {
		f, more := frames.Next()
		label := f.Function
		if i := strings.LastIndexByte(label, '/'); i >= 0 {
			label = label[i+1:]
		}
		if i := strings.IndexByte(label, '.'); i >= 0 {
			label = label[i+1:]
		}
		out = append(out, stackFrame{Path: f.File, Line: f.Line, Label: label})
		if !more {
			return out
		}
	}
}

// segmentDoc is an X-Ray segment document (or independent subsegment
// document), as the daemon forwards it to PutTraceSegments.
type segmentDoc struct {
	Name        string                                `json:"name"`
	ID          string                                `json:"id"`
	TraceID     string                                `json:"trace_id"`
	ParentID    string                                `json:"parent_id,omitempty"`
	Type        string                                `json:"type,omitempty"`
	StartTime   float64                               `json:"start_time"`
	EndTime     float64                               `json:"end_time"`
	Namespace   string                                `json:"namespace,omitempty"`
	Error       bool                                  `json:"error,omitempty"`
	Fault       bool                                  `json:"fault,omitempty"`
	Throttle    bool                                  `json:"throttle,omitempty"`
	HTTP        *httpDoc                              `json:"http,omitempty"`
	AWS         map[string]any                        `json:"aws,omitempty"`
	Service     *serviceDoc                           `json:"service,omitempty"`
	Annotations map[string]any                        `json:"annotations,omitempty"`
	Metadata    map[string]map[string]json.RawMessage `json:"metadata,omitempty"`
	Cause       *causeDoc                             `json:"cause,omitempty"`
}

type httpDoc struct {
	Request  *httpRequestDoc  `json:"request,omitempty"`
	Response *httpResponseDoc `json:"response,omitempty"`
}

type httpRequestDoc struct {
	Method string `json:"method,omitempty"`
	URL    string `json:"url,omitempty"`
}

type httpResponseDoc struct {
	Status        int   `json:"status,omitempty"`
	ContentLength int64 `json:"content_length,omitempty"`
}

type serviceDoc struct {
	Version string `json:"version"`
}

type causeDoc struct {
	WorkingDirectory string         `json:"working_directory,omitempty"`
	Exceptions       []exceptionDoc `json:"exceptions"`
}

type exceptionDoc struct {
	ID      string       `json:"id"`
	Type    string       `json:"type,omitempty"`
	Message string       `json:"message,omitempty"`
	Stack   []stackFrame `json:"stack,omitempty"`
}

// epochSeconds is t as X-Ray's floating-point epoch seconds.
func epochSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// documentLocked builds s's document, ended at end; s.mu must be held. Maps
// are copied, so the document can be encoded after the lock is released.
func (s *Span) documentLocked(end time.Time) *segmentDoc {
	d := &segmentDoc{
		Name: s.name, ID: s.id, TraceID: s.traceID, ParentID: s.parentID,
		StartTime: epochSeconds(s.start), EndTime: epochSeconds(end), Namespace: s.namespace,
		Error: s.errorFlag, Fault: s.fault, Throttle: s.throttle,
	}
	if s.subsegment {
		d.Type = "subsegment"
	} else if v := tracer.serviceVersion(); v != "" {
		d.Service = &serviceDoc{Version: v}
	}
	if s.request != nil || s.status != 0 {
		d.HTTP = &httpDoc{Request: s.request}
		if s.status != 0 || s.contentLen != 0 {
			d.HTTP.Response = &httpResponseDoc{Status: s.status, ContentLength: s.contentLen}
		}
	}
	if len(s.aws) > 0 {
		d.AWS = make(map[string]any, len(s.aws))
		for k, v := range s.aws {
			d.AWS[k] = v
		}
	}
	if len(s.annotations) > 0 {
		d.Annotations = make(map[string]any, len(s.annotations))
		for k, v := range s.annotations {
			d.Annotations[k] = v
		}
	}
	if len(s.metadata) > 0 {
		md := make(map[string]json.RawMessage, len(s.metadata))
		for k, v := range s.metadata {
			md[k] = v
		}
		d.Metadata = map[string]map[string]json.RawMessage{"default": md}
	}
	if len(s.exceptions) > 0 {
		wd, _ := os.Getwd()
		d.Cause = &causeDoc{WorkingDirectory: wd, Exceptions: append([]exceptionDoc(nil), s.exceptions...)}
	}
	return d
}

// setRemote marks s as a call to a remote HTTP service.
func (s *Span) setRemote(method, url string) {
	if !s.live() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.namespace = "remote"
	s.request = &httpRequestDoc{Method: method, URL: url}
}

// setResponse records the response's content length and, for AWS calls, the
// request id.
func (s *Span) setResponse(contentLength int64, requestID string) {
	if !s.live() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if contentLength > 0 {
		s.contentLen = contentLength
	}
	if requestID != "" {
		if s.aws == nil {
			s.aws = map[string]any{}
		}
		s.aws["request_id"] = requestID
	}
}
