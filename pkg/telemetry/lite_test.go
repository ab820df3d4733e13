//go:build xraylite

package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/telemetry/collector"
)

// lambdaCtx returns a context carrying hdr the way aws-lambda-go does.
func lambdaCtx(hdr string) context.Context {
	//lint:ignore SA1029 this is the plain string key aws-lambda-go uses
	return context.WithValue(context.Background(), "x-amzn-trace-id", hdr)
}

// TestLiteLambdaCalls is the webhook's shape in Lambda: subsegments under
// the facade, an instrumented AWS client and a traced HTTP client, all
// received by the real collector with the right parents and flags.
func TestLiteLambdaCalls(t *testing.T) {
	const root, facade = "1-6650a1b2-0000aaaa1111bbbb2222cccc", "9999aaaabbbbcccc"
	ebSrv, ebHeaders := fakeEventBridge(t)
	eb := eventBridgeClient(ebSrv.URL)
	lineHeaders := &headerRecorder{}
	lineSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lineHeaders.record(r)
		if r.URL.Query().Get("token") != "" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer lineSrv.Close()
	httpc := HTTPClient(&http.Client{Timeout: 5 * time.Second})

	ctx := lambdaCtx("Root=" + root + ";Parent=" + facade + ";Sampled=1")
	hctx, handle := StartSubsegment(ctx, "handle")
	handle.Annotate("events", 1)
	pctx, publish := StartSubsegment(hctx, "publish")
	if err := putEvents(pctx, eb, `{"ok":true}`); err != nil {
		t.Fatalf("PutEvents ok: %v", err)
	}
	if err := putEvents(pctx, eb, `{"fail":true}`); err == nil {
		t.Fatal("PutEvents fail: want an error from the 400")
	}
	req, _ := http.NewRequestWithContext(pctx, http.MethodPost, lineSrv.URL+"/v2/bot/message/push?token=secret-value", strings.NewReader("{}"))
	req.Header.Set("X-Custom", "kept")
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("HTTP call: %v", err)
	}
	_ = resp.Body.Close()
	if req.Header.Get("X-Amzn-Trace-Id") != "" {
		t.Error("HTTPClient modified the caller's request")
	}
	publish.End(nil)
	handle.End(errors.New("handler failed"))

	if handle.TraceID() != root || publish.TraceID() != root {
		t.Fatalf("trace ids %q %q, want the header's root %s", handle.TraceID(), publish.TraceID(), root)
	}
	tr, by := waitTrace(t, root, handle.ID(), publish.ID())
	h := by[handle.ID()]
	if h.Type != "subsegment" || h.ParentID != facade || h.Annotations["events"] != float64(1) ||
		!h.Fault || len(h.Exceptions) != 1 || h.Exceptions[0] != "errors.errorString: handler failed" {
		t.Errorf("handle = %+v, want an independent subsegment of the facade %s with the error", h, facade)
	}
	if p := by[publish.ID()]; p.Type != "subsegment" || p.ParentID != handle.ID() || p.Fault {
		t.Errorf("publish = %+v, want a subsegment of handle %s", p, handle.ID())
	}

	// Wait until the three call subsegments under publish have arrived too.
	var calls []collector.Segment
	var remote *collector.Segment
	for deadline := time.Now().Add(10 * time.Second); ; {
		calls, remote = nil, nil
		changed := col.Changed()
		tr, _ = col.Trace(root)
		for _, s := range childrenOf(tr, publish.ID()) {
			switch s.Namespace {
			case "aws":
				calls = append(calls, s)
			case "remote":
				remote = &s
			}
		}
		if len(calls) == 2 && remote != nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
		}
	}
	if len(calls) != 2 || remote == nil {
		t.Fatalf("children of publish: aws %+v, remote %+v; want 2 and 1", calls, remote)
	}
	var ok, failed collector.Segment
	for _, c := range calls {
		if c.HTTPStatus == 200 {
			ok = c
		} else {
			failed = c
		}
	}
	if ok.Name != "EventBridge" || ok.Operation != "PutEvents" || ok.Type != "subsegment" || ok.Error || ok.Fault {
		t.Errorf("successful PutEvents = %+v", ok)
	}
	if failed.Name != "EventBridge" || failed.HTTPStatus != 400 || !failed.Error || !failed.Fault || len(failed.Exceptions) != 1 {
		t.Errorf("failed PutEvents = %+v, want 400 with error, fault and one exception", failed)
	}
	var gotParents []string
	for _, hv := range ebHeaders.all() {
		got, err := ParseTraceHeader(hv)
		if err != nil || got.Root != root || !got.Sampled {
			t.Errorf("EventBridge received X-Amzn-Trace-Id %q (%v)", hv, err)
		}
		gotParents = append(gotParents, got.Parent)
	}
	if len(gotParents) != 2 || !(gotParents[0] == ok.ID && gotParents[1] == failed.ID) {
		t.Errorf("EventBridge header parents %v, want [%s %s] (each call's own subsegment)", gotParents, ok.ID, failed.ID)
	}

	host := strings.TrimPrefix(lineSrv.URL, "http://")
	if remote.Name != host || remote.HTTPStatus != 429 || !remote.Error || !remote.Throttle || remote.Fault {
		t.Errorf("HTTP subsegment = %+v, want %s, 429, error+throttle", *remote, host)
	}
	lh := lineHeaders.all()
	if len(lh) != 1 {
		t.Fatalf("LINE server got %d requests", len(lh))
	}
	if want := "Root=" + root + ";Parent=" + remote.ID + ";Sampled=1"; lh[0] != want {
		t.Errorf("LINE server received X-Amzn-Trace-Id %q, want %q", lh[0], want)
	}
}

