package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/testio"
	"github.com/linegate/linegate/internal/xraycollector"
)

// col receives every segment the tests emit; sdkLog captures the SDK's own
// warnings and errors.
var (
	col    *xraycollector.Collector
	sdkLog = &syncBuffer{}
)

func TestMain(m *testing.M) {
	col = xraycollector.New()
	if err := col.Listen(context.Background(), "127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, "collector:", err)
		os.Exit(1)
	}
	if err := Configure(WithDaemonAddress(col.Addr()), WithSampleAll(),
		WithSDKLogger(slog.New(slog.NewJSONHandler(sdkLog, nil)))); err != nil {
		fmt.Fprintln(os.Stderr, "configure:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = col.Close()
	os.Exit(code)
}

// syncBuffer is a buffer safe for concurrent writers.
type syncBuffer = testio.Buffer

// waitTrace waits until the process-wide collector holds trace id with every
// segment in ids finished, and returns its segments by id.
func waitTrace(t *testing.T, id string, ids ...string) (xraycollector.Trace, map[string]xraycollector.Segment) {
	t.Helper()
	return waitTraceIn(t, col, id, ids...)
}

// waitTraceIn waits until c holds trace id with every segment in ids
// finished, and returns its segments by id.
func waitTraceIn(t *testing.T, c *xraycollector.Collector, id string, ids ...string) (xraycollector.Trace, map[string]xraycollector.Segment) {
	t.Helper()
	tr := waitUntil(t, c, id, fmt.Sprintf("segments %v finished", ids), func(tr xraycollector.Trace) bool {
		for _, want := range ids {
			if s, ok := segmentByID(tr)[want]; !ok || s.InProgress {
				return false
			}
		}
		return true
	})
	return tr, segmentByID(tr)
}

// waitUntil waits until c holds trace id and cond holds for it. UDP delivery
// is asynchronous, so this waits on the collector's change notifications,
// bounded at 10 s; on time-out it reports what the collector had.
func waitUntil(t *testing.T, c *xraycollector.Collector, id, what string, cond func(xraycollector.Trace) bool) xraycollector.Trace {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := c.Changed()
		if tr, ok := c.Trace(id); ok && cond(tr) {
			return tr
		}
		select {
		case <-changed:
		case <-deadline:
			tr, ok := c.Trace(id)
			t.Fatalf("trace %s: %s did not happen within 10s; collector %s has the trace: %v, segments %+v", id, what, c.Addr(), ok, tr.Segments)
		}
	}
}

// segmentByID indexes a trace's segments by id.
func segmentByID(tr xraycollector.Trace) map[string]xraycollector.Segment {
	by := make(map[string]xraycollector.Segment, len(tr.Segments))
	for _, s := range tr.Segments {
		by[s.ID] = s
	}
	return by
}

// childrenOf returns the segments whose parent is id.
func childrenOf(tr xraycollector.Trace, id string) []xraycollector.Segment {
	var out []xraycollector.Segment
	for _, s := range tr.Segments {
		if s.ParentID == id {
			out = append(out, s)
		}
	}
	return out
}

// headerRecorder is an httptest handler that records X-Amzn-Trace-Id values.
type headerRecorder struct {
	mu      sync.Mutex
	headers []string
}

func (h *headerRecorder) record(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.headers = append(h.headers, r.Header.Get("X-Amzn-Trace-Id"))
}

func (h *headerRecorder) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.headers...)
}

