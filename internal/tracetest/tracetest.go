// Package tracetest is the conformance suite of the tracing seam: every
// Backend behind internal/telemetry (the X-Ray SDK, OpenTelemetry) runs the
// same scenarios through the seam's verbs, and each is judged by what the
// local X-Ray daemon stand-in (internal/xraycollector) makes of what arrived
// over UDP. A backend that passes shows the same waterfall, links and
// failures in /_local/traces and the console as the other.
package tracetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/xraycollector"
)

// Backend is what the suite needs of a backend: the seam's contract and the
// instrumentation of AWS SDK clients.
type Backend interface {
	telemetry.Backend
	InstrumentAWS(cfg *aws.Config)
}

// Mode says how the backend under test is built.
type Mode struct {
	// Daemon is the collector's UDP address: every span goes there.
	Daemon string
	// Invocations: the backend records invocations itself (`linegate
	// local`), sampling every new trace. Without it the backend is built as
	// in Lambda, where an invoke's trace header names the invocation.
	Invocations bool
}

// New builds the backend under test for one scenario.
type New func(t *testing.T, m Mode) Backend

// Run runs every scenario against the backends newBackend builds.
func Run(t *testing.T, newBackend New) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, newBackend New)
	}{
		{"EndToEnd", testEndToEnd},
		{"LinkedTraces", testLinkedTraces},
		{"InvocationContinuesParent", testInvocationContinuesParent},
		{"LambdaInvocation", testLambdaInvocation},
		{"PanicRecorded", testPanicRecorded},
		{"NoTraceIsNoOp", testNoTraceIsNoOp},
		{"BackendsKeepTheirOwnSpans", testBackendsKeepTheirOwnSpans},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, newBackend) })
	}
}

// NewCollector starts a collector on a loopback port for one test.
func NewCollector(t *testing.T) *xraycollector.Collector {
	t.Helper()
	c := xraycollector.New()
	if err := c.Listen(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatalf("collector: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start builds a backend sending to a fresh collector, shut down after the
// test.
func start(t *testing.T, newBackend New, invocations bool) (Backend, *xraycollector.Collector) {
	t.Helper()
	c := NewCollector(t)
	b := newBackend(t, Mode{Daemon: c.Addr(), Invocations: invocations})
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	return b, c
}

// WaitUntil waits until c holds trace id and cond holds for it, and returns
// it. UDP delivery is asynchronous, so this waits on the collector's change
// notifications, bounded at 10 s; on time-out it reports what the collector
// had.
func WaitUntil(t *testing.T, c *xraycollector.Collector, id, what string, cond func(xraycollector.Trace) bool) xraycollector.Trace {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changed := c.Changed()
		if tr, ok := c.Trace(id); ok && cond(tr) {
			return tr
		}
		select {
		case <-changed:
		case <-deadline.C:
			tr, _ := c.Trace(id)
			t.Fatalf("timed out waiting for %s in trace %s; it holds %+v", what, id, tr.Segments)
		}
	}
}

// waitFinished waits until trace id holds every segment in ids, finished,
// and returns the trace and its segments by id.
func waitFinished(t *testing.T, c *xraycollector.Collector, id string, ids ...string) (xraycollector.Trace, map[string]xraycollector.Segment) {
	t.Helper()
	tr := WaitUntil(t, c, id, fmt.Sprintf("finished segments %v", ids), func(tr xraycollector.Trace) bool {
		by := segmentByID(tr)
		for _, sid := range ids {
			if s, ok := by[sid]; !ok || s.InProgress {
				return false
			}
		}
		return true
	})
	return tr, segmentByID(tr)
}

func segmentByID(tr xraycollector.Trace) map[string]xraycollector.Segment {
	m := make(map[string]xraycollector.Segment, len(tr.Segments))
	for _, s := range tr.Segments {
		m[s.ID] = s
	}
	return m
}

func childrenOf(tr xraycollector.Trace, id string) []xraycollector.Segment {
	var out []xraycollector.Segment
	for _, s := range tr.Segments {
		if s.ParentID == id {
			out = append(out, s)
		}
	}
	return out
}

// headerRecorder is an httptest handler's record of X-Amzn-Trace-Id values.
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

// eventBridgeClient is an EventBridge client at endpoint, instrumented by b.
func eventBridgeClient(b Backend, endpoint string) *eventbridge.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "not-a-secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	b.InstrumentAWS(&cfg)
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func putEvents(ctx context.Context, c *eventbridge.Client, detail string) error {
	_, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("line.webhook"), DetailType: aws.String("message"), Detail: aws.String(detail),
	}}})
	return err
}

