package otelxray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/telemetry"
	tracesuite "github.com/linegate/linegate/internal/tracetest"
)

// newBackend builds the OpenTelemetry backend the conformance suite asks
// for: OTLP datagrams to the suite's collector, every new trace sampled
// when the backend records invocations itself.
func newBackend(t *testing.T, m tracesuite.Mode) tracesuite.Backend {
	t.Helper()
	opts := []Option{WithDaemonAddress(m.Daemon), WithService("linegate-test", "ap-northeast-1", "$LATEST")}
	if m.Invocations {
		opts = append(opts, WithSampleAll())
	}
	b, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// The same scenarios as the X-Ray SDK, judged by the same collector: the
// OTLP datagrams make the same waterfall.
func TestConformance(t *testing.T) {
	tracesuite.Run(t, newBackend)
}

// seqReader yields 0x01, 0x02, ... : a deterministic randomness source.
type seqReader struct{ n byte }

func (r *seqReader) Read(p []byte) (int, error) {
	for i := range p {
		r.n++
		p[i] = r.n
	}
	return len(p), nil
}

// zeroThenSeq yields zeros first, then a sequence: ids must skip invalid
// all-zero draws.
type zeroThenSeq struct {
	zeros int
	seq   seqReader
}

func (r *zeroThenSeq) Read(p []byte) (int, error) {
	if r.zeros > 0 {
		r.zeros--
		clear(p)
		return len(p), nil
	}
	return r.seq.Read(p)
}

// pieces is the golden record of the small AWS pieces: the ids the
// generator mints, the header the propagator writes, the parent and the
// link read from headers.
type pieces struct {
	TraceID       string `json:"traceId"`
	TraceIDHex    string `json:"traceIdHex"`
	SpanID        string `json:"spanId"`
	Injected      string `json:"injected"`
	InvokeParent  string `json:"invokeParent"`
	InvokeRemote  bool   `json:"invokeParentRemote"`
	InvokeSampled bool   `json:"invokeParentSampled"`
	SQSLink       string `json:"sqsLink"`
}

func TestAWSPiecesGolden(t *testing.T) {
	now := func() time.Time { return time.Unix(0x6650a1b2, 0) }
	g := NewIDGenerator(now, &seqReader{})
	tid, sid := g.NewIDs(context.Background())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	carrier := propagation.MapCarrier{}
	Propagator{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)

	invoke := telemetry.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Parent: "53995c3f42cd8ad8", Sampled: true}
	parent, ok := InvokeParent(telemetry.WithInvokeHeader(context.Background(), invoke))
	if !ok {
		t.Fatal("no parent from the invoke's header")
	}
	link, ok := SQSLink(map[string]string{"AWSTraceHeader": "Root=1-6650a1b0-fedcba9876543210fedcba98;Parent=0102030405060708;Sampled=1",
		"ApproximateReceiveCount": "1"})
	if !ok {
		t.Fatal("no link from AWSTraceHeader")
	}
	got := pieces{
		TraceID: telemetry.FormatTraceID(tid), TraceIDHex: tid.String(), SpanID: sid.String(), Injected: carrier.Get("X-Amzn-Trace-Id"),
		InvokeParent: parent.TraceID().String() + "/" + parent.SpanID().String(), InvokeRemote: parent.IsRemote(), InvokeSampled: parent.IsSampled(),
		SQSLink: link.SpanContext.TraceID().String() + "/" + link.SpanContext.SpanID().String(),
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/aws_pieces.golden.json", append(b, '\n'))
	// What the golden file says, by the documented formats: the trace id is
	// "1-" + the epoch seconds in 8 hex digits + 24 hex digits, the header
	// Root;Parent;Sampled.
	if !strings.HasPrefix(got.TraceID, "1-6650a1b2-") || !telemetry.IsTraceID(got.TraceID) ||
		got.Injected != "Root="+got.TraceID+";Parent="+got.SpanID+";Sampled=1" {
		t.Errorf("pieces %+v do not follow the documented formats", got)
	}
	if got.InvokeParent != "5759e988bd862e3fe1be46a994272793/53995c3f42cd8ad8" || !got.InvokeRemote || !got.InvokeSampled {
		t.Errorf("invoke parent %q remote %v sampled %v", got.InvokeParent, got.InvokeRemote, got.InvokeSampled)
	}
}

func TestIDGeneratorSkipsInvalidIDs(t *testing.T) {
	g := NewIDGenerator(func() time.Time { return time.Unix(0x6650a1b2, 0) }, &zeroThenSeq{zeros: 3})
	tid, sid := g.NewIDs(context.Background())
	if !tid.IsValid() || !sid.IsValid() || [12]byte(tid[4:]) == ([12]byte{}) {
		t.Fatalf("ids %s %s from a source that yields zeros first", tid, sid)
	}
	// The default generator: now and crypto/rand, safe for concurrent use.
	d := NewIDGenerator(nil, nil)
	var wg sync.WaitGroup
	seen := sync.Map{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				tid, _ := d.NewIDs(context.Background())
				if _, dup := seen.LoadOrStore(tid, true); dup {
					t.Errorf("trace id %s minted twice", tid)
				}
				if age := time.Since(time.Unix(int64(uint32(tid[0])<<24|uint32(tid[1])<<16|uint32(tid[2])<<8|uint32(tid[3])), 0)); age < -time.Second || age > time.Minute {
					t.Errorf("trace id %s does not start with the current epoch second (age %v)", tid, age)
				}
			}
		}()
	}
	wg.Wait()
}

