package otelxray

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/telemetry"
)

// The documented datagram: the daemon's JSON header line, "T1S", then the
// base64 of an ExportTraceServiceRequest (aws-otel-python-instrumentation,
// exporters/aws-otel-otlp-udp-exporter: PROTOCOL_HEADER + prefix +
// base64.b64encode(SerializeToString())). Written out here, not taken from
// the package's constants.
const documentedPrefix = "{\"format\":\"json\",\"version\":1}\nT1S"

var (
	traceA = mustTraceID("1-6650a1b2-0123456789abcdef01234567")
	traceB = mustTraceID("1-6650a1b0-fedcba9876543210fedcba98")
	t0     = time.Date(2024, 5, 24, 14, 30, 10, 123456789, time.UTC)
)

func mustTraceID(s string) trace.TraceID {
	id, err := telemetry.ParseTraceID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func mustSpanID(s string) trace.SpanID {
	id, err := trace.SpanIDFromHex(s)
	if err != nil {
		panic(err)
	}
	return id
}

func spanContext(tid trace.TraceID, sid string, remote bool) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: mustSpanID(sid), TraceFlags: trace.FlagsSampled, Remote: remote})
}

// fixtureSpans is a worker invocation as the seam records it: the server
// span under Lambda's segment, a record linked to the webhook's PutEvents
// call with annotations, a panic and the error status, and an AWS call;
// plus a span of a second instrumentation scope.
func fixtureSpans() []sdktrace.ReadOnlySpan {
	res := resource.NewSchemaless(attribute.String("service.name", "linegate-WorkerFunction"),
		attribute.String("cloud.provider", "aws"), attribute.String("cloud.platform", "aws_lambda"))
	scope := instrumentation.Scope{Name: ScopeName}
	stubs := tracetest.SpanStubs{
		{
			Name: "linegate-WorkerFunction", SpanKind: trace.SpanKindServer, Resource: res, InstrumentationScope: scope,
			SpanContext: spanContext(traceA, "1111222233334444", false), Parent: spanContext(traceA, "9999aaaabbbbcccc", true),
			StartTime: t0, EndTime: t0.Add(42 * time.Millisecond),
			Attributes: []attribute.KeyValue{attribute.String("faas.invocation_id", "c6af9ac6-7b61-11e6-9a41-93e8deadbeef")},
		},
		{
			Name: "record", SpanKind: trace.SpanKindInternal, Resource: res, InstrumentationScope: scope,
			SpanContext: spanContext(traceA, "2222333344445555", false), Parent: spanContext(traceA, "1111222233334444", false),
			StartTime: t0.Add(time.Millisecond), EndTime: t0.Add(40 * time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.String("webhookEventId", "01FZ74A0TDDPYRVKNK77XKC3ZR"), attribute.Bool("redelivered", false),
				attribute.Int("receiveCount", 0), attribute.Int64("offset", -3), attribute.Float64("ratio", 0.25),
				attribute.String("empty", ""), attribute.StringSlice(AnnotationsKey, []string{"webhookEventId", "upstreamTraceId"}),
				attribute.String("upstreamTraceId", "1-6650a1b0-fedcba9876543210fedcba98"),
				attribute.Int64Slice("sizes", []int64{1, 2}), attribute.BoolSlice("flags", []bool{true, false}),
				attribute.Float64Slice("weights", []float64{0.5}),
			},
			Links: []sdktrace.Link{{SpanContext: spanContext(traceB, "53995c3f42cd8ad8", true),
				Attributes: []attribute.KeyValue{attribute.String("source", "sqs")}}},
			Events: []sdktrace.Event{{Name: "exception", Time: t0.Add(39 * time.Millisecond), Attributes: []attribute.KeyValue{
				attribute.String("exception.type", "panic"), attribute.String("exception.message", "boom")}}},
			Status:            sdktrace.Status{Code: codes.Error, Description: "panic: boom"},
			DroppedAttributes: 1, DroppedEvents: 2, DroppedLinks: 3,
		},
		{
			Name: "DynamoDB", SpanKind: trace.SpanKindClient, Resource: res, InstrumentationScope: scope,
			SpanContext: spanContext(traceA, "3333444455556666", false), Parent: spanContext(traceA, "2222333344445555", false),
			StartTime: t0.Add(2 * time.Millisecond), EndTime: t0.Add(5 * time.Millisecond),
			Attributes: []attribute.KeyValue{attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", "DynamoDB"),
				attribute.String("rpc.method", "PutItem"), attribute.Int("http.response.status_code", 200)},
			Status: sdktrace.Status{Code: codes.Ok},
		},
		{
			Name: "other", Resource: res, InstrumentationScope: instrumentation.Scope{Name: "example.com/other", Version: "v1.2.3"},
			SpanContext: spanContext(traceA, "4444555566667777", false), Parent: spanContext(traceA, "1111222233334444", false),
			StartTime: t0.Add(3 * time.Millisecond), EndTime: t0.Add(4 * time.Millisecond),
		},
	}
	return stubs.Snapshots()
}