// An invocation with an annotated span, two PutEvents calls (one refused)
// and a failed LINE call: the waterfall, the calls' namespaces, statuses,
// faults and exceptions, and the trace headers the services received.
func testEndToEnd(t *testing.T, newBackend New) {
	b, col := start(t, newBackend, true)
	ebSrv, ebHeaders := fakeEventBridge(t)
	eb := eventBridgeClient(b, ebSrv.URL)
	lineHeaders := &headerRecorder{}
	lineSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lineHeaders.record(r)
		http.Error(w, `{"message":"boom"}`, http.StatusInternalServerError)
	}))
	defer lineSrv.Close()
	httpc := telemetry.HTTPClient(&http.Client{Timeout: 5 * time.Second})

	ctx, root := telemetry.StartInvocation(telemetry.WithBackend(context.Background(), b), "webhook")
	root.Annotate("events", 2)

	_, verify := telemetry.Start(ctx, "verify")
	verify.Annotate("signature-valid", true) // '-' becomes '_'
	verify.End(nil)

	pctx, publish := telemetry.Start(ctx, "publish")
	downstream := telemetry.TraceHeader(pctx)
	if err := putEvents(pctx, eb, `{"ok":true}`); err != nil {
		t.Fatalf("PutEvents ok: %v", err)
	}
	if err := putEvents(pctx, eb, `{"fail":true}`); err == nil {
		t.Fatal("PutEvents fail: want an error from the 400")
	}
	publish.End(nil)

	lctx, line := telemetry.Start(ctx, "line")
	req, _ := http.NewRequestWithContext(lctx, http.MethodPost, lineSrv.URL+"/v2/bot/message/push?x=1", strings.NewReader("{}"))
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
	if !telemetry.IsTraceID(traceID) {
		t.Fatalf("sampled invocation has trace id %q, not an X-Ray one", traceID)
	}
	if want := "Root=" + traceID + ";Parent=" + publish.ID() + ";Sampled=1"; downstream != want {
		t.Errorf("TraceHeader under publish = %q, want %q", downstream, want)
	}
	_, by := waitFinished(t, col, traceID, root.ID(), verify.ID(), publish.ID(), line.ID())
	tr := WaitUntil(t, col, traceID, "the AWS and HTTP calls", func(tr xraycollector.Trace) bool {
		n := 0
		for _, s := range tr.Segments {
			if s.Namespace != "" && !s.InProgress {
				n++
			}
		}
		return n >= 3
	})

	r := by[root.ID()]
	if r.Name != "webhook" || r.ParentID != "" || r.Type != "segment" || r.Error || r.Fault || r.HTTPStatus != 200 {
		t.Errorf("root segment = %+v", r)
	}
	if got := r.Annotations["events"]; got != float64(2) {
		t.Errorf("root annotation events = %v, want 2", got)
	}
	v := by[verify.ID()]
	if v.ParentID != root.ID() || v.Type != "subsegment" || v.Annotations["signature_valid"] != true || v.Fault {
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
	if h := ebHeaders.all(); len(h) != 2 {
		t.Errorf("EventBridge got %d requests, want 2", len(h))
	}
	for _, h := range ebHeaders.all() {
		got, err := telemetry.ParseTraceHeader(h)
		if err != nil || got.Root != traceID || (got.Parent != ok.ID && got.Parent != failed.ID) || !got.Sampled {
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
	if remote.Namespace != "remote" || remote.HTTPStatus != 500 || !remote.Fault || remote.Method != http.MethodPost ||
		remote.Path != "/v2/bot/message/push" {
		t.Errorf("HTTP subsegment = %+v, want remote POST /v2/bot/message/push, 500, fault", *remote)
	}
	lh := lineHeaders.all()
	if len(lh) != 1 {
		t.Fatalf("LINE server got %d requests", len(lh))
	}
	if got, err := telemetry.ParseTraceHeader(lh[0]); err != nil || got.Root != traceID || got.Parent != remote.ID || !got.Sampled {
		t.Errorf("LINE server received X-Amzn-Trace-Id %q, want Root=%s;Parent=%s;Sampled=1", lh[0], traceID, remote.ID)
	}
	if req.Header.Get("X-Amzn-Trace-Id") != "" {
		t.Error("the caller's request was modified: it carries the trace header")
	}
	if len(tr.Links) != 0 {
		t.Errorf("webhook trace links = %+v, want none", tr.Links)
	}
}

// A worker invocation linked to the webhook's PutEvents call: two traces,
// the worker's carrying one link to the call.
func testLinkedTraces(t *testing.T, newBackend New) {
	b, col := start(t, newBackend, true)
	bctx := telemetry.WithBackend(context.Background(), b)
	ctx, webhook := telemetry.StartInvocation(bctx, "webhook")
	pctx, publish := telemetry.Start(ctx, "publish")
	upstream, err := telemetry.ParseTraceHeader(telemetry.TraceHeader(pctx))
	if err != nil {
		t.Fatalf("TraceHeader: %v", err)
	}
	publish.End(nil)
	webhook.End(nil)

	wctx, worker := telemetry.StartInvocation(bctx, "worker")
	_, record := telemetry.Start(wctx, "record")
	record.Link(upstream)
	record.End(nil)
	worker.End(nil)

	if worker.TraceID() == webhook.TraceID() || worker.TraceID() == "" {
		t.Fatalf("worker trace %q, webhook trace %q: want a separate, linked trace", worker.TraceID(), webhook.TraceID())
	}
	wt, by := waitFinished(t, col, worker.TraceID(), worker.ID(), record.ID())
	want := xraycollector.Link{FromID: record.ID(), TraceID: webhook.TraceID(), ParentID: publish.ID()}
	if len(wt.Links) != 1 || wt.Links[0] != want {
		t.Fatalf("worker trace links = %+v, want [%+v]", wt.Links, want)
	}
	if got := by[record.ID()].Annotations[telemetry.AnnotationUpstreamTraceID]; got != webhook.TraceID() {
		t.Errorf("record annotation %s = %v, want %s", telemetry.AnnotationUpstreamTraceID, got, webhook.TraceID())
	}
	ht, _ := waitFinished(t, col, webhook.TraceID(), webhook.ID(), publish.ID())
	if len(ht.Links) != 0 {
		t.Fatalf("webhook trace links = %+v, want none", ht.Links)
	}
}

// An invocation under an upstream header continues that trace under its
// sampling decision: a sampled one is recorded below the upstream span, an
// unsampled one not at all.
func testInvocationContinuesParent(t *testing.T, newBackend New) {
	b, col := start(t, newBackend, true)
	bctx := telemetry.WithBackend(context.Background(), b)
	parent := telemetry.Header{Root: "1-6650a1b2-0123456789abcdef01234567", Parent: "1111222233334444", Sampled: true}
	_, seg := telemetry.StartInvocation(telemetry.WithInvokeHeader(bctx, parent), "local-fn")
	seg.End(nil)
	if seg.TraceID() != parent.Root {
		t.Fatalf("TraceID = %q, want %q", seg.TraceID(), parent.Root)
	}
	_, by := waitFinished(t, col, parent.Root, seg.ID())
	if got := by[seg.ID()]; got.ParentID != parent.Parent || got.Name != "local-fn" || got.Type != "segment" {
		t.Fatalf("segment = %+v, want a segment under %s", got, parent.Parent)
	}

	// An unsampled parent is honoured: nothing is emitted for it. A sampled
	// sentinel sent afterwards to the same collector proves delivery
	// happened.
	unsampled := telemetry.Header{Root: "1-6650a1b2-fedcba9876543210fedcba98", Parent: "5555666677778888"}
	qctx, quiet := telemetry.StartInvocation(telemetry.WithInvokeHeader(bctx, unsampled), "quiet")
	if h := telemetry.TraceHeader(qctx); h != "" {
		if got, err := telemetry.ParseTraceHeader(h); err != nil || got.Root != unsampled.Root || got.Sampled {
			t.Errorf("TraceHeader under an unsampled invocation = %q, want its trace, unsampled", h)
		}
	}
	quiet.End(nil)
	_, sentinel := telemetry.StartInvocation(bctx, "sentinel")
	sentinel.End(nil)
	waitFinished(t, col, sentinel.TraceID(), sentinel.ID())
	if _, ok := col.Trace(unsampled.Root); ok {
		t.Fatal("an unsampled invocation was emitted")
	}
}

// In Lambda the invoke's trace header, in its context, names the
// invocation: ids and downstream headers come from it, and a span started
// with it hangs under Lambda's own segment (the header's Parent).
func testLambdaInvocation(t *testing.T, newBackend New) {
	b, col := start(t, newBackend, false)
	const root = "1-6650a1b2-aaaabbbbccccddddeeeeffff"
	invoke := telemetry.Header{Root: root, Parent: "9999aaaabbbbcccc", Sampled: true}
	ctx := telemetry.WithInvokeHeader(telemetry.WithBackend(context.Background(), b), invoke)
	if got := telemetry.TraceID(ctx); got != root {
		t.Fatalf("TraceID(invoke ctx) = %q", got)
	}
	if got := telemetry.TraceHeader(ctx); got != invoke.String() {
		t.Fatalf("TraceHeader(invoke ctx) = %q, want %q", got, invoke.String())
	}
	ictx, inv := telemetry.StartInvocation(ctx, "fn")
	sctx, sp := telemetry.Start(ictx, "handle")
	sp.Annotate("records", 3)
	if got := telemetry.TraceHeader(sctx); got != "Root="+root+";Parent="+sp.ID()+";Sampled=1" {
		t.Fatalf("TraceHeader(span) = %q", got)
	}
	sp.End(nil)
	inv.End(nil)
	// Under the X-Ray SDK Lambda's facade is the invocation (no span of
	// ours); under OpenTelemetry the invocation is a span under Lambda's.
	parent := invoke.Parent
	if inv.ID() != "" {
		parent = inv.ID()
		_, by := waitFinished(t, col, root, inv.ID())
		if got := by[inv.ID()]; got.ParentID != invoke.Parent || got.Type != "segment" || got.Name != "fn" {
			t.Fatalf("invocation span = %+v, want a segment under Lambda's %s", got, invoke.Parent)
		}
	}
	_, by := waitFinished(t, col, root, sp.ID())
	got := by[sp.ID()]
	if got.Type != "subsegment" || got.ParentID != parent || got.Annotations["records"] != float64(3) {
		t.Fatalf("span = %+v, want a subsegment under %s", got, parent)
	}
}

// A recovered panic is the span's fault, with a "panic" exception.
func testPanicRecorded(t *testing.T, newBackend New) {
	b, col := start(t, newBackend, true)
	ctx, root := telemetry.StartInvocation(telemetry.WithBackend(context.Background(), b), "worker")
	_, sp := telemetry.Start(ctx, "handler")
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
	_, by := waitFinished(t, col, root.TraceID(), root.ID(), sp.ID())
	got := by[sp.ID()]
	if !got.Fault || len(got.Exceptions) != 1 || got.Exceptions[0] != "panic: boom" {
		t.Fatalf("panicking subsegment = %+v, want one panic exception", got)
	}
	if r := by[root.ID()]; r.Fault {
		t.Errorf("the invocation is a fault too: %+v", r)
	}
}

// Without a trace in the context nothing is recorded and the calls go out
// untouched.
func testNoTraceIsNoOp(t *testing.T, newBackend New) {
	b, _ := start(t, newBackend, false)
	ctx := telemetry.WithBackend(context.Background(), b)
	sctx, sp := telemetry.Start(ctx, "orphan")
	if sctx != ctx {
		t.Error("Start without a trace changed the context")
	}
	sp.Annotate("k", "v")
	sp.End(errors.New("x"))
	if telemetry.TraceHeader(sctx) != "" || telemetry.TraceID(sctx) != "" || sp.ID() != "" {
		t.Errorf("no-op span reports a trace: header %q id %q", telemetry.TraceHeader(sctx), telemetry.TraceID(sctx))
	}
	CheckCallsUntraced(t, b, sctx, "untraced")
}

// CheckCallsUntraced makes an HTTP call through telemetry.HTTPClient and an
// AWS call instrumented by b, with ctx: both must succeed and send no trace
// header. what names the case in failures.
func CheckCallsUntraced(t *testing.T, b Backend, ctx context.Context, what string) {
	t.Helper()
	rec := &headerRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rec.record(r) }))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := telemetry.HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("%s: HTTP call: %v", what, err)
	}
	_ = resp.Body.Close()
	if h := rec.all(); len(h) != 1 || h[0] != "" {
		t.Errorf("%s: HTTP call sent trace headers %q", what, h)
	}
	ebSrv, ebHeaders := fakeEventBridge(t)
	if err := putEvents(ctx, eventBridgeClient(b, ebSrv.URL), `{"ok":true}`); err != nil {
		t.Fatalf("%s: AWS call: %v", what, err)
	}
	if h := ebHeaders.all(); len(h) != 1 || h[0] != "" {
		t.Errorf("%s: AWS call sent trace headers %q", what, h)
	}
}