func TestPropagatorExtract(t *testing.T) {
	tests := []struct {
		name, header string
		valid        bool
		sampled      bool
	}{
		{"sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true, true},
		{"not sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", true, false},
		{"lineage kept out", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1", true, true},
		{"no parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, false},
		{"garbage", "Root=nope", false, false},
		{"missing", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// HTTP headers are looked up case-insensitively.
			carrier := propagation.HeaderCarrier(http.Header{})
			carrier.Set("x-amzn-trace-id", tt.header)
			ctx := Propagator{}.Extract(context.Background(), carrier)
			sc := trace.SpanContextFromContext(ctx)
			if sc.IsValid() != tt.valid || sc.IsSampled() != tt.sampled || (tt.valid && !sc.IsRemote()) {
				t.Fatalf("span context %+v, want valid %v sampled %v remote", sc, tt.valid, tt.sampled)
			}
			if tt.valid {
				out := propagation.MapCarrier{}
				Propagator{}.Inject(ctx, out)
				if h, _ := telemetry.ParseTraceHeader(out.Get(HeaderName)); h.Root != "1-5759e988-bd862e3fe1be46a994272793" || h.Parent != "53995c3f42cd8ad8" {
					t.Fatalf("round trip gave %q", out.Get(HeaderName))
				}
			}
		})
	}
	if f := (Propagator{}).Fields(); len(f) != 1 || f[0] != "X-Amzn-Trace-Id" {
		t.Fatalf("Fields = %v", f)
	}
	out := propagation.MapCarrier{}
	Propagator{}.Inject(context.Background(), out)
	if len(out) != 0 {
		t.Fatalf("an invalid span context was injected: %v", out)
	}
	if _, ok := SQSLink(map[string]string{}); ok {
		t.Fatal("a record without AWSTraceHeader was linked")
	}
	if _, ok := InvokeParent(context.Background()); ok {
		t.Fatal("a parent outside Lambda")
	}
}

func TestDaemonUDPAddress(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", DefaultDaemonAddress},
		{"169.254.79.129:2000", "169.254.79.129:2000"},
		{"tcp:127.0.0.1:2000 udp:127.0.0.2:2001", "127.0.0.2:2001"},
		{"udp:127.0.0.2:2001 tcp:127.0.0.1:2000", "127.0.0.2:2001"},
		{"udp:[::1]:2000", "[::1]:2000"},
	}
	for _, tt := range tests {
		if got, err := DaemonUDPAddress(tt.in); err != nil || got != tt.want {
			t.Errorf("DaemonUDPAddress(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"no-port", "tcp:127.0.0.1:2000", ":2000", "udp:"} {
		if _, err := DaemonUDPAddress(bad); err == nil {
			t.Errorf("DaemonUDPAddress(%q) accepted", bad)
		}
		if b, err := New(WithDaemonAddress(bad)); err == nil || b != nil {
			t.Errorf("New(WithDaemonAddress(%q)) = %v, %v; want an error", bad, b, err)
		}
	}
}

// listenUDP is a daemon stand-in that hands each datagram to the test.
func listenUDP(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	out := make(chan []byte, 16)
	go func() {
		buf := make([]byte, 70000)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			out <- bytes.Clone(buf[:n])
		}
	}()
	return conn.LocalAddr().String(), out
}

func receive(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no datagram within 10 s")
		return nil
	}
}

// failingConn refuses every write.
type failingConn struct{ net.Conn }

func (failingConn) Write([]byte) (int, error) { return 0, errors.New("network is unreachable") }
func (failingConn) Close() error              { return nil }

// The exporter sends exactly the documented datagrams; what it cannot send
// (a refused write, a span too large, a shut-down exporter, a cancelled
// export) is logged and dropped, never an error for the SDK to print.
func TestUDPExporter(t *testing.T) {
	addr, got := listenUDP(t)
	var logs bytes.Buffer
	exp, err := NewUDPExporter(addr, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	spans := fixtureSpans()
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	want, _ := Datagrams(spans, MaxDatagram)
	if d := receive(t, got); !bytes.Equal(d, want[0]) {
		t.Fatalf("sent %q, want %q", d, want[0])
	}

	huge := tracetest.SpanStubFromReadOnlySpan(spans[1])
	huge.Name = "huge"
	huge.Events = append(huge.Events, sdktrace.Event{Name: strings.Repeat("z", 70000)})
	if err := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{huge.Snapshot(), spans[2]}); err != nil {
		t.Fatalf("ExportSpans with a huge span: %v", err)
	}
	if req := decodeDatagram(t, receive(t, got)); len(req.ResourceSpans[0].ScopeSpans[0].Spans) != 1 {
		t.Fatalf("the span beside the huge one was not sent alone: %v", req)
	}
	if !strings.Contains(logs.String(), "span too large") {
		t.Fatalf("the dropped span was not logged: %s", logs.String())
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	logs.Reset()
	if err := exp.ExportSpans(cancelled, spans); err != nil || !strings.Contains(logs.String(), "export cancelled") {
		t.Fatalf("cancelled export = %v, logs %s", err, logs.String())
	}

	exp.mu.Lock()
	real := exp.conn
	exp.conn = failingConn{}
	exp.mu.Unlock()
	logs.Reset()
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("a refused write failed the export: %v", err)
	}
	if !strings.Contains(logs.String(), "datagram not sent") || !strings.Contains(logs.String(), "network is unreachable") {
		t.Fatalf("the refused write was not logged: %s", logs.String())
	}
	exp.mu.Lock()
	exp.conn = real
	exp.mu.Unlock()

	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	logs.Reset()
	if err := exp.ExportSpans(context.Background(), spans); err != nil || !strings.Contains(logs.String(), "shut down") {
		t.Fatalf("export after Shutdown = %v, logs %s", err, logs.String())
	}
}

// Through the backend: the spans of an invocation reach the daemon when the
// invocation ends, with the resource naming the function, the invocation
// id, and the annotations listed for X-Ray; a record's link is native.
func TestBackendSendsAtInvocationEnd(t *testing.T) {
	addr, got := listenUDP(t)
	b, err := New(WithDaemonAddress(addr), WithService("linegate-WorkerFunction", "ap-northeast-1", "7"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	invoke := telemetry.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Parent: "53995c3f42cd8ad8", Sampled: true}
	ctx := telemetry.WithInvokeHeader(telemetry.WithBackend(context.Background(), b), invoke)
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	ictx, inv := telemetry.StartInvocation(ctx, "linegate-WorkerFunction")
	_, rec := telemetry.Start(ictx, "record")
	rec.Annotate("webhookEventId", "01EVENT")
	rec.Metadata("detail", map[string]int{"n": 1})
	rec.Link(telemetry.Header{Root: "1-6650a1b0-fedcba9876543210fedcba98", Parent: "0102030405060708", Sampled: true})
	rec.End(nil)
	inv.End(nil)
	req := decodeDatagram(t, receive(t, got))
	rs := req.ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "linegate-WorkerFunction" || res["cloud.region"] != "ap-northeast-1" || res["faas.version"] != "7" {
		t.Errorf("resource %v", res)
	}
	spans := rs.ScopeSpans[0].Spans
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the record and the invocation", len(spans))
	}
	r, i := spans[0], spans[1]
	attrs := map[string]string{}
	for _, kv := range r.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
		if kv.Key == AnnotationsKey {
			var keys []string
			for _, v := range kv.Value.GetArrayValue().GetValues() {
				keys = append(keys, v.GetStringValue())
			}
			attrs[kv.Key] = strings.Join(keys, ",")
		}
	}
	if attrs["webhookEventId"] != "01EVENT" || attrs["detail"] != `{"n":1}` ||
		attrs[AnnotationsKey] != "webhookEventId,upstreamTraceId,upstreamParentId" {
		t.Errorf("record attributes %v", attrs)
	}
	if len(r.Links) != 1 || r.Links[0].SpanId[7] != 8 {
		t.Errorf("record links %v", r.Links)
	}
	if i.Attributes[0].Key != "faas.invocation_id" || i.Attributes[0].Value.GetStringValue() != "req-1" {
		t.Errorf("invocation attributes %v", i.Attributes)
	}
}