// decodeDatagram checks the documented framing of one datagram and decodes
// its payload with the official OTLP types.
func decodeDatagram(t *testing.T, dg []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	if !bytes.HasPrefix(dg, []byte(documentedPrefix)) {
		t.Fatalf("datagram does not start with %q: %.60q", documentedPrefix, dg)
	}
	payload := dg[len(documentedPrefix):]
	raw, err := base64.StdEncoding.DecodeString(string(payload))
	if err != nil {
		t.Fatalf("payload is not standard base64: %v", err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		t.Fatalf("payload is not an ExportTraceServiceRequest: %v", err)
	}
	return &req
}

// The bytes of a datagram, kept in testdata/ and decoded back with the
// official OTLP types: framing, ids, parents, kinds, times, attributes of
// every type, the event, the link and the statuses.
func TestDatagramGolden(t *testing.T) {
	dgs, err := Datagrams(fixtureSpans(), MaxDatagram)
	if err != nil || len(dgs) != 1 {
		t.Fatalf("Datagrams = %d datagrams, %v; want 1", len(dgs), err)
	}
	golden.Check(t, "testdata/worker_invocation.datagram", dgs[0])

	req := decodeDatagram(t, golden.Read(t, "testdata/worker_invocation.datagram"))
	if len(req.ResourceSpans) != 1 {
		t.Fatalf("%d ResourceSpans, want 1 (one resource)", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	resAttrs := map[string]string{}
	for _, kv := range rs.GetResource().GetAttributes() {
		resAttrs[kv.Key] = kv.GetValue().GetStringValue()
	}
	if resAttrs["service.name"] != "linegate-WorkerFunction" || resAttrs["cloud.platform"] != "aws_lambda" {
		t.Errorf("resource attributes %v", resAttrs)
	}
	if len(rs.ScopeSpans) != 2 || rs.ScopeSpans[0].GetScope().GetName() != ScopeName ||
		rs.ScopeSpans[1].GetScope().GetName() != "example.com/other" || rs.ScopeSpans[1].GetScope().GetVersion() != "v1.2.3" {
		t.Fatalf("scopes %v", rs.ScopeSpans)
	}
	spans := rs.ScopeSpans[0].Spans
	if len(spans) != 3 {
		t.Fatalf("%d spans in the seam's scope, want 3", len(spans))
	}
	inv, rec, call := spans[0], spans[1], spans[2]
	wantTrace, _ := hex.DecodeString("6650a1b20123456789abcdef01234567")
	for _, s := range spans {
		if !bytes.Equal(s.TraceId, wantTrace) {
			t.Errorf("%s: trace id %x, want %x", s.Name, s.TraceId, wantTrace)
		}
	}
	if inv.Name != "linegate-WorkerFunction" || inv.Kind != tracepb.Span_SPAN_KIND_SERVER || hex.EncodeToString(inv.SpanId) != "1111222233334444" ||
		hex.EncodeToString(inv.ParentSpanId) != "9999aaaabbbbcccc" || inv.StartTimeUnixNano != uint64(t0.UnixNano()) ||
		inv.EndTimeUnixNano != uint64(t0.Add(42*time.Millisecond).UnixNano()) {
		t.Errorf("invocation span %v", inv)
	}
	// Sampled, parent's remoteness known, parent remote (Lambda's segment).
	if inv.Flags != 0x01|0x100|0x200 || rec.Flags != 0x01|0x100 {
		t.Errorf("flags %#x and %#x, want 0x301 and 0x101", inv.Flags, rec.Flags)
	}
	if rec.Kind != tracepb.Span_SPAN_KIND_INTERNAL || hex.EncodeToString(rec.ParentSpanId) != "1111222233334444" ||
		rec.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || rec.Status.GetMessage() != "panic: boom" ||
		rec.DroppedAttributesCount != 1 || rec.DroppedEventsCount != 2 || rec.DroppedLinksCount != 3 {
		t.Errorf("record span %v", rec)
	}
	for _, kv := range rec.Attributes {
		if kv.GetValue().GetValue() == nil {
			t.Errorf("attribute %s has no value (a oneof is present even when zero)", kv.Key)
		}
	}
	if rec.Attributes[0].Value.GetStringValue() != "01FZ74A0TDDPYRVKNK77XKC3ZR" || rec.Attributes[1].Value.GetBoolValue() ||
		rec.Attributes[2].Value.GetIntValue() != 0 || rec.Attributes[3].Value.GetIntValue() != -3 ||
		rec.Attributes[4].Value.GetDoubleValue() != 0.25 || rec.Attributes[5].Value.GetStringValue() != "" {
		t.Errorf("scalar attributes %v", rec.Attributes[:6])
	}
	var ann []string
	for _, v := range rec.Attributes[6].Value.GetArrayValue().GetValues() {
		ann = append(ann, v.GetStringValue())
	}
	if rec.Attributes[6].Key != AnnotationsKey || !slices.Equal(ann, []string{"webhookEventId", "upstreamTraceId"}) {
		t.Errorf("annotations attribute %v", rec.Attributes[6])
	}
	if len(rec.Links) != 1 || hex.EncodeToString(rec.Links[0].TraceId) != "6650a1b0fedcba9876543210fedcba98" ||
		hex.EncodeToString(rec.Links[0].SpanId) != "53995c3f42cd8ad8" || rec.Links[0].Flags != 0x301 ||
		rec.Links[0].Attributes[0].GetValue().GetStringValue() != "sqs" {
		t.Errorf("links %v", rec.Links)
	}
	if len(rec.Events) != 1 || rec.Events[0].Name != "exception" || rec.Events[0].TimeUnixNano != uint64(t0.Add(39*time.Millisecond).UnixNano()) ||
		rec.Events[0].Attributes[1].GetValue().GetStringValue() != "boom" {
		t.Errorf("events %v", rec.Events)
	}
	if call.Kind != tracepb.Span_SPAN_KIND_CLIENT || call.Status.GetCode() != tracepb.Status_STATUS_CODE_OK ||
		call.Attributes[3].GetValue().GetIntValue() != 200 {
		t.Errorf("AWS call span %v", call)
	}
}

// captureClient is an otlptrace.Client that keeps what the official
// exporter would send.
type captureClient struct{ got []*tracepb.ResourceSpans }

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = append(c.got, rs...)
	return nil
}

// The hand-written encoding is what the official OTLP exporter's transform
// makes of the same spans, message for message.
func TestEncodingMatchesTheOfficialExporter(t *testing.T) {
	spans := fixtureSpans()
	var client captureClient
	exp, err := otlptrace.New(context.Background(), &client)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: client.got}
	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(EncodeRequest(spans), &got); err != nil {
		t.Fatal(err)
	}
	// The official transform groups scopes through a map: compare them in
	// name order.
	for _, r := range append(slices.Clone(want.ResourceSpans), got.ResourceSpans...) {
		slices.SortFunc(r.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
			return strings.Compare(a.GetScope().GetName(), b.GetScope().GetName())
		})
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("hand-written encoding differs from the official transform:\n got: %v\nwant: %v", &got, want)
	}
}

