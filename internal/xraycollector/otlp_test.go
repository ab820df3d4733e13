package xraycollector

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

const otlpHeader = "{\"format\":\"json\",\"version\":1}\n"

func hexBytes(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func num(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func list(k string, vs ...string) *commonpb.KeyValue {
	arr := &commonpb.ArrayValue{}
	for _, v := range vs {
		arr.Values = append(arr.Values, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}})
	}
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}}
}

// otlpDatagram frames spans the way the ADOT UDP exporters do, built with
// the official OTLP types (not this repository's encoder).
func otlpDatagram(t testing.TB, prefix string, spans ...*tracepb.Span) []byte {
	t.Helper()
	raw, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(otlpHeader + prefix + base64.StdEncoding.EncodeToString(raw))
}

const (
	otlpTrace  = "6650a1b20123456789abcdef01234567"
	otherTrace = "6650a1b0fedcba9876543210fedcba98"
)

// webhookSpans is a webhook invocation as OpenTelemetry sends it: the
// invocation under Lambda's segment, an annotated step, a refused AWS call
// and a throttled HTTP call, plus a span of another trace linked to it.
func webhookSpans() []*tracepb.Span {
	return []*tracepb.Span{
		{TraceId: hexBytes(otlpTrace), SpanId: hexBytes("1111222233334444"), ParentSpanId: hexBytes("9999aaaabbbbcccc"),
			Name: "WebhookFunction", Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1_716_561_010_123_000_000,
			EndTimeUnixNano: 1_716_561_010_165_000_000, Attributes: []*commonpb.KeyValue{num("http.response.status_code", 200),
				num("events", 2), list("aws.xray.annotations", "events")}},
		{TraceId: hexBytes(otlpTrace), SpanId: hexBytes("2222333344445555"), ParentSpanId: hexBytes("1111222233334444"),
			Name: "verify", Kind: tracepb.Span_SPAN_KIND_INTERNAL, Attributes: []*commonpb.KeyValue{
				{Key: "signature-valid", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
				str("not.an.annotation", "metadata"), list("aws.xray.annotations", "signature-valid", "missing")}},
		{TraceId: hexBytes(otlpTrace), SpanId: hexBytes("3333444455556666"), ParentSpanId: hexBytes("1111222233334444"),
			Name: "SQS.SendMessageBatch", Kind: tracepb.Span_SPAN_KIND_CLIENT, Attributes: []*commonpb.KeyValue{
				str("rpc.system", "aws-api"), str("rpc.service", "SQS"), str("rpc.method", "SendMessageBatch"), num("http.response.status_code", 400)},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "bad batch"},
			Events: []*tracepb.Span_Event{{Name: "exception", Attributes: []*commonpb.KeyValue{
				str("exception.type", "*smithy.OperationError"), str("exception.message", "bad batch")}}, {Name: "retry"}}},
		{TraceId: hexBytes(otlpTrace), SpanId: hexBytes("4444555566667777"), ParentSpanId: hexBytes("1111222233334444"),
			Name: "api.line.me", Kind: tracepb.Span_SPAN_KIND_CLIENT, Attributes: []*commonpb.KeyValue{
				str("http.request.method", "POST"), str("url.full", "https://api.line.me/v2/bot/message/push?x=1"), num("http.response.status_code", 429)}},
		{TraceId: hexBytes(otherTrace), SpanId: hexBytes("5555666677778888"), Name: "record",
			Links: []*tracepb.Span_Link{{TraceId: hexBytes(otlpTrace), SpanId: hexBytes("3333444455556666")}}},
	}
}

