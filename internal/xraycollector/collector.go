// Package xraycollector is a local stand-in for the X-Ray daemon, used by
// `linegate local`: it receives what the daemon Lambda runs in every sandbox
// receives over UDP — the segment documents the X-Ray SDK sends, and the OTLP
// spans OpenTelemetry sends ("T1S" datagrams, see otlp.go) — keeps them by
// trace id in one view, and serves them as JSON so a developer (or a test)
// can see each trace's segments, subsegments, annotations, errors and
// cross-trace links without AWS, whichever backend traced them.
//
// Links. The SDK cannot write X-Ray's "links" member, so telemetry records a
// cross-trace link as the annotations upstreamTraceId / upstreamParentId
// (under either backend); the collector reports those, any native "links"
// member and OTLP span links as the trace's Links, each pointing at the
// upstream trace and (sub)segment. Linked traces stay separate traces.
package xraycollector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"

	"github.com/linegate/linegate/internal/ring"
)

// Annotation names telemetry's (*Span).Link writes.
const (
	annUpstreamTrace  = "upstreamTraceId"
	annUpstreamParent = "upstreamParentId"
)

// ErrMalformed marks a datagram that is not a daemon-protocol message: a JSON
// header line {"format": "json", "version": 1} followed by a segment document
// with an id and a trace id.
var ErrMalformed = errors.New("malformed x-ray datagram")

// maxDatagram is the largest UDP payload the SDK sends (it splits at 64 KiB).
const maxDatagram = 64 * 1024

// maxDepth bounds subsegment nesting so a hostile document cannot recurse
// without limit.
const maxDepth = 64