// BenchmarkInvocation is what OpenTelemetry adds to one webhook invocation:
// its span, two AWS call spans and the flush at its end, which encodes them
// and sends the datagram to a daemon on loopback (docs/benchmarks.md, "Cold
// start"): go test -run '^$' -bench Invocation ./internal/telemetry/otelxray
func BenchmarkInvocation(b *testing.B) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	go func() {
		buf := make([]byte, 70000)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	be, err := New(WithDaemonAddress(conn.LocalAddr().String()), WithService("WebhookFunction", "us-east-1", "1"))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Shutdown(context.Background())
	invoke := telemetry.WithInvokeHeader(telemetry.WithBackend(context.Background(), be),
		telemetry.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Parent: "53995c3f42cd8ad8", Sampled: true})
	for b.Loop() {
		ctx, inv := telemetry.StartInvocation(invoke, "WebhookFunction")
		for _, svc := range []string{"EventBridge", "SQS"} {
			_, s := telemetry.StartAWSCall(ctx, svc, "Put", "us-east-1")
			s.SetHTTPStatus(200)
			s.End(nil)
		}
		inv.SetHTTPStatus(200)
		inv.End(nil)
	}
}

// FuzzDaemonUDPAddress feeds AWS_XRAY_DAEMON_ADDRESS values: an accepted one
// is a host:port the UDP dialer can parse.
func FuzzDaemonUDPAddress(f *testing.F) {
	for _, s := range []string{"", "169.254.79.129:2000", "tcp:127.0.0.1:2000 udp:127.0.0.2:2001", "udp:[::1]:2000", "no-port"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, err := DaemonUDPAddress(s)
		if err != nil {
			return
		}
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			t.Fatalf("DaemonUDPAddress(%q) = %q, not host:port (%v)", s, addr, err)
		}
	})
}
