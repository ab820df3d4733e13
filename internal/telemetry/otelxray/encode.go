package otelxray

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file writes OTLP's ExportTraceServiceRequest in the protobuf wire
// format by hand, from the SDK's finished spans, mapping every field the way
// the official OTLP exporters do (go.opentelemetry.io/otel/exporters/otlp/
// otlptrace's transform): the field numbers are those of
// opentelemetry/proto/collector/trace/v1/trace_service.proto,
// .../trace/v1/trace.proto, .../common/v1/common.proto and
// .../resource/v1/resource.proto (opentelemetry-proto v1.x). Writing it here
// keeps the generated message types and their reflection out of every
// function binary; the tests decode the output with those official types
// (go.opentelemetry.io/proto/otlp) and compare it with what the official
// transform makes of the same spans.

// Field numbers of the messages written here.
const (
	reqResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	rsResource   = 1 // ResourceSpans.resource
	rsScopeSpans = 2 // ResourceSpans.scope_spans
	rsSchemaURL  = 3 // ResourceSpans.schema_url

	resAttributes = 1 // Resource.attributes

	ssScope     = 1 // ScopeSpans.scope
	ssSpans     = 2 // ScopeSpans.spans
	ssSchemaURL = 3 // ScopeSpans.schema_url

	scopeName       = 1 // InstrumentationScope.name
	scopeVersion    = 2 // InstrumentationScope.version
	scopeAttributes = 3 // InstrumentationScope.attributes

	spanTraceID           = 1
	spanSpanID            = 2
	spanTraceState        = 3
	spanParentSpanID      = 4
	spanName              = 5
	spanKind              = 6
	spanStart             = 7
	spanEnd               = 8
	spanAttributes        = 9
	spanDroppedAttributes = 10
	spanEvents            = 11
	spanDroppedEvents     = 12
	spanLinks             = 13
	spanDroppedLinks      = 14
	spanStatus            = 15
	spanFlags             = 16

	eventTime              = 1
	eventName              = 2
	eventAttributes        = 3
	eventDroppedAttributes = 4

	linkTraceID           = 1
	linkSpanID            = 2
	linkTraceState        = 3
	linkAttributes        = 4
	linkDroppedAttributes = 5
	linkFlags             = 6

	statusMessage = 2
	statusCode    = 3

	kvKey   = 1
	kvValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	arrayValues  = 1 // ArrayValue.values
	kvListValues = 1 // KeyValueList.values
)

// OTLP's span flags: the low 8 bits are the W3C trace flags; these two say
// whether the parent's remoteness is known, and whether it is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// appendMessage appends field num holding the message msg (its length, then
// its bytes).
func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// appendString appends a string field, omitted when empty (proto3).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendVarint appends a varint field, omitted when zero (proto3).
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendFixed64 appends a fixed64 field, omitted when zero (proto3).
func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendFixed32 appends a fixed32 field, omitted when zero (proto3).
func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// clampCount is a dropped count as the uint32 OTLP carries.
func clampCount(n int) uint64 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint64(n)
}

// unixNano is t in nanoseconds since the epoch, 0 for times before it.
func unixNano(t interface{ UnixNano() int64 }) uint64 {
	return uint64(max(0, t.UnixNano()))
}

