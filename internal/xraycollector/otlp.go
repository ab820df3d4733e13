package xraycollector

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/linegate/linegate/internal/telemetry"
)

// The OTLP datagram the X-Ray daemon accepts besides segment documents, as
// the AWS Distro for OpenTelemetry's UDP exporters send it
// (aws-otel-python-instrumentation, exporters/aws-otel-otlp-udp-exporter):
// the daemon header line, then "T1S" (sampled spans) or "T1U" (unsampled
// spans, which X-Ray only turns into metrics), then the base64 of an OTLP
// ExportTraceServiceRequest protobuf.
const (
	otlpSampled   = "T1S"
	otlpUnsampled = "T1U"
)

// Span attributes the conversion reads: the semantic conventions'
// (https://opentelemetry.io/docs/specs/semconv/) and X-Ray's list of
// annotations (aws.xray.annotations, as X-Ray's OpenTelemetry conversion
// reads it).
const (
	attrAnnotations = "aws.xray.annotations"
	attrHTTPStatus  = "http.response.status_code"
	attrHTTPMethod  = "http.request.method"
	attrURL         = "url.full"
	attrURLPath     = "url.path"
	attrRPCSystem   = "rpc.system"
	attrRPCService  = "rpc.service"
	attrRPCMethod   = "rpc.method"
	attrExcType     = "exception.type"
	attrExcMessage  = "exception.message"
)

// isOTLP reports whether a datagram body is OTLP, sampled or not.
func isOTLP(body []byte) bool {
	return bytes.HasPrefix(body, []byte(otlpSampled)) || bytes.HasPrefix(body, []byte(otlpUnsampled))
}

// ParseOTLPDatagram parses one OTLP datagram (header line, "T1S", base64 of
// an ExportTraceServiceRequest) into the traces its spans belong to, each
// span converted to a Segment the way X-Ray converts OpenTelemetry spans: a
// server span or a span without a parent is a segment, any other a
// subsegment; an AWS SDK call (rpc.system "aws-api") is in the "aws"
// namespace, named for its service, with its operation; another client span
// is "remote" (an HTTP call: method, path, status); the error status is a
// fault, a 4xx status an error (429 also a throttle), a 5xx a fault;
// "exception" events are the exceptions; the attributes aws.xray.annotations
// lists are the annotations (keys reduced to X-Ray's letters, digits and
// '_'); span links are the trace's links. A "T1U" datagram (unsampled spans)
// yields no traces. Every error wraps ErrMalformed.
func ParseOTLPDatagram(b []byte) ([]Trace, error) {
	body, err := datagramBody(b)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(body, []byte(otlpUnsampled)):
		return nil, nil
	case !bytes.HasPrefix(body, []byte(otlpSampled)):
		return nil, fmt.Errorf("%w: no %s prefix", ErrMalformed, otlpSampled)
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(body[len(otlpSampled):])))
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %v", ErrMalformed, err)
	}
	// TracesData has ExportTraceServiceRequest's wire format (field 1,
	// repeated ResourceSpans) without the gRPC gateway the collector
	// service's package drags in.
	var req tracepb.TracesData
	if err := proto.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("%w: protobuf: %v", ErrMalformed, err)
	}
	var out []Trace
	index := map[string]int{}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				traceID, seg, err := spanSegment(sp)
				if err != nil {
					return nil, err
				}
				i, ok := index[traceID]
				if !ok {
					i = len(out)
					index[traceID] = i
					out = append(out, Trace{TraceID: traceID, Links: []Link{}})
				}
				out[i].Segments = append(out[i].Segments, seg)
				for _, l := range seg.links {
					out[i].Links = appendLink(out[i].Links, l)
				}
			}
		}
	}
	return out, nil
}

// spanSegment converts one span (see ParseOTLPDatagram).
func spanSegment(sp *tracepb.Span) (string, Segment, error) {
	if len(sp.GetTraceId()) != 16 || len(sp.GetSpanId()) != 8 {
		return "", Segment{}, fmt.Errorf("%w: span %q with a %d-byte trace id and a %d-byte span id", ErrMalformed,
			sp.GetName(), len(sp.GetTraceId()), len(sp.GetSpanId()))
	}
	attrs := map[string]*commonpb.AnyValue{}
	for _, kv := range sp.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue()
	}
	str := func(k string) string { return attrs[k].GetStringValue() }
	s := Segment{
		ID:    hex.EncodeToString(sp.GetSpanId()),
		Name:  sp.GetName(),
		Type:  "subsegment",
		Start: seconds(sp.GetStartTimeUnixNano()),
		End:   seconds(sp.GetEndTimeUnixNano()),
		OTLP:  true,
	}
	if len(sp.GetParentSpanId()) == 8 {
		s.ParentID = hex.EncodeToString(sp.GetParentSpanId())
	}
	if s.ParentID == "" || sp.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
		s.Type = "segment"
	}
	switch {
	case str(attrRPCSystem) == "aws-api":
		s.Namespace = "aws"
		if svc := str(attrRPCService); svc != "" {
			s.Name = svc
		}
		s.Operation = str(attrRPCMethod)
	case sp.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
		s.Namespace = "remote"
	}
	if v, ok := attrs[attrHTTPStatus]; ok {
		s.HTTPStatus = int(v.GetIntValue())
	}
	s.Method = str(attrHTTPMethod)
	if u, err := url.Parse(str(attrURL)); err == nil && u.Path != "" {
		s.Path = u.Path
	} else if p := str(attrURLPath); p != "" {
		s.Path = p
	}
	s.Fault = sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR
	switch c := s.HTTPStatus; {
	case c == 429:
		s.Error, s.Throttle = true, true
	case c >= 400 && c < 500:
		s.Error = true
	case c >= 500 && c < 600:
		s.Fault = true
	}
	for _, ev := range sp.GetEvents() {
		if ev.GetName() != "exception" {
			continue
		}
		var typ, msg string
		for _, kv := range ev.GetAttributes() {
			switch kv.GetKey() {
			case attrExcType:
				typ = kv.GetValue().GetStringValue()
			case attrExcMessage:
				msg = kv.GetValue().GetStringValue()
			}
		}
		s.Exceptions = append(s.Exceptions, typ+": "+msg)
	}
	for _, k := range attrs[attrAnnotations].GetArrayValue().GetValues() {
		key := k.GetStringValue()
		if v, ok := annotationValue(attrs[key]); ok {
			if s.Annotations == nil {
				s.Annotations = map[string]any{}
			}
			s.Annotations[annotationKey(key)] = v
		}
	}
	for _, l := range sp.GetLinks() {
		if len(l.GetTraceId()) == 16 && len(l.GetSpanId()) == 8 {
			s.links = append(s.links, Link{FromID: s.ID, TraceID: telemetry.FormatTraceID([16]byte(l.GetTraceId())),
				ParentID: hex.EncodeToString(l.GetSpanId())})
		}
	}
	return telemetry.FormatTraceID([16]byte(sp.GetTraceId())), s, nil
}

// seconds is a Unix time in nanoseconds as the seconds of a segment
// document, whole seconds and fraction converted apart so the fraction keeps
// its digits.
func seconds(ns uint64) float64 {
	return float64(ns/1e9) + float64(ns%1e9)/1e9
}

// annotationValue is an attribute as the JSON of a segment document holds
// an annotation (numbers are float64); only scalars are annotations.
func annotationValue(v *commonpb.AnyValue) (any, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue, true
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue, true
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue), true
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	}
	return nil, false
}

// annotationKey keeps the characters X-Ray keeps in annotation keys.
func annotationKey(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return r
		}
		return '_'
	}, key)
}
