//go:build xraylite

package telemetry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// daemonAddressEnv names the daemon's address; the Lambda runtime sets it.
const daemonAddressEnv = "AWS_XRAY_DAEMON_ADDRESS"

// defaultDaemonAddress is where the daemon listens when nothing says otherwise.
const defaultDaemonAddress = "127.0.0.1:2000"

// daemonHeader starts every datagram of the daemon protocol.
const daemonHeader = "{\"format\": \"json\", \"version\": 1}\n"

// maxDatagram is the largest UDP payload the daemon accepts.
const maxDatagram = 64 * 1024

// errDaemonAddress marks an unusable daemon address.
var errDaemonAddress = errors.New("invalid x-ray daemon address")

// tracer is the process-wide emitter and sampler Configure sets up.
var tracer = newLiteTracer()

// liteTracer sends finished documents to the daemon over UDP and takes the
// sampling decision for new traces. It is safe for concurrent use.
type liteTracer struct {
	mu        sync.Mutex
	pinned    string // explicit daemon address (Configure); "" follows the environment
	sampleAll bool
	version   string
	conn      *net.UDPConn
	sampler   *sampler

	sent, dropped atomic.Int64 // documents written / lost (encode, dial or write errors)
}

func newLiteTracer() *liteTracer {
	return &liteTracer{sampler: newSampler(rand.Float64)}
}

// Configure sets where and how segments are emitted. It changes process-wide
// state: call it once at start-up, before any segment exists. Without a call
// the defaults apply (AWS_XRAY_DAEMON_ADDRESS, else 127.0.0.1:2000, read when
// the first document is sent), which is what Lambda needs. The lightweight
// tracer logs nothing, so WithSDKLogger has no effect.
func Configure(opts ...ConfigOption) error {
	var c traceConfig
	for _, o := range opts {
		o(&c)
	}
	if c.daemonAddr != "" {
		if _, err := net.ResolveUDPAddr("udp", c.daemonAddr); err != nil {
			return fmt.Errorf("telemetry: daemon address %q: %w", c.daemonAddr, err)
		}
	}
	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	tracer.pinned, tracer.sampleAll, tracer.version = c.daemonAddr, c.sampleAll, c.serviceVersion
	if tracer.conn != nil {
		_ = tracer.conn.Close()
		tracer.conn = nil
	}
	return nil
}

// serviceVersion is the version Configure recorded.
func (t *liteTracer) serviceVersion() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// sample decides whether a new trace started at now is sampled.
func (t *liteTracer) sample(now time.Time) bool {
	t.mu.Lock()
	all := t.sampleAll
	t.mu.Unlock()
	return all || t.sampler.sample(now)
}

// emit encodes doc and sends it without blocking; failures are counted in
// t.dropped, never returned: tracing must not break the traced work.
func (t *liteTracer) emit(doc *segmentDoc) {
	b, err := encodeDatagram(doc)
	if err != nil {
		t.dropped.Add(1)
		return
	}
	conn, err := t.connection()
	if err != nil {
		t.dropped.Add(1)
		return
	}
	if _, err := conn.Write(b); err != nil {
		t.dropped.Add(1)
		return
	}
	t.sent.Add(1)
}

// connection returns the UDP socket to the daemon, dialling it on first use.
// Dialling UDP sends nothing, so it does not block.
func (t *liteTracer) connection() (*net.UDPConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		return t.conn, nil
	}
	addr := t.pinned
	if addr == "" {
		a, err := parseDaemonAddress(os.Getenv(daemonAddressEnv))
		if err != nil {
			return nil, err
		}
		addr = a
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resolve daemon %q: %w", addr, err)
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("telemetry: dial daemon %s: %w", ua, err)
	}
	t.conn = conn
	return conn, nil
}

// encodeDatagram returns the daemon-protocol datagram for doc. A document
// over the UDP limit loses its metadata and exception stacks first; if it is
// still too large, it is an error.
func encodeDatagram(doc *segmentDoc) ([]byte, error) {
	b, err := appendDoc(doc)
	if err != nil {
		return nil, err
	}
	if len(b) <= maxDatagram {
		return b, nil
	}
	slim := *doc
	slim.Metadata = nil
	if doc.Cause != nil {
		c := *doc.Cause
		c.Exceptions = make([]exceptionDoc, len(doc.Cause.Exceptions))
		for i, e := range doc.Cause.Exceptions {
			e.Stack = nil
			c.Exceptions[i] = e
		}
		slim.Cause = &c
	}
	if b, err = appendDoc(&slim); err != nil {
		return nil, err
	}
	if len(b) > maxDatagram {
		return nil, fmt.Errorf("telemetry: segment %s is %d bytes, over the %d-byte datagram limit", doc.ID, len(b), maxDatagram)
	}
	return b, nil
}

func appendDoc(doc *segmentDoc) ([]byte, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("telemetry: encode segment %s: %w", doc.ID, err)
	}
	return append([]byte(daemonHeader), body...), nil
}

// parseDaemonAddress returns the UDP address ("host:port") in an
// AWS_XRAY_DAEMON_ADDRESS value: either "host:port" or the two-address form
// "tcp:host:port udp:host:port" (either order). Empty means the default
// 127.0.0.1:2000. Every error wraps errDaemonAddress.
func parseDaemonAddress(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return defaultDaemonAddress, nil
	}
	if len(s) > 512 {
		return "", fmt.Errorf("%w: %d bytes", errDaemonAddress, len(s))
	}
	fields := strings.Fields(s)
	var addr string
	switch len(fields) {
	case 1:
		addr = fields[0]
	case 2:
		for _, f := range fields {
			proto, rest, ok := strings.Cut(f, ":")
			switch {
			case ok && proto == "udp":
				addr = rest
			case ok && proto == "tcp":
			default:
				return "", fmt.Errorf("%w: %q: want tcp:host:port udp:host:port", errDaemonAddress, s)
			}
		}
		if addr == "" {
			return "", fmt.Errorf("%w: %q has no udp: address", errDaemonAddress, s)
		}
	default:
		return "", fmt.Errorf("%w: %q", errDaemonAddress, s)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", errDaemonAddress, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: %q: bad port", errDaemonAddress, addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// sampler is the default rule of X-Ray's local sampling: a reservoir of one
// trace per second, plus a fixed 5% of the traces beyond it.
type sampler struct {
	mu     sync.Mutex
	second int64
	used   int
	rand   func() float64
}

const (
	samplerReservoir = 1    // traces per second always sampled
	samplerRate      = 0.05 // fraction sampled beyond the reservoir
)

func newSampler(r func() float64) *sampler { return &sampler{second: -1, rand: r} }

// sample reports whether a trace started at now is sampled.
func (s *sampler) sample(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := now.Unix(); sec != s.second {
		s.second, s.used = sec, 0
	}
	if s.used < samplerReservoir {
		s.used++
		return true
	}
	return s.rand() < samplerRate
}
