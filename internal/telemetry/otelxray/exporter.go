package otelxray

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The X-Ray daemon's OTLP datagram, as the AWS Distro for OpenTelemetry
// exporters write it (aws-otel-python-instrumentation's
// exporters/aws-otel-otlp-udp-exporter, aws-otel-js-instrumentation's
// OTLPUdpSpanExporter, the Ruby gem aws-distro-opentelemetry-exporter-xray-udp):
// the daemon protocol's JSON header line, then a format prefix, then the
// base64 (standard alphabet, padded) of an ExportTraceServiceRequest.
const (
	// DatagramHeader is the daemon protocol's first line, shared with
	// segment documents; the prefix after it tells the formats apart.
	DatagramHeader = `{"format":"json","version":1}` + "\n"
	// SampledPrefix marks sampled spans ("T1S"); the daemon forwards them
	// to X-Ray. Unsampled spans ("T1U", used by Application Signals for
	// metrics) are never exported here: the SDK drops them first.
	SampledPrefix = "T1S"
)

// MaxDatagram is the most one datagram carries: under the 64 KiB the X-Ray
// daemon reads per datagram and IPv4's 65,507-byte UDP payload. The AWS
// exporters bound a batch at 10 spans for the same reason
// (LAMBDA_SPAN_EXPORT_BATCH_SIZE); this exporter packs by size instead.
const MaxDatagram = 65000

// DefaultDaemonAddress is where the daemon listens when
// AWS_XRAY_DAEMON_ADDRESS does not say (the SDKs' default).
const DefaultDaemonAddress = "127.0.0.1:2000"

// ErrSpanTooLarge marks a span whose datagram alone would exceed the limit:
// it is dropped (and logged), the others are sent.
var ErrSpanTooLarge = errors.New("span too large for one datagram")

// Datagrams encodes spans into daemon datagrams (DatagramHeader, SampledPrefix,
// base64 of an ExportTraceServiceRequest) of at most max bytes each, keeping
// their order; a span that cannot fit in a datagram of its own is left out
// and reported in an error wrapping ErrSpanTooLarge (the others are still
// returned).
func Datagrams(spans []sdktrace.ReadOnlySpan, max int) ([][]byte, error) {
	budget := protoBudget(max)
	var q request
	var out [][]byte
	var errs []error
	flush := func() {
		if q.size() == 0 {
			return
		}
		out = append(out, datagram(q.encode()))
		q.reset()
	}
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		enc := encodeSpan(sd)
		sg := q.group(sd)
		sg.spans = append(sg.spans, enc)
		if q.size() <= budget {
			continue
		}
		// Over the budget: send what was there before, and start again with
		// this span alone.
		sg.spans = sg.spans[:len(sg.spans)-1]
		flush()
		sg.spans = append(sg.spans, enc)
		if q.size() > budget {
			sg.spans = sg.spans[:0]
			errs = append(errs, fmt.Errorf("%w: %q is %d bytes encoded, the datagram holds %d", ErrSpanTooLarge, sd.Name(), len(enc), budget))
		}
	}
	flush()
	return out, errors.Join(errs...)
}

// protoBudget is how many protobuf bytes fit a datagram of max bytes once
// the header, the prefix and base64's 4-for-3 are paid.
func protoBudget(max int) int {
	room := max - len(DatagramHeader) - len(SampledPrefix)
	if room < 4 {
		return 0
	}
	return room / 4 * 3
}

// datagram frames one encoded request.
func datagram(req []byte) []byte {
	n := len(DatagramHeader) + len(SampledPrefix) + base64.StdEncoding.EncodedLen(len(req))
	b := make([]byte, 0, n)
	b = append(b, DatagramHeader...)
	b = append(b, SampledPrefix...)
	return base64.StdEncoding.AppendEncode(b, req)
}

// UDPExporter is an OpenTelemetry span exporter (sdktrace.SpanExporter)
// that sends finished spans to the X-Ray daemon Lambda runs in every
// sandbox, as OTLP over UDP: the collector-free path, with no SigV4 signing
// and no network round trip in the invocation. Delivery is best effort, as
// UDP is: a datagram that cannot be sent is logged and dropped, never
// retried, and never fails the invocation. Safe for concurrent use.
type UDPExporter struct {
	addr string
	max  int
	log  *slog.Logger

	mu     sync.Mutex
	conn   net.Conn
	closed bool
}

// NewUDPExporter returns an exporter sending to the daemon at addr
// ("169.254.79.129:2000"; a daemon address in the SDKs' "udp:host:port
// tcp:host:port" form is accepted too, its udp part is used), logging what
// it cannot send to log (nil: discarded). The address is resolved now.
func NewUDPExporter(addr string, log *slog.Logger) (*UDPExporter, error) {
	udp, err := DaemonUDPAddress(addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("udp", udp)
	if err != nil {
		return nil, fmt.Errorf("otelxray: daemon %s: %w", udp, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &UDPExporter{addr: udp, max: MaxDatagram, log: log, conn: conn}, nil
}

// DaemonUDPAddress returns the UDP address an AWS_XRAY_DAEMON_ADDRESS value
// names: "host:port", or the udp part of "tcp:host:port udp:host:port"
// (either order); "" is DefaultDaemonAddress.
func DaemonUDPAddress(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultDaemonAddress, nil
	}
	addr := v
	if strings.ContainsAny(v, " ") || strings.HasPrefix(v, "udp:") || strings.HasPrefix(v, "tcp:") {
		addr = ""
		for f := range strings.FieldsSeq(v) {
			if a, ok := strings.CutPrefix(f, "udp:"); ok {
				addr = a
			}
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return "", fmt.Errorf("otelxray: daemon address %q is not host:port (or udp:host:port tcp:host:port)", v)
	}
	return addr, nil
}

// Addr is the daemon address datagrams go to.
func (e *UDPExporter) Addr() string { return e.addr }

// ExportSpans sends spans as datagrams of at most MaxDatagram bytes. It
// returns nil even when a datagram could not be sent (logged instead): the
// daemon is best effort, and the SDK's error handler would print plain text.
func (e *UDPExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	dgs, err := Datagrams(spans, e.max)
	if err != nil {
		e.log.Warn("otelxray: spans dropped", "error", err.Error())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		if len(dgs) > 0 {
			e.log.Warn("otelxray: exporter is shut down; spans dropped", "datagrams", len(dgs))
		}
		return nil
	}
	for i, d := range dgs {
		if ctx.Err() != nil {
			e.log.Warn("otelxray: export cancelled; spans dropped", "datagrams", len(dgs)-i, "error", ctx.Err().Error())
			return nil
		}
		if _, err := e.conn.Write(d); err != nil {
			e.log.Warn("otelxray: datagram not sent", "daemon", e.addr, "bytes", len(d), "error", err.Error())
		}
	}
	return nil
}

// Shutdown closes the socket; later exports drop their spans.
func (e *UDPExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if err := e.conn.Close(); err != nil {
		return fmt.Errorf("otelxray: close daemon socket: %w", err)
	}
	return nil
}
