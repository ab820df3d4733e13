package telemetry

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidTraceHeader marks a trace header that cannot be used: it is
// empty, has no Root, or its Root or Parent is not in X-Ray's id format.
// Callers branch on it to start a fresh trace instead of continuing one.
var ErrInvalidTraceHeader = errors.New("invalid trace header")

// Header is an X-Ray trace header (X-Amzn-Trace-Id, the AWSTraceHeader SQS
// system attribute, PutEvents' TraceHeader). Root is the trace id
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

// validTraceID reports whether id has X-Ray's trace id shape:
// "1-" + 8 hex digits (epoch seconds) + "-" + 24 hex digits.
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