// TestLiteDocumentGolden pins the segment documents the lite tracer writes:
// an AWS call subsegment and a root segment, with ids and times normalised.
func TestLiteDocumentGolden(t *testing.T) {
	_, seg := StartSegment(context.Background(), "webhook", Header{Root: "1-6650a1b2-0123456789abcdef01234567", Parent: "1111222233334444", Sampled: true})
	seg.Annotate("events", 2)
	seg.Annotate("bad key!", true)
	seg.Metadata("batch", map[string]int{"size": 3})
	seg.SetHTTPStatus(http.StatusOK)
	ctx := context.WithValue(context.Background(), spanKey{}, seg)
	_, call := StartAWSCall(ctx, "EventBridge", "PutEvents", "ap-northeast-1")
	call.setResponse(42, "req-1")
	call.SetHTTPStatus(http.StatusServiceUnavailable)
	_, remote := StartSubsegment(ctx, "api.line.me")
	remote.setRemote(http.MethodPost, redactURL(mustURL(t, "https://user:pw@api.line.me/v2/bot/message/push?x=1#f")))

	docs := map[string]*segmentDoc{}
	for name, s := range map[string]*Span{"segment": seg, "aws_call": call, "remote": remote} {
		s.mu.Lock()
		d := s.documentLocked(s.start.Add(time.Second))
		s.mu.Unlock()
		if !isHex(d.ID, 16) || !validTraceID(d.TraceID) || d.Name == "" || d.EndTime-d.StartTime < 0.999 || d.EndTime-d.StartTime > 1.001 {
			t.Errorf("%s: required fields wrong: %+v", name, d)
		}
		if s.subsegment && (d.Type != "subsegment" || d.ParentID != seg.ID()) {
			t.Errorf("%s: type %q parent %q, want an independent subsegment of %s", name, d.Type, d.ParentID, seg.ID())
		}
		d.ID, d.StartTime, d.EndTime = "ID", 1, 2
		if d.ParentID == seg.ID() {
			d.ParentID = "SEGMENT_ID"
		}
		docs[name] = d
	}
	got, err := json.MarshalIndent(docs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "lite_documents.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -tags xraylite -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("documents differ from %s:\n%s", golden, got)
	}
	seg.End(nil)
	call.End(nil)
	remote.End(nil)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestLiteUnsampled checks that an unsampled Lambda invocation emits nothing
// yet still propagates its decision downstream.
func TestLiteUnsampled(t *testing.T) {
	const root = "1-6650a1b2-0000dddd1111eeee2222ffff"
	rec := &headerRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rec.record(r) }))
	defer srv.Close()

	sent := tracer.sent.Load()
	ctx := lambdaCtx("Root=" + root + ";Parent=9999aaaabbbbcccc;Sampled=0")
	sctx, sp := StartSubsegment(ctx, "handle")
	sp.Annotate("k", 1)
	if got, want := TraceHeader(sctx), "Root="+root+";Parent="+sp.ID()+";Sampled=0"; got != want {
		t.Errorf("TraceHeader = %q, want %q", got, want)
	}
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL, nil)
	resp, err := HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("HTTP call: %v", err)
	}
	_ = resp.Body.Close()
	sp.End(errors.New("x"))
	if got := tracer.sent.Load(); got != sent {
		t.Errorf("unsampled spans sent %d documents", got-sent)
	}
	if h := rec.all(); len(h) != 1 || !strings.HasPrefix(h[0], "Root="+root+";Parent=") || !strings.HasSuffix(h[0], ";Sampled=0") {
		t.Errorf("downstream header %q, want the unsampled decision propagated", h)
	}

	// A facade header without Parent cannot anchor an independent subsegment.
	_, orphan := StartSubsegment(lambdaCtx("Root="+root+";Sampled=1"), "orphan")
	orphan.End(nil)
	if got := tracer.sent.Load(); got != sent {
		t.Errorf("subsegment without a parent id was sent")
	}
	if _, ok := col.Trace(root); ok {
		t.Error("collector holds the unsampled trace")
	}
}