// encodeSpan writes one Span message.
func encodeSpan(sd sdktrace.ReadOnlySpan) []byte {
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	var b []byte
	b = appendMessage(b, spanTraceID, tid[:])
	b = appendMessage(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	parent := sd.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendMessage(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, sd.Name())
	b = appendVarint(b, spanKind, uint64(kindNumber(sd.SpanKind())))
	b = appendFixed64(b, spanStart, unixNano(sd.StartTime()))
	b = appendFixed64(b, spanEnd, unixNano(sd.EndTime()))
	for _, kv := range sd.Attributes() {
		b = appendMessage(b, spanAttributes, encodeKeyValue(kv))
	}
	b = appendVarint(b, spanDroppedAttributes, clampCount(sd.DroppedAttributes()))
	for _, e := range sd.Events() {
		b = appendMessage(b, spanEvents, encodeEvent(e))
	}
	b = appendVarint(b, spanDroppedEvents, clampCount(sd.DroppedEvents()))
	for _, l := range sd.Links() {
		b = appendMessage(b, spanLinks, encodeLink(l))
	}
	b = appendVarint(b, spanDroppedLinks, clampCount(sd.DroppedLinks()))
	st := sd.Status()
	b = appendMessage(b, spanStatus, encodeStatus(st.Code, st.Description))
	b = appendFixed32(b, spanFlags, spanFlagsOf(sc.TraceFlags(), parent))
	return b
}

// spanFlagsOf is OTLP's flags field: the trace flags, and that the parent's
// remoteness is known, and whether it is remote.
func spanFlagsOf(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// kindNumber is OTLP's Span.SpanKind for k.
func kindNumber(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// encodeStatus writes a Status message; the official exporters always send
// one, so an unset status is an empty message, not an absent field.
func encodeStatus(c codes.Code, msg string) []byte {
	code := 0 // STATUS_CODE_UNSET
	switch c {
	case codes.Ok:
		code = 1
	case codes.Error:
		code = 2
	}
	var b []byte
	b = appendString(b, statusMessage, msg)
	return appendVarint(b, statusCode, uint64(code))
}

func encodeEvent(e sdktrace.Event) []byte {
	var b []byte
	b = appendFixed64(b, eventTime, unixNano(e.Time))
	b = appendString(b, eventName, e.Name)
	for _, kv := range e.Attributes {
		b = appendMessage(b, eventAttributes, encodeKeyValue(kv))
	}
	return appendVarint(b, eventDroppedAttributes, clampCount(e.DroppedAttributeCount))
}

func encodeLink(l sdktrace.Link) []byte {
	sc := l.SpanContext
	tid, sid := sc.TraceID(), sc.SpanID()
	var b []byte
	b = appendMessage(b, linkTraceID, tid[:])
	b = appendMessage(b, linkSpanID, sid[:])
	b = appendString(b, linkTraceState, sc.TraceState().String())
	for _, kv := range l.Attributes {
		b = appendMessage(b, linkAttributes, encodeKeyValue(kv))
	}
	b = appendVarint(b, linkDroppedAttributes, clampCount(l.DroppedAttributeCount))
	return appendFixed32(b, linkFlags, spanFlagsOf(sc.TraceFlags(), sc))
}

func encodeKeyValue(kv attribute.KeyValue) []byte {
	var b []byte
	b = appendString(b, kvKey, string(kv.Key))
	return appendMessage(b, kvValue, encodeValue(kv.Value))
}

// encodeValue writes an AnyValue. Its value is a oneof, which has presence:
// a false, a zero or an empty string is written, not omitted.
func encodeValue(v attribute.Value) []byte {
	var b []byte
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, anyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, anyInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, anyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		var list []byte
		for _, kv := range v.AsMap() {
			list = appendMessage(list, kvListValues, encodeKeyValue(kv))
		}
		b = appendMessage(b, anyKVList, list)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return b
}

// appendArray appends an ArrayValue of vs, each converted with value.
func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	var arr []byte
	for _, v := range vs {
		arr = appendMessage(arr, arrayValues, encodeValue(value(v)))
	}
	return appendMessage(b, anyArray, arr)
}

func encodeResource(r *resource.Resource) []byte {
	var b []byte
	for it := r.Iter(); it.Next(); {
		b = appendMessage(b, resAttributes, encodeKeyValue(it.Attribute()))
	}
	return b
}

func encodeScope(s instrumentation.Scope) []byte {
	var b []byte
	b = appendString(b, scopeName, s.Name)
	b = appendString(b, scopeVersion, s.Version)
	for it := s.Attributes.Iter(); it.Next(); {
		b = appendMessage(b, scopeAttributes, encodeKeyValue(it.Attribute()))
	}
	return b
}

// fieldSize is the size of a length-delimited field num holding n bytes.
func fieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// request gathers encoded spans into one ExportTraceServiceRequest, grouped
// as the official exporters group them: one ResourceSpans per resource, one
// ScopeSpans per instrumentation scope within it, in the order first seen.
// size tells what the request would weigh, so spans can be packed into
// datagrams of a bounded size.
type request struct {
	resources []*resourceGroup
}

type resourceGroup struct {
	res    *resource.Resource
	enc    []byte // the encoded Resource, nil for a nil resource
	scopes []*scopeGroup
}

type scopeGroup struct {
	scope instrumentation.Scope
	enc   []byte // the encoded scope, nil for the zero scope
	spans [][]byte
}

// group returns the scope group sd belongs to, creating it (and its
// resource group) when new.
func (q *request) group(sd sdktrace.ReadOnlySpan) *scopeGroup {
	res := sd.Resource()
	var rg *resourceGroup
	for _, g := range q.resources {
		if sameResource(g.res, res) {
			rg = g
			break
		}
	}
	if rg == nil {
		rg = &resourceGroup{res: res}
		if res != nil {
			rg.enc = encodeResource(res)
		}
		q.resources = append(q.resources, rg)
	}
	scope := sd.InstrumentationScope()
	for _, sg := range rg.scopes {
		if sg.scope.Name == scope.Name && sg.scope.Version == scope.Version && sg.scope.SchemaURL == scope.SchemaURL &&
			sg.scope.Attributes.Equals(&scope.Attributes) {
			return sg
		}
	}
	sg := &scopeGroup{scope: scope}
	if scope != (instrumentation.Scope{}) {
		sg.enc = encodeScope(scope)
	}
	rg.scopes = append(rg.scopes, sg)
	return sg
}

// sameResource reports whether a and b are the same resource (both nil, or
// equal attributes and schema).
func sameResource(a, b *resource.Resource) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func (g *scopeGroup) size() int {
	n := 0
	if g.enc != nil {
		n += fieldSize(ssScope, len(g.enc))
	}
	for _, s := range g.spans {
		n += fieldSize(ssSpans, len(s))
	}
	if u := g.scope.SchemaURL; u != "" {
		n += fieldSize(ssSchemaURL, len(u))
	}
	return n
}

func (g *resourceGroup) size() int {
	n := 0
	if g.res != nil {
		n += fieldSize(rsResource, len(g.enc))
	}
	for _, sg := range g.scopes {
		if len(sg.spans) > 0 {
			n += fieldSize(rsScopeSpans, sg.size())
		}
	}
	if g.res != nil && g.res.SchemaURL() != "" {
		n += fieldSize(rsSchemaURL, len(g.res.SchemaURL()))
	}
	return n
}

// size is the encoded size of the request.
func (q *request) size() int {
	n := 0
	for _, rg := range q.resources {
		if rg.spans() > 0 {
			n += fieldSize(reqResourceSpans, rg.size())
		}
	}
	return n
}

func (g *resourceGroup) spans() int {
	n := 0
	for _, sg := range g.scopes {
		n += len(sg.spans)
	}
	return n
}

// encode writes the request; groups left without spans are left out.
func (q *request) encode() []byte {
	b := make([]byte, 0, q.size())
	for _, rg := range q.resources {
		if rg.spans() == 0 {
			continue
		}
		b = protowire.AppendTag(b, reqResourceSpans, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(rg.size()))
		if rg.res != nil {
			b = appendMessage(b, rsResource, rg.enc)
		}
		for _, sg := range rg.scopes {
			if len(sg.spans) == 0 {
				continue
			}
			b = protowire.AppendTag(b, rsScopeSpans, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sg.size()))
			if sg.enc != nil {
				b = appendMessage(b, ssScope, sg.enc)
			}
			for _, s := range sg.spans {
				b = appendMessage(b, ssSpans, s)
			}
			b = appendString(b, ssSchemaURL, sg.scope.SchemaURL)
		}
		if rg.res != nil {
			b = appendString(b, rsSchemaURL, rg.res.SchemaURL())
		}
	}
	return b
}

// reset empties the request's span lists, keeping its groups' encodings.
func (q *request) reset() {
	for _, rg := range q.resources {
		for _, sg := range rg.scopes {
			sg.spans = sg.spans[:0]
		}
	}
}

// EncodeRequest writes spans as one OTLP ExportTraceServiceRequest in the
// protobuf wire format: what the OTLP/HTTP and OTLP/gRPC exporters send,
// and what a T1S datagram carries in base64.
func EncodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	var q request
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		sg := q.group(sd)
		sg.spans = append(sg.spans, encodeSpan(sd))
	}
	return q.encode()
}