// Segment is one segment or subsegment of a trace, flattened: ParentID names
// the enclosing (sub)segment (for a root segment, the upstream caller's id or
// "").
type Segment struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	ParentID    string         `json:"parentId,omitempty"`
	Type        string         `json:"type"`
	Namespace   string         `json:"namespace,omitempty"`
	Start       float64        `json:"start"`
	End         float64        `json:"end,omitempty"`
	InProgress  bool           `json:"inProgress,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
	Error       bool           `json:"error"`
	Fault       bool           `json:"fault"`
	Throttle    bool           `json:"throttle,omitempty"`
	HTTPStatus  int            `json:"httpStatus,omitempty"`
	// Method and Path are the HTTP request of a remote call (a LINE API
	// call): its method and the URL's path, never its query.
	Method     string   `json:"method,omitempty"`
	Path       string   `json:"path,omitempty"`
	Operation  string   `json:"operation,omitempty"`
	Exceptions []string `json:"exceptions,omitempty"`
	// OTLP marks a span OpenTelemetry sent (a "T1S" datagram) rather than
	// a segment document of the X-Ray SDK.
	OTLP bool `json:"otlp,omitempty"`

	links []Link // from the document's native "links" member
}

// Link points from a (sub)segment of this trace to the upstream trace and
// (sub)segment that caused it.
type Link struct {
	FromID   string `json:"fromId"`
	TraceID  string `json:"traceId"`
	ParentID string `json:"parentId,omitempty"`
}

// Trace is every segment received for one trace id, in arrival order.
type Trace struct {
	TraceID  string    `json:"traceId"`
	Segments []Segment `json:"segments"`
	Links    []Link    `json:"links"`
}

// Option tunes New.
type Option func(*Collector)

// Bounds of what a Collector keeps, so a local daemon left running all day
// holds a bounded amount of trace data.
const (
	// DefaultMaxTraces is how many traces are kept: the newest first seen.
	DefaultMaxTraces = 1000
	// DefaultMaxSegments is how many (sub)segments one trace keeps; later
	// new ones are dropped (updates of kept ones still apply).
	DefaultMaxSegments = 500
)

// WithMaxTraces bounds how many traces are kept (default DefaultMaxTraces);
// the oldest is dropped first.
func WithMaxTraces(n int) Option {
	return func(c *Collector) {
		if n > 0 {
			c.maxTraces = n
		}
	}
}

// WithMaxSegments bounds how many (sub)segments one trace keeps (default
// DefaultMaxSegments).
func WithMaxSegments(n int) Option {
	return func(c *Collector) {
		if n > 0 {
			c.maxSegments = n
		}
	}
}

// WithLogger sets where malformed datagrams are reported (default: discarded).
func WithLogger(l *slog.Logger) Option {
	return func(c *Collector) { c.log = l }
}

// Collector stores received segments by trace id. It is safe for concurrent
// use.
type Collector struct {
	maxTraces   int
	maxSegments int
	log         *slog.Logger

	mu     sync.Mutex
	traces map[string]*trace
	order  *ring.Buffer[string]
	conn   net.PacketConn
	done   chan struct{}
	notify chan struct{}
}

type trace struct {
	segs  map[string]Segment
	order []string
}

// New returns an empty collector; call Listen to receive segments, or Ingest
// to feed datagrams directly.
func New(opts ...Option) *Collector {
	c := &Collector{
		maxTraces:   DefaultMaxTraces,
		maxSegments: DefaultMaxSegments,
		log:         slog.New(slog.DiscardHandler),
		traces:      map[string]*trace{},
		notify:      make(chan struct{}),
	}
	for _, o := range opts {
		o(c)
	}
	c.order = ring.New[string](c.maxTraces)
	return c
}

// Listen binds a UDP socket on addr ("127.0.0.1:0" picks a free port) and
// receives datagrams in the background until Close. Point the SDK at Addr().
func (c *Collector) Listen(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	conn, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("collector: listen %s: %w", addr, err)
	}
	c.mu.Lock()
	if c.conn != nil {
		c.mu.Unlock()
		_ = conn.Close()
		return fmt.Errorf("collector: already listening on %s", c.conn.LocalAddr())
	}
	c.conn = conn
	c.done = make(chan struct{})
	c.mu.Unlock()
	go c.serve(conn, c.done)
	return nil
}

// Addr is the bound UDP address ("127.0.0.1:40123"), "" before Listen.
func (c *Collector) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return ""
	}
	return c.conn.LocalAddr().String()
}

// Close stops receiving and waits for the receive loop to end. Stored traces
// stay readable.
func (c *Collector) Close() error {
	c.mu.Lock()
	conn, done := c.conn, c.done
	c.conn = nil
	c.mu.Unlock()
	if conn == nil {
		return nil
	}
	err := conn.Close()
	<-done
	if err != nil {
		return fmt.Errorf("collector: close: %w", err)
	}
	return nil
}

func (c *Collector) serve(conn net.PacketConn, done chan struct{}) {
	defer close(done)
	buf := make([]byte, maxDatagram)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Warn("collector: read", "error", err.Error())
			continue
		}
		if err := c.Ingest(buf[:n]); err != nil {
			c.log.Warn("collector: dropped datagram", "error", err.Error())
		}
	}
}

// Ingest parses one daemon-protocol datagram — a segment document from the
// X-Ray SDK, or OTLP spans from OpenTelemetry (ParseOTLPDatagram) — and
// stores its segments.
func (c *Collector) Ingest(datagram []byte) error {
	traces, err := parse(datagram)
	if err != nil {
		return err
	}
	if len(traces) == 0 {
		return nil
	}
	c.mu.Lock()
	for _, tr := range traces {
		c.store(tr.TraceID, tr.Segments)
	}
	close(c.notify)
	c.notify = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// store keeps segs under traceID; c.mu must be held.
func (c *Collector) store(traceID string, segs []Segment) {
	t, ok := c.traces[traceID]
	if !ok {
		t = &trace{segs: map[string]Segment{}}
		c.traces[traceID] = t
		if old, evicted := c.order.Push(traceID); evicted {
			delete(c.traces, old)
		}
	}
	for _, s := range segs {
		old, seen := t.segs[s.ID]
		if !seen {
			if len(t.order) >= c.maxSegments {
				continue // a runaway trace keeps its first segments
			}
			t.order = append(t.order, s.ID)
		} else if !old.InProgress && s.InProgress {
			continue // a late in-progress copy never replaces the finished one
		}
		t.segs[s.ID] = s
	}
}

// parse reads one datagram of either format into its traces.
func parse(b []byte) ([]Trace, error) {
	body, err := datagramBody(b)
	if err != nil {
		return nil, err
	}
	if isOTLP(body) {
		return ParseOTLPDatagram(b)
	}
	id, segs, err := ParseDatagram(b)
	if err != nil {
		return nil, err
	}
	return []Trace{{TraceID: id, Segments: segs}}, nil
}

// Changed returns a channel closed at the next Ingest that stores something,
// so a caller can wait for segments without polling.
func (c *Collector) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notify
}

// Traces returns a snapshot of every stored trace, oldest first.
func (c *Collector) Traces() []Trace {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.order.All()
	out := make([]Trace, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.snapshot(id))
	}
	return out
}

// Trace returns a snapshot of one trace.
func (c *Collector) Trace(id string) (Trace, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.traces[id]; !ok {
		return Trace{}, false
	}
	return c.snapshot(id), true
}

// snapshot copies trace id; c.mu must be held.
func (c *Collector) snapshot(id string) Trace {
	t := c.traces[id]
	out := Trace{TraceID: id, Segments: make([]Segment, 0, len(t.order)), Links: []Link{}}
	for _, sid := range t.order {
		s := t.segs[sid]
		out.Segments = append(out.Segments, s)
		if up, _ := s.Annotations[annUpstreamTrace].(string); up != "" {
			parent, _ := s.Annotations[annUpstreamParent].(string)
			out.Links = appendLink(out.Links, Link{FromID: s.ID, TraceID: up, ParentID: parent})
		}
	}
	for _, l := range t.native() {
		out.Links = appendLink(out.Links, l)
	}
	return out
}

// native returns the links stored from documents' "links" members.
func (t *trace) native() []Link {
	var out []Link
	for _, sid := range t.order {
		out = append(out, t.segs[sid].links...)
	}
	return out
}

func appendLink(ls []Link, l Link) []Link {
	if slices.Contains(ls, l) {
		return ls
	}
	return append(ls, l)
}

// Handler serves GET requests with the stored traces as a JSON array
// (oldest first); ?traceId=... narrows it to one trace (404 if unknown).
func (c *Collector) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		traces := c.Traces()
		if id := r.URL.Query().Get("traceId"); id != "" {
			t, ok := c.Trace(id)
			if !ok {
				http.Error(w, "trace not found", http.StatusNotFound)
				return
			}
			traces = []Trace{t}
		}
		sort.SliceStable(traces, func(i, j int) bool { return start(traces[i]) < start(traces[j]) })
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(traces)
	})
}

// start is the earliest start time among t's segments.
func start(t Trace) float64 {
	first := 0.0
	for i, s := range t.Segments {
		if i == 0 || s.Start < first {
			first = s.Start
		}
	}
	return first
}

// document is the subset of an X-Ray segment document the collector reads.
type document struct {
	ID          string            `json:"id"`
	TraceID     string            `json:"trace_id"`
	ParentID    string            `json:"parent_id"`
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Namespace   string            `json:"namespace"`
	StartTime   float64           `json:"start_time"`
	EndTime     float64           `json:"end_time"`
	InProgress  bool              `json:"in_progress"`
	Error       bool              `json:"error"`
	Fault       bool              `json:"fault"`
	Throttle    bool              `json:"throttle"`
	Annotations map[string]any    `json:"annotations"`
	HTTP        *docHTTP          `json:"http"`
	AWS         map[string]any    `json:"aws"`
	Cause       json.RawMessage   `json:"cause"`
	Links       []docLink         `json:"links"`
	Subsegments []json.RawMessage `json:"subsegments"`
}

type docHTTP struct {
	Request *struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
	Response *struct {
		Status int `json:"status"`
	} `json:"response"`
}

type docLink struct {
	TraceID string `json:"trace_id"`
	ID      string `json:"id"`
}

type docCause struct {
	Exceptions []struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"exceptions"`
}