// TestLiteSegmentEndsOnCancel checks that a segment is emitted when its
// context is cancelled, like the SDK's, and only once.
func TestLiteSegmentEndsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, seg := StartSegment(ctx, "cancelled", Header{})
	cancel()
	_, by := waitTrace(t, seg.TraceID(), seg.ID())
	if by[seg.ID()].Name != "cancelled" {
		t.Fatalf("segment = %+v", by[seg.ID()])
	}
	seg.mu.Lock()
	ended := seg.ended
	seg.mu.Unlock()
	if !ended {
		t.Fatal("segment not marked ended")
	}
}

// TestLiteConcurrent ends many subsegments, annotated from several
// goroutines, under one segment; run with -race.
func TestLiteConcurrent(t *testing.T) {
	ctx, seg := StartSegment(context.Background(), "fanout", Header{})
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, sp := StartSubsegment(ctx, fmt.Sprintf("part-%d", i))
			ids[i] = sp.ID()
			var inner sync.WaitGroup
			inner.Add(2)
			go func() { defer inner.Done(); sp.Annotate("i", i); _ = TraceHeader(c) }()
			go func() { defer inner.Done(); sp.Metadata("m", i); seg.Annotate(fmt.Sprintf("k%d", i), i) }()
			inner.Wait()
			sp.End(nil)
			sp.End(errors.New("second End is ignored"))
		}()
	}
	wg.Wait()
	seg.End(nil)
	_, by := waitTrace(t, seg.TraceID(), append(ids, seg.ID())...)
	for i, id := range ids {
		if s := by[id]; s.ParentID != seg.ID() || s.Annotations["i"] != float64(i) || s.Fault {
			t.Errorf("part %d = %+v", i, s)
		}
	}
	if got := len(by[seg.ID()].Annotations); got != n {
		t.Errorf("segment has %d annotations, want %d", got, n)
	}
}

// TestLiteOversizeDocument checks that metadata too large for one datagram is
// dropped rather than the whole segment.
func TestLiteOversizeDocument(t *testing.T) {
	_, seg := StartSegment(context.Background(), "big", Header{})
	seg.Metadata("blob", strings.Repeat("x", maxDatagram))
	seg.Annotate("kept", true)
	seg.End(nil)
	_, by := waitTrace(t, seg.TraceID(), seg.ID())
	if by[seg.ID()].Annotations["kept"] != true {
		t.Fatalf("segment = %+v, want it sent without the metadata", by[seg.ID()])
	}
	if _, err := encodeDatagram(&segmentDoc{ID: "a", Name: strings.Repeat("n", maxDatagram)}); err == nil {
		t.Fatal("a document that cannot shrink under the limit was accepted")
	}
}