// Spans that do not fit one datagram are packed into several, each within
// the limit and each a whole request; a span too large for any datagram is
// dropped with ErrSpanTooLarge and the others still go.
func TestDatagramsSplitBySize(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "w"))
	var stubs tracetest.SpanStubs
	for i := range 40 {
		stubs = append(stubs, tracetest.SpanStub{
			Name: "record", Resource: res, InstrumentationScope: instrumentation.Scope{Name: ScopeName},
			SpanContext: spanContext(traceA, hex.EncodeToString([]byte{1, 2, 3, 4, 5, 6, 7, byte(i + 1)}), false),
			StartTime:   t0, EndTime: t0.Add(time.Second),
			Attributes: []attribute.KeyValue{attribute.String("pad", strings.Repeat("x", 3000))},
		})
	}
	huge := stubs[0]
	huge.Name, huge.SpanContext = "huge", spanContext(traceA, "0f0f0f0f0f0f0f0f", false)
	huge.Attributes = []attribute.KeyValue{attribute.String("pad", strings.Repeat("y", 70000))}
	stubs = append(stubs[:20:20], append(tracetest.SpanStubs{huge}, stubs[20:]...)...)

	const limit = 16 * 1024
	dgs, err := Datagrams(stubs.Snapshots(), limit)
	if !errors.Is(err, ErrSpanTooLarge) || !strings.Contains(err.Error(), `"huge"`) {
		t.Fatalf("error = %v, want ErrSpanTooLarge naming the huge span", err)
	}
	if len(dgs) < 8 {
		t.Fatalf("%d datagrams for 40 spans of 3 KB in 16 KiB datagrams", len(dgs))
	}
	var ids []string
	for i, dg := range dgs {
		if len(dg) > limit {
			t.Errorf("datagram %d is %d bytes, over %d", i, len(dg), limit)
		}
		for _, rs := range decodeDatagram(t, dg).ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					ids = append(ids, hex.EncodeToString(s.SpanId))
				}
			}
		}
	}
	if len(ids) != 40 || ids[0] != "0102030405060701" || ids[39] != "0102030405060728" || slices.Contains(ids, "0f0f0f0f0f0f0f0f") {
		t.Fatalf("spans sent: %v, want the 40 small ones once each, in order", ids)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("order broken at %d: %v", i, ids)
		}
	}
	if dgs, err := Datagrams(nil, limit); err != nil || len(dgs) != 0 {
		t.Fatalf("no spans: %d datagrams, %v", len(dgs), err)
	}
}