// header is the daemon protocol's first line.
type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// datagramBody checks a datagram's size and header line
// ({"format": "json", "version": 1}, with or without spaces) and returns
// what follows the line. Every error wraps ErrMalformed.
func datagramBody(b []byte) ([]byte, error) {
	if len(b) > maxDatagram {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	line, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("%w: no header line", ErrMalformed)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if h.Format != "json" || h.Version != 1 {
		return nil, fmt.Errorf("%w: header format %q version %d", ErrMalformed, h.Format, h.Version)
	}
	return body, nil
}

// ParseDatagram parses one daemon-protocol datagram: the header line
// {"format": "json", "version": 1}, a newline, and one segment document (a
// segment with nested subsegments, or an independent subsegment document
// with type "subsegment" and parent_id). It returns the trace id and the
// document flattened into segments, the document's own first. Every error
// wraps ErrMalformed.
func ParseDatagram(b []byte) (string, []Segment, error) {
	body, err := datagramBody(b)
	if err != nil {
		return "", nil, err
	}
	var doc document
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", nil, fmt.Errorf("%w: document: %v", ErrMalformed, err)
	}
	if doc.TraceID == "" || doc.ID == "" {
		return "", nil, fmt.Errorf("%w: document without trace_id or id", ErrMalformed)
	}
	segs, err := flatten(doc, doc.ParentID, 0, nil)
	if err != nil {
		return "", nil, err
	}
	return doc.TraceID, segs, nil
}