func TestParseOTLPDatagram(t *testing.T) {
	traces, err := ParseOTLPDatagram(otlpDatagram(t, "T1S", webhookSpans()...))
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 2 || traces[0].TraceID != "1-6650a1b2-0123456789abcdef01234567" || traces[1].TraceID != "1-6650a1b0-fedcba9876543210fedcba98" {
		t.Fatalf("traces %+v", traces)
	}
	want := []Segment{
		{ID: "1111222233334444", Name: "WebhookFunction", ParentID: "9999aaaabbbbcccc", Type: "segment", Start: 1716561010.123, End: 1716561010.165,
			HTTPStatus: 200, Annotations: map[string]any{"events": float64(2)}, OTLP: true},
		{ID: "2222333344445555", Name: "verify", ParentID: "1111222233334444", Type: "subsegment", Annotations: map[string]any{"signature_valid": true}, OTLP: true},
		{ID: "3333444455556666", Name: "SQS", ParentID: "1111222233334444", Type: "subsegment", Namespace: "aws", Operation: "SendMessageBatch",
			HTTPStatus: 400, Error: true, Fault: true, Exceptions: []string{"*smithy.OperationError: bad batch"}, OTLP: true},
		{ID: "4444555566667777", Name: "api.line.me", ParentID: "1111222233334444", Type: "subsegment", Namespace: "remote",
			Method: "POST", Path: "/v2/bot/message/push", HTTPStatus: 429, Error: true, Throttle: true, OTLP: true},
	}
	got := traces[0].Segments
	if len(got) != len(want) {
		t.Fatalf("%d segments, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || g.ParentID != w.ParentID || g.Type != w.Type || g.Namespace != w.Namespace ||
			g.Operation != w.Operation || g.HTTPStatus != w.HTTPStatus || g.Error != w.Error || g.Fault != w.Fault ||
			g.Throttle != w.Throttle || g.Method != w.Method || g.Path != w.Path || !g.OTLP ||
			!slices.Equal(g.Exceptions, w.Exceptions) || len(g.Annotations) != len(w.Annotations) ||
			(w.Start != 0 && (g.Start != w.Start || g.End != w.End)) {
			t.Errorf("segment %d = %+v\nwant %+v", i, g, w)
		}
		for k, v := range w.Annotations {
			if g.Annotations[k] != v {
				t.Errorf("segment %s annotation %s = %v, want %v", g.ID, k, g.Annotations[k], v)
			}
		}
	}
	rec := traces[1]
	wantLink := Link{FromID: "5555666677778888", TraceID: "1-6650a1b2-0123456789abcdef01234567", ParentID: "3333444455556666"}
	if rec.Segments[0].Type != "segment" || len(rec.Links) != 1 || rec.Links[0] != wantLink {
		t.Fatalf("linked trace %+v, want the link %+v", rec, wantLink)
	}

	// Ingested: the same view a collector serves, links included.
	c := New()
	changed := c.Changed()
	if err := c.Ingest(otlpDatagram(t, "T1S", webhookSpans()...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Ingest stored OTLP spans without a change notification")
	}
	if tr, ok := c.Trace("1-6650a1b0-fedcba9876543210fedcba98"); !ok || len(tr.Links) != 1 || tr.Links[0] != wantLink {
		t.Fatalf("stored linked trace %+v", tr)
	}
}

// Unsampled spans ("T1U") only feed X-Ray's metrics: nothing is stored.
func TestOTLPUnsampledIsIgnored(t *testing.T) {
	c := New()
	changed := c.Changed()
	if err := c.Ingest(otlpDatagram(t, "T1U", webhookSpans()...)); err != nil {
		t.Fatal(err)
	}
	if len(c.Traces()) != 0 {
		t.Fatalf("unsampled spans were stored: %+v", c.Traces())
	}
	select {
	case <-changed:
		t.Fatal("a change was notified for nothing stored")
	default:
	}
}

func TestOTLPMalformed(t *testing.T) {
	badID := &tracepb.Span{TraceId: []byte{1, 2}, SpanId: hexBytes("1111222233334444"), Name: "short"}
	tests := []struct {
		name string
		in   []byte
	}{
		{"unknown prefix", []byte(otlpHeader + "T2Sabcd")},
		{"not base64", []byte(otlpHeader + "T1S%%%")},
		{"not protobuf", []byte(otlpHeader + "T1S" + base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff}))},
		{"short trace id", otlpDatagram(t, "T1S", badID)},
		{"no header line", []byte("T1Sabcd")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseOTLPDatagram(tt.in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("error = %v, want ErrMalformed", err)
			}
			c := New()
			if err := c.Ingest(tt.in); err == nil || len(c.Traces()) != 0 {
				t.Fatalf("Ingest = %v with %d traces; want an error and nothing stored", err, len(c.Traces()))
			}
		})
	}
}

// FuzzParseOTLPDatagram feeds arbitrary datagrams: never a panic, every
// error ErrMalformed, every accepted span with an X-Ray trace id and a
// 16-hex-digit id.
func FuzzParseOTLPDatagram(f *testing.F) {
	f.Add(otlpDatagram(f, "T1S", webhookSpans()...))
	f.Add(otlpDatagram(f, "T1U", webhookSpans()...))
	f.Add([]byte(otlpHeader + "T1S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		traces, err := ParseOTLPDatagram(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, tr := range traces {
			if len(tr.TraceID) != 35 {
				t.Fatalf("trace id %q", tr.TraceID)
			}
			for _, s := range tr.Segments {
				if len(s.ID) != 16 {
					t.Fatalf("segment id %q", s.ID)
				}
			}
		}
	})
}