// TestLiteConfigure checks the daemon address rules and the service version.
func TestLiteConfigure(t *testing.T) {
	t.Cleanup(func() {
		if err := Configure(WithDaemonAddress(col.Addr()), WithSampleAll()); err != nil {
			t.Fatal(err)
		}
	})
	if err := Configure(WithDaemonAddress("no-port")); err == nil {
		t.Fatal("Configure accepted an address without a port")
	}
	// Without an explicit address the environment's udp address is used.
	t.Setenv(daemonAddressEnv, "tcp:127.0.0.1:2000 udp:"+col.Addr())
	if err := Configure(WithSampleAll(), WithServiceVersion("1.2.3")); err != nil {
		t.Fatal(err)
	}
	_, seg := StartSegment(context.Background(), "from-env", Header{})
	seg.End(nil)
	waitTrace(t, seg.TraceID(), seg.ID())
	seg.mu.Lock()
	d := seg.documentLocked(time.Now())
	seg.mu.Unlock()
	if d.Service == nil || d.Service.Version != "1.2.3" {
		t.Errorf("service = %+v, want version 1.2.3", d.Service)
	}
}

func TestSampler(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name string
		at   []time.Duration // start times after base
		rand float64
		want []bool
	}{
		{"reservoir then rate miss", []time.Duration{0, 100 * time.Millisecond, 900 * time.Millisecond}, 0.5, []bool{true, false, false}},
		{"reservoir then rate hit", []time.Duration{0, 100 * time.Millisecond}, 0.01, []bool{true, true}},
		{"reservoir refills each second", []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}, 0.99, []bool{true, false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSampler(func() float64 { return tt.rand })
			for i, d := range tt.at {
				if got := s.sample(base.Add(d)); got != tt.want[i] {
					t.Errorf("trace %d at +%v sampled = %v, want %v", i, d, got, tt.want[i])
				}
			}
		})
	}
}

func TestParseDaemonAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "127.0.0.1:2000", false},
		{"169.254.79.129:2000", "169.254.79.129:2000", false},
		{"tcp:127.0.0.1:2000 udp:127.0.0.2:2001", "127.0.0.2:2001", false},
		{"udp:127.0.0.2:2001 tcp:127.0.0.1:2000", "127.0.0.2:2001", false},
		{"[::1]:2000", "[::1]:2000", false},
		{":2000", "127.0.0.1:2000", false},
		{"localhost", "", true},
		{"127.0.0.1:0", "", true},
		{"127.0.0.1:70000", "", true},
		{"tcp:127.0.0.1:2000 tcp:127.0.0.1:2001", "", true},
		{"http:1.2.3.4:1 udp:1.2.3.4:2", "", true},
		{"a b c", "", true},
	}
	for _, tt := range tests {
		got, err := parseDaemonAddress(tt.in)
		if tt.wantErr {
			if !errors.Is(err, errDaemonAddress) {
				t.Errorf("parseDaemonAddress(%q) = %q, %v; want errDaemonAddress", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseDaemonAddress(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseDaemonAddress checks that any AWS_XRAY_DAEMON_ADDRESS value either
// fails with errDaemonAddress or yields a host:port that parses again to
// itself.
func FuzzParseDaemonAddress(f *testing.F) {
	f.Add("tcp:127.0.0.1:2000 udp:127.0.0.1:2000")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseDaemonAddress(s)
		if err != nil {
			if !errors.Is(err, errDaemonAddress) {
				t.Fatalf("error %v does not wrap errDaemonAddress", err)
			}
			return
		}
		again, err := parseDaemonAddress(got)
		if err != nil || again != got {
			t.Fatalf("%q -> %q -> %q, %v", s, got, again, err)
		}
	})
}