// flatten appends doc and its nested subsegments to out; parent is the id of
// the enclosing (sub)segment.
func flatten(doc document, parent string, depth int, out []Segment) ([]Segment, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: subsegments nested deeper than %d", ErrMalformed, maxDepth)
	}
	typ := doc.Type
	if typ == "" {
		typ = "segment"
		if depth > 0 {
			typ = "subsegment"
		}
	}
	s := Segment{
		ID: doc.ID, Name: doc.Name, ParentID: parent, Type: typ, Namespace: doc.Namespace,
		Start: doc.StartTime, End: doc.EndTime, InProgress: doc.InProgress,
		Annotations: doc.Annotations, Error: doc.Error, Fault: doc.Fault, Throttle: doc.Throttle,
	}
	if doc.HTTP != nil && doc.HTTP.Response != nil {
		s.HTTPStatus = doc.HTTP.Response.Status
	}
	if doc.HTTP != nil && doc.HTTP.Request != nil {
		s.Method = doc.HTTP.Request.Method
		if u, err := url.Parse(doc.HTTP.Request.URL); err == nil {
			s.Path = u.Path
		}
	}
	if op, ok := doc.AWS["operation"].(string); ok {
		s.Operation = op
	}
	if len(doc.Cause) > 0 && doc.Cause[0] == '{' {
		var cause docCause
		if err := json.Unmarshal(doc.Cause, &cause); err == nil {
			for _, e := range cause.Exceptions {
				s.Exceptions = append(s.Exceptions, e.Type+": "+e.Message)
			}
		}
	}
	for _, l := range doc.Links {
		if l.TraceID != "" {
			s.links = append(s.links, Link{FromID: doc.ID, TraceID: l.TraceID, ParentID: l.ID})
		}
	}
	out = append(out, s)
	for _, raw := range doc.Subsegments {
		var sub document
		if err := json.Unmarshal(raw, &sub); err != nil {
			return nil, fmt.Errorf("%w: subsegment of %s: %v", ErrMalformed, doc.ID, err)
		}
		if sub.ID == "" {
			return nil, fmt.Errorf("%w: subsegment of %s without id", ErrMalformed, doc.ID)
		}
		var err error
		if out, err = flatten(sub, doc.ID, depth+1, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}