// fakeEventBridge answers PutEvents: 200 unless the request body contains
// "fail", then a 400 ValidationException.
func fakeEventBridge(t *testing.T) (*httptest.Server, *headerRecorder) {
	rec := &headerRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Requestid", "req-1")
		if bytes.Contains(body, []byte("fail")) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"ValidationException","message":"bad entry"}`)
			return
		}
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"ev-1"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

func eventBridgeClient(endpoint string) *eventbridge.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "not-a-secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	InstrumentAWS(&cfg)
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func putEvents(ctx context.Context, c *eventbridge.Client, detail string) error {
	_, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("line.webhook"), DetailType: aws.String("message"), Detail: aws.String(detail),
	}}})
	return err
}

func TestEndToEnd(t *testing.T) {
	ebSrv, ebHeaders := fakeEventBridge(t)
	eb := eventBridgeClient(ebSrv.URL)
	lineHeaders := &headerRecorder{}
	lineSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lineHeaders.record(r)
		http.Error(w, `{"message":"boom"}`, http.StatusInternalServerError)
	}))
	defer lineSrv.Close()
	httpc := HTTPClient(&http.Client{Timeout: 5 * time.Second})

	ctx, root := StartSegment(context.Background(), "webhook", Header{})
	root.Annotate("events", 2)

	_, verify := StartSubsegment(ctx, "verify")
	verify.Annotate("signature-valid", true) // '-' becomes '_'
	verify.End(nil)

	pctx, publish := StartSubsegment(ctx, "publish")
	downstream := TraceHeader(pctx)
	if err := putEvents(pctx, eb, `{"ok":true}`); err != nil {
		t.Fatalf("PutEvents ok: %v", err)
	}
	if err := putEvents(pctx, eb, `{"fail":true}`); err == nil {
		t.Fatal("PutEvents fail: want an error from the 400")
	}
	publish.End(nil)

	lctx, line := StartSubsegment(ctx, "line")
	req, _ := http.NewRequestWithContext(lctx, http.MethodPost, lineSrv.URL+"/v2/bot/message/push", strings.NewReader("{}"))
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("LINE call: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	line.End(errors.New("push: status 500"))

	root.SetHTTPStatus(http.StatusOK)
	root.End(nil)

	traceID := root.TraceID()
	if traceID == "" {
		t.Fatal("sampled segment has no trace id")
	}
	if want := "Root=" + traceID + ";Parent=" + publish.ID() + ";Sampled=1"; downstream != want {
		t.Errorf("TraceHeader under publish = %q, want %q", downstream, want)
	}
	tr, by := waitTrace(t, traceID, root.ID(), verify.ID(), publish.ID(), line.ID())

	r := by[root.ID()]
	if r.Name != "webhook" || r.ParentID != "" || r.Type != "segment" || r.Error || r.Fault || r.HTTPStatus != 200 {
		t.Errorf("root segment = %+v", r)
	}
	if got := r.Annotations["events"]; got != float64(2) {
		t.Errorf("root annotation events = %v, want 2", got)
	}
	v := by[verify.ID()]
	if v.ParentID != root.ID() || v.Annotations["signature_valid"] != true || v.Fault {
		t.Errorf("verify subsegment = %+v", v)
	}

	// The two PutEvents calls are subsegments of publish.
	var calls []xraycollector.Segment
	for _, s := range childrenOf(tr, publish.ID()) {
		if s.Namespace == "aws" {
			calls = append(calls, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("AWS subsegments under publish = %+v, want 2", calls)
	}
	var ok, failed *xraycollector.Segment
	for i := range calls {
		if calls[i].HTTPStatus == 200 {
			ok = &calls[i]
		} else {
			failed = &calls[i]
		}
	}
	if ok == nil || failed == nil {
		t.Fatalf("want one 200 and one failed call, got %+v", calls)
	}
	if ok.Name != "EventBridge" || ok.Operation != "PutEvents" || ok.Error || ok.Fault {
		t.Errorf("successful PutEvents subsegment = %+v", *ok)
	}
	if failed.HTTPStatus != 400 || !failed.Error || !failed.Fault || len(failed.Exceptions) == 0 {
		t.Errorf("failed PutEvents subsegment = %+v, want 400 with error, fault and exception", *failed)
	}
	// EventBridge saw our trace, with the call's own subsegment as parent.
	for _, h := range ebHeaders.all() {
		got, err := ParseTraceHeader(h)
		if err != nil || got.Root != traceID || (got.Parent != ok.ID && got.Parent != failed.ID) {
			t.Errorf("EventBridge received X-Amzn-Trace-Id %q (%v), want Root=%s and a PutEvents subsegment as Parent", h, err, traceID)
		}
	}

	l := by[line.ID()]
	if !l.Fault || len(l.Exceptions) != 1 || !strings.Contains(l.Exceptions[0], "push: status 500") {
		t.Errorf("line subsegment = %+v, want fault with the error", l)
	}
	host := strings.TrimPrefix(lineSrv.URL, "http://")
	var remote *xraycollector.Segment
	for _, s := range childrenOf(tr, line.ID()) {
		if s.Name == host {
			remote = &s
		}
	}
	if remote == nil {
		t.Fatalf("no HTTP subsegment %q under line; children %+v", host, childrenOf(tr, line.ID()))
	}
	if remote.Namespace != "remote" || remote.HTTPStatus != 500 || !remote.Fault {
		t.Errorf("HTTP subsegment = %+v, want remote, 500, fault", *remote)
	}
	lh := lineHeaders.all()
	if len(lh) != 1 {
		t.Fatalf("LINE server got %d requests", len(lh))
	}
	if got, err := ParseTraceHeader(lh[0]); err != nil || got.Root != traceID || got.Parent != remote.ID || !got.Sampled {
		t.Errorf("LINE server received X-Amzn-Trace-Id %q, want Root=%s;Parent=%s;Sampled=1", lh[0], traceID, remote.ID)
	}
	if len(tr.Links) != 0 {
		t.Errorf("webhook trace links = %+v, want none", tr.Links)
	}
}

func TestLinkedTraces(t *testing.T) {
	ctx, webhook := StartSegment(context.Background(), "webhook", Header{})
	pctx, publish := StartSubsegment(ctx, "publish")
	upstream, err := ParseTraceHeader(TraceHeader(pctx))
	if err != nil {
		t.Fatalf("TraceHeader: %v", err)
	}
	publish.End(nil)
	webhook.End(nil)

	_, worker := StartSegment(context.Background(), "worker", Header{})
	worker.Link(upstream)
	worker.End(nil)

	if worker.TraceID() == webhook.TraceID() {
		t.Fatal("worker continued the webhook's trace; want a separate, linked trace")
	}
	wt, _ := waitTrace(t, worker.TraceID(), worker.ID())
	want := xraycollector.Link{FromID: worker.ID(), TraceID: webhook.TraceID(), ParentID: publish.ID()}
	if len(wt.Links) != 1 || wt.Links[0] != want {
		t.Fatalf("worker trace links = %+v, want [%+v]", wt.Links, want)
	}
	ht, _ := waitTrace(t, webhook.TraceID(), webhook.ID(), publish.ID())
	if len(ht.Links) != 0 {
		t.Fatalf("webhook trace links = %+v, want none", ht.Links)
	}
}

func TestStartSegmentContinuesParent(t *testing.T) {
	parent := Header{Root: "1-6650a1b2-0123456789abcdef01234567", Parent: "1111222233334444", Sampled: true}
	_, seg := StartSegment(context.Background(), "local-fn", parent)
	seg.End(nil)
	if seg.TraceID() != parent.Root {
		t.Fatalf("TraceID = %q, want %q", seg.TraceID(), parent.Root)
	}
	_, by := waitTrace(t, parent.Root, seg.ID())
	if got := by[seg.ID()]; got.ParentID != parent.Parent || got.Name != "local-fn" {
		t.Fatalf("segment = %+v, want parent %s", got, parent.Parent)
	}

	// An unsampled parent is honoured: nothing is emitted for it. A sampled
	// sentinel sent afterwards on the same socket proves delivery happened.
	unsampled := Header{Root: "1-6650a1b2-fedcba9876543210fedcba98", Parent: "5555666677778888"}
	_, quiet := StartSegment(context.Background(), "quiet", unsampled)
	quiet.End(nil)
	_, sentinel := StartSegment(context.Background(), "sentinel", Header{})
	sentinel.End(nil)
	waitTrace(t, sentinel.TraceID(), sentinel.ID())
	if _, ok := col.Trace(unsampled.Root); ok {
		t.Fatal("unsampled segment was emitted")
	}
}

func TestLambdaFacade(t *testing.T) {
	const hdr = "Root=1-6650a1b2-aaaabbbbccccddddeeeeffff;Parent=9999aaaabbbbcccc;Sampled=1"
	// aws-lambda-go stores the invocation's header under this plain string key.
	//lint:ignore SA1029 this is the plain string key aws-lambda-go uses
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", hdr)
	if got := TraceID(ctx); got != "1-6650a1b2-aaaabbbbccccddddeeeeffff" {
		t.Fatalf("TraceID(lambda ctx) = %q", got)
	}
	if got := TraceHeader(ctx); got != hdr {
		t.Fatalf("TraceHeader(lambda ctx) = %q, want %q", got, hdr)
	}
	sctx, sp := StartSubsegment(ctx, "handle")
	sp.Annotate("records", 3)
	if got := TraceHeader(sctx); got != "Root=1-6650a1b2-aaaabbbbccccddddeeeeffff;Parent="+sp.ID()+";Sampled=1" {
		t.Fatalf("TraceHeader(subsegment) = %q", got)
	}
	sp.End(nil)
	_, by := waitTrace(t, "1-6650a1b2-aaaabbbbccccddddeeeeffff", sp.ID())
	got := by[sp.ID()]
	if got.Type != "subsegment" || got.ParentID != "9999aaaabbbbcccc" || got.Annotations["records"] != float64(3) {
		t.Fatalf("independent subsegment = %+v, want parent = Lambda's facade 9999aaaabbbbcccc", got)
	}
}

func TestTraceIDFromEnv(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-6650a1b2-000011112222333344445555;Parent=9999aaaabbbbcccc;Sampled=1")
	if got := TraceID(context.Background()); got != "1-6650a1b2-000011112222333344445555" {
		t.Fatalf("TraceID from env = %q", got)
	}
	t.Setenv("_X_AMZN_TRACE_ID", "garbage")
	if got := TraceID(context.Background()); got != "" {
		t.Fatalf("TraceID from bad env = %q, want empty", got)
	}
}

func TestPanicRecorded(t *testing.T) {
	ctx, root := StartSegment(context.Background(), "worker", Header{})
	_, sp := StartSubsegment(ctx, "handler")
	func() {
		defer func() {
			if v := recover(); v != nil {
				sp.Panic(v, debug.Stack())
			}
		}()
		panic("boom")
	}()
	sp.End(errors.New("ignored: the span already ended"))
	root.End(nil)
	_, by := waitTrace(t, root.TraceID(), root.ID(), sp.ID())
	got := by[sp.ID()]
	if !got.Fault || len(got.Exceptions) != 1 || got.Exceptions[0] != "panic: boom" {
		t.Fatalf("panicking subsegment = %+v, want one panic exception", got)
	}
}

func TestParseStack(t *testing.T) {
	frames := parseStack(debug.Stack(), maxStackFrames)
	var found bool
	for _, f := range frames {
		if strings.HasSuffix(f.Label, "TestParseStack") && strings.HasSuffix(f.Path, "trace_test.go") && f.Line > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("frames %+v lack TestParseStack in trace_test.go", frames)
	}
	if got := parseStack([]byte("goroutine 1 [running]:\nnot a frame\n"), 32); len(got) != 0 {
		t.Fatalf("garbage parsed as %+v", got)
	}
	if got := parseStack(debug.Stack(), 2); len(got) != 2 {
		t.Fatalf("limit 2 gave %d frames", len(got))
	}
}

func TestNoTraceIsNoOp(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "")
	before := sdkLog.String()
	ctx := context.Background()

	sctx, sp := StartSubsegment(ctx, "orphan")
	if sctx != ctx {
		t.Error("StartSubsegment without a trace changed the context")
	}
	sp.Annotate("k", "v")
	sp.Metadata("k", map[string]int{"a": 1})
	sp.Link(Header{Root: "1-6650a1b2-0123456789abcdef01234567"})
	sp.SetHTTPStatus(500)
	sp.Panic("x", nil)
	sp.End(errors.New("x"))
	var nilSpan *Span
	nilSpan.Annotate("k", 1)
	nilSpan.End(nil)
	if TraceHeader(sctx) != "" || TraceID(sctx) != "" || sp.TraceID() != "" || sp.ID() != "" {
		t.Errorf("no-op span reports a trace: header %q id %q", TraceHeader(sctx), TraceID(sctx))
	}
	checkCallsUntraced(t, ctx, "untraced")
	if after := sdkLog.String(); after != before {
		t.Errorf("SDK logged during untraced calls: %s", strings.TrimPrefix(after, before))
	}
}

func TestAnnotationConversion(t *testing.T) {
	tests := []struct {
		in   any
		want any
	}{
		{"s", "s"}, {true, true}, {int64(7), 7}, {uint8(3), uint(3)}, {float32(1.5), 1.5},
		{int8(-1), -1}, {int16(2), 2}, {int32(3), 3}, {uint16(4), uint(4)}, {uint32(5), uint(5)}, {uint64(6), uint(6)},
		{time.Second, "1s"}, {errors.New("e"), "e"}, {[]int{1}, "[1]"},
	}
	for _, tt := range tests {
		if got := annotationValue(tt.in); got != tt.want {
			t.Errorf("annotationValue(%#v) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
	if got := annotationKey("a-b.c_d9"); got != "a_b_c_d9" {
		t.Errorf("annotationKey = %q", got)
	}
}

func TestSDKDisabled(t *testing.T) {
	t.Setenv("AWS_XRAY_SDK_DISABLED", "true")
	t.Setenv("_X_AMZN_TRACE_ID", "")
	ctx, seg := StartSegment(context.Background(), "webhook", Header{})
	sctx, sp := StartSubsegment(ctx, "publish")
	sp.Annotate("k", 1)
	sp.End(errors.New("x"))
	seg.SetHTTPStatus(500)
	seg.End(nil)
	if TraceHeader(sctx) != "" || TraceID(sctx) != "" || seg.TraceID() != "" {
		t.Fatalf("disabled SDK reports a trace: %q %q", TraceHeader(sctx), TraceID(sctx))
	}
	checkCallsUntraced(t, sctx, "disabled SDK")
}

// checkCallsUntraced makes an HTTP call through HTTPClient and an AWS call
// with ctx: both must succeed and send no trace header. what names the case
// in failures.
func checkCallsUntraced(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	rec := &headerRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rec.record(r) }))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("%s: HTTP call: %v", what, err)
	}
	_ = resp.Body.Close()
	if h := rec.all(); len(h) != 1 || h[0] != "" {
		t.Errorf("%s: HTTP call sent trace headers %q", what, h)
	}
	ebSrv, ebHeaders := fakeEventBridge(t)
	if err := putEvents(ctx, eventBridgeClient(ebSrv.URL), `{"ok":true}`); err != nil {
		t.Fatalf("%s: AWS call: %v", what, err)
	}
	if h := ebHeaders.all(); len(h) != 1 || h[0] != "" {
		t.Errorf("%s: AWS call sent trace headers %q", what, h)
	}
}
