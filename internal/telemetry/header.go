package telemetry

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidTraceHeader marks a trace header that cannot be used: it is
// empty, has no Root, or its Root or Parent is not in X-Ray's id format.
// Callers branch on it to start a fresh trace instead of continuing one.
var ErrInvalidTraceHeader = errors.New("invalid trace header")

// Header is an X-Ray trace header (X-Amzn-Trace-Id, the AWSTraceHeader SQS
// system attribute, PutEvents' TraceHeader), the format every AWS service
// propagates a trace in, whichever backend records the spans. The format is
// documented at
// https://docs.aws.amazon.com/xray/latest/devguide/xray-concepts.html#xray-concepts-tracingheader. Root is the trace id
// ("1-5759e988-bd862e3fe1be46a994272793"), Parent the id of the calling
// (sub)segment (16 hex digits, may be empty) and Sampled the upstream sampling
// decision ("Sampled=?" or a missing decision parse as false).
type Header struct {
	Root    string
	Parent  string
	Sampled bool
}

// String formats h as "Root=...;Parent=...;Sampled=1", omitting an empty
// Parent; the zero Header formats as "".
func (h Header) String() string {
	if h.Root == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("Root=")
	b.WriteString(h.Root)
	if h.Parent != "" {
		b.WriteString(";Parent=")
		b.WriteString(h.Parent)
	}
	if h.Sampled {
		b.WriteString(";Sampled=1")
	} else {
		b.WriteString(";Sampled=0")
	}
	return b.String()
}

// maxHeaderLen bounds the input ParseTraceHeader looks at: real headers are
// well under 256 bytes (Root, Parent, Sampled, Lineage, Self).
const maxHeaderLen = 2048

// ParseTraceHeader parses an X-Ray trace header such as
// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".
// Keys are case-sensitive as X-Ray writes them; unknown keys (Lineage, Self)
// are ignored. Every error wraps ErrInvalidTraceHeader.
func ParseTraceHeader(s string) (Header, error) {
	if len(s) > maxHeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes is longer than %d", ErrInvalidTraceHeader, len(s), maxHeaderLen)
	}
	var h Header
	for part := range strings.SplitSeq(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Root":
			h.Root = v
		case "Parent":
			h.Parent = v
		case "Sampled":
			h.Sampled = v == "1"
		}
	}
	if h.Root == "" {
		return Header{}, fmt.Errorf("%w: no Root", ErrInvalidTraceHeader)
	}
	if !validTraceID(h.Root) {
		return Header{}, fmt.Errorf("%w: Root %q is not 1-<8 hex>-<24 hex>", ErrInvalidTraceHeader, h.Root)
	}
	if h.Parent != "" && !isHex(h.Parent, 16) {
		return Header{}, fmt.Errorf("%w: Parent %q is not 16 hex digits", ErrInvalidTraceHeader, h.Parent)
	}
	return h, nil
}

// IsTraceID reports whether id has X-Ray's trace id shape: "1-" + 8 hex
// digits (the trace's start in epoch seconds) + "-" + 24 hex digits (96
// random bits), as documented at
// https://docs.aws.amazon.com/xray/latest/devguide/xray-services-elb.html
// ("X-Ray trace ID format").
func IsTraceID(id string) bool { return validTraceID(id) }

// FormatTraceID writes a 128-bit trace id (OpenTelemetry's, W3C's) the X-Ray
// way: its first 4 bytes are the 8 hex digits, the other 12 the 24. An id
// minted by an X-Ray id generator round-trips through ParseTraceID.
func FormatTraceID(id [16]byte) string {
	var b [35]byte
	b[0], b[1], b[10] = '1', '-', '-'
	hex.Encode(b[2:10], id[:4])
	hex.Encode(b[11:], id[4:])
	return string(b[:])
}

// ParseTraceID is FormatTraceID's inverse; an id that is not in X-Ray's
// shape is an error wrapping ErrInvalidTraceHeader.
func ParseTraceID(s string) ([16]byte, error) {
	var id [16]byte
	if !validTraceID(s) {
		return id, fmt.Errorf("%w: trace id %q is not 1-<8 hex>-<24 hex>", ErrInvalidTraceHeader, s)
	}
	// validTraceID checked every digit, so decoding cannot fail.
	_, _ = hex.Decode(id[:4], []byte(s[2:10]))
	_, _ = hex.Decode(id[4:], []byte(s[11:]))
	return id, nil
}

// invokeHeaderKey is the context key aws-lambda-go stores each invocation's
// trace header under (the Lambda-Runtime-Trace-Id of the invoke): a plain
// string, the runtime's choice.
const invokeHeaderKey = "x-amzn-trace-id"

// InvokeHeader returns the trace header of the Lambda invocation ctx belongs
// to: what aws-lambda-go put in the invoke's context. It is read from the
// context only, never from _X_AMZN_TRACE_ID: since aws-lambda-go v1.51.0 that
// variable is no longer set per invoke when invokes run concurrently
// (lambdacontext.MaxConcurrency() > 1), so a variable would name another
// invoke's trace. ok is false when ctx carries no valid header.
func InvokeHeader(ctx context.Context) (Header, bool) {
	s, _ := ctx.Value(invokeHeaderKey).(string)
	if s == "" {
		return Header{}, false
	}
	h, err := ParseTraceHeader(s)
	return h, err == nil
}

// WithInvokeHeader returns ctx carrying h as its invocation's trace header,
// the way aws-lambda-go does: for `linegate local`, which runs invocations
// itself, and for tests.
func WithInvokeHeader(ctx context.Context, h Header) context.Context {
	//lint:ignore SA1029 the key is aws-lambda-go's own, a plain string
	return context.WithValue(ctx, invokeHeaderKey, h.String()) //nolint:staticcheck
}

// validTraceID reports whether id has X-Ray's trace id shape (IsTraceID).
func validTraceID(id string) bool {
	return len(id) == 35 && id[0] == '1' && id[1] == '-' && id[10] == '-' &&
		isHex(id[2:10], 8) && isHex(id[11:], 24)
}

// isHex reports whether s is exactly n lower- or upper-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