// Two backends carried by contexts and a third as the process default, used
// at the same time: every span, with its AWS and HTTP calls, reaches the
// collector of the backend of the context it began in and no other.
func testBackendsKeepTheirOwnSpans(t *testing.T, newBackend New) {
	ebSrv, _ := fakeEventBridge(t)
	lineSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer lineSrv.Close()
	httpc := telemetry.HTTPClient(nil)

	type run struct {
		name     string
		col      *xraycollector.Collector
		ctx      context.Context
		eb       *eventbridge.Client
		seg, sub *telemetry.Span
	}
	var runs []*run
	for _, name := range []string{"default", "backend-a", "backend-b"} {
		b, c := start(t, newBackend, true)
		r := &run{name: name, col: c, ctx: telemetry.WithBackend(context.Background(), b), eb: eventBridgeClient(b, ebSrv.URL)}
		if name == "default" {
			telemetry.SetDefault(b)
			t.Cleanup(func() { telemetry.SetDefault(nil) })
			r.ctx = context.Background()
		}
		runs = append(runs, r)
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, seg := telemetry.StartInvocation(r.ctx, r.name)
			sctx, sub := telemetry.Start(ctx, "publish")
			if err := putEvents(sctx, r.eb, `{"ok":true}`); err != nil {
				t.Errorf("%s: PutEvents: %v", r.name, err)
			}
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, lineSrv.URL, nil)
			if resp, err := httpc.Do(req); err != nil {
				t.Errorf("%s: HTTP call: %v", r.name, err)
			} else {
				_ = resp.Body.Close()
			}
			sub.End(nil)
			seg.End(nil)
			r.seg, r.sub = seg, sub
		}()
	}
	wg.Wait()

	for _, r := range runs {
		if r.seg.TraceID() == "" {
			t.Fatalf("%s: invocation was not sampled", r.name)
		}
		WaitUntil(t, r.col, r.seg.TraceID(), r.name+": invocation, publish, its AWS call and its HTTP call", func(tr xraycollector.Trace) bool {
			by := segmentByID(tr)
			var aws, remote bool
			for _, s := range childrenOf(tr, r.sub.ID()) {
				aws = aws || s.Namespace == "aws" && s.Operation == "PutEvents" && !s.InProgress
				remote = remote || s.Namespace == "remote" && !s.InProgress
			}
			return by[r.seg.ID()].Name == r.name && !by[r.seg.ID()].InProgress && by[r.sub.ID()].Name == "publish" && aws && remote
		})
	}
	// Every trace has arrived where it belongs; none may be anywhere else.
	for _, r := range runs {
		for _, other := range runs {
			if other == r {
				continue
			}
			if _, ok := other.col.Trace(r.seg.TraceID()); ok {
				t.Errorf("%s's trace %s also reached the collector of %s", r.name, r.seg.TraceID(), other.name)
			}
		}
	}
}
