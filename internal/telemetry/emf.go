package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"
)

// DefaultNamespace is the CloudWatch namespace of linegate's metrics.
const DefaultNamespace = "linegate"

// EMF limits from the Embedded Metric Format specification.
const (
	maxMetricsPerDirective = 100
	maxValuesPerMetric     = 100
	maxDimensions          = 30
	maxNamespaceLen        = 255
)

// CloudWatch units Metrics writes.
const (
	unitCount        = "Count"
	unitMilliseconds = "Milliseconds"
)

// MetricsOption tunes NewMetrics.
type MetricsOption func(*Metrics)

// WithClock sets the clock that stamps each flushed line (default time.Now).
func WithClock(now func() time.Time) MetricsOption {
	return func(m *Metrics) { m.now = now }
}

// WithFolding lets Fold hand what has been recorded to a JSON log line
// (FoldingLogs says when a function's logs are JSON); without it Fold
// always declines and every metric goes out through Flush.
func WithFolding(on bool) MetricsOption {
	return func(m *Metrics) { m.folding = on }
}

// Metrics collects counts and durations and writes them as CloudWatch
// Embedded Metric Format log lines, which CloudWatch Logs turns into metrics
// without any API call. It satisfies the cores' recorder interface
// (Count, Duration) and is safe for concurrent use.
type Metrics struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	now       func() time.Time
	dimKeys   []string
	dims      map[string]string
	order     []string
	series    map[string]*series
	children  []*Metrics // With's: flushed with this one
	folding   bool
}

type series struct {
	unit   string
	values []float64
}

// NewMetrics returns a Metrics writing to w (os.Stdout in Lambda) under
// namespace (DefaultNamespace when empty; cut to 255 characters).
func NewMetrics(w io.Writer, namespace string, opts ...MetricsOption) *Metrics {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if len(namespace) > maxNamespaceLen {
		namespace = namespace[:maxNamespaceLen]
	}
	m := &Metrics{w: w, namespace: namespace, now: time.Now, dims: map[string]string{}, series: map[string]*series{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// SetDimension sets dimension k (e.g. "Function") to v on every metric
// flushed from now on. Empty keys or values, the key "_aws", and keys beyond
// the 30 the specification allows are ignored.
func (m *Metrics) SetDimension(k, v string) {
	if k == "" || v == "" || k == "_aws" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dims[k]; !ok {
		if len(m.dimKeys) >= maxDimensions {
			return
		}
		m.dimKeys = append(m.dimKeys, k)
	}
	m.dims[k] = v
}

// With returns metrics written to the same writer under the same
// namespace with m's dimensions and dimension k set to v besides (a named
// channel's quota under Channel=NAME), flushed whenever m is. Dimensions
// set on m later are not the child's.
func (m *Metrics) With(k, v string) *Metrics {
	c := NewMetrics(m.w, m.namespace, WithClock(m.now))
	m.mu.Lock()
	for _, key := range m.dimKeys {
		c.SetDimension(key, m.dims[key])
	}
	m.children = append(m.children, c)
	m.mu.Unlock()
	c.SetDimension(k, v)
	return c
}

// Count records n occurrences of name (unit Count).
func (m *Metrics) Count(name string, n float64) { m.observe(name, unitCount, n) }

// Duration records d for name in milliseconds (unit Milliseconds), to the
// microsecond: CloudWatch keeps no finer figure worth its bytes in the log.
func (m *Metrics) Duration(name string, d time.Duration) {
	m.observe(name, unitMilliseconds, float64(d.Round(time.Microsecond))/float64(time.Millisecond))
}

// observe appends one value; a name's unit is fixed by its first observation
// and values that JSON cannot carry (NaN, ±Inf) are dropped.
func (m *Metrics) observe(name, unit string, v float64) {
	if name == "" || name == "_aws" || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.series[name]
	if !ok {
		s = &series{unit: unit}
		m.series[name] = s
		m.order = append(m.order, name)
	}
	s.values = append(s.values, v)
}

// Fold takes everything recorded since the last flush as the members of
// one EMF document — the dimensions, each metric's value and the _aws
// metadata — for the caller to log as part of its own JSON line, and resets
// it, as Flush would. The Embedded Metric Format lets an EMF document carry
// any other member (its specification's root node "MAY contain any other
// members"), so a record's log line can be its invocation's metrics too and
// one line is written instead of two. The attribute has an empty key: slog's
// JSON handler inlines its members at the top level, where EMF looks for
// them, and NewRedactingHandler passes it through unredacted (metric names
// are not secrets, and a name such as SecretRereads must stay a name).
//
// Fold declines (false, and keeps everything for Flush) when the Metrics was
// built without WithFolding, when nothing was recorded, and when what was
// recorded needs more than one document (over 100 metrics, or a metric
// with over 100 values).
func (m *Metrics) Fold() (slog.Attr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.folding || len(m.order) == 0 || len(m.order) > maxMetricsPerDirective {
		return slog.Attr{}, false
	}
	for _, n := range m.order {
		if len(m.series[n].values) > maxValuesPerMetric {
			return slog.Attr{}, false
		}
	}
	doc := emfMembers{ts: m.now().UnixMilli(), namespace: m.namespace, dimKeys: append([]string(nil), m.dimKeys...),
		dims: make(map[string]string, len(m.dims)), series: m.series}
	for k, v := range m.dims {
		doc.dims[k] = v
	}
	for _, n := range m.order {
		if _, clash := m.dims[n]; !clash {
			doc.names = append(doc.names, n)
		}
	}
	m.order, m.series = nil, map[string]*series{}
	return slog.Any("", doc), true
}

// emfMembers is one folded EMF document; as a slog.LogValuer it is the group
// of the document's members.
type emfMembers struct {
	ts        int64
	namespace string
	dimKeys   []string
	dims      map[string]string
	names     []string
	series    map[string]*series
}

// LogValue implements slog.LogValuer: the dimensions, the metrics' values
// (a number, or an array when observed more than once) and _aws.
func (d emfMembers) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(d.dimKeys)+len(d.names)+1)
	dir := emfDirective{Namespace: d.namespace, Dimensions: [][]string{append([]string{}, d.dimKeys...)}}
	for _, k := range d.dimKeys {
		attrs = append(attrs, slog.String(k, d.dims[k]))
	}
	for _, n := range d.names {
		s := d.series[n]
		if len(s.values) == 1 {
			attrs = append(attrs, slog.Float64(n, s.values[0]))
		} else {
			attrs = append(attrs, slog.Any(n, s.values))
		}
		dir.Metrics = append(dir.Metrics, emfMetric{Name: n, Unit: s.unit})
	}
	attrs = append(attrs, slog.Any("_aws", emfMeta{Timestamp: d.ts, CloudWatchMetrics: []emfDirective{dir}}))
	return slog.GroupValue(attrs...)
}

// Flush writes everything recorded since the last flush and resets it. One
// JSON line carries up to 100 metrics with up to 100 values each; more make
// more lines. A metric observed once is a number, more often an array.
// Metrics named like a dimension are dropped (they would collide at the top
// level). Nothing recorded writes nothing. The metrics made by With are
// flushed after m's.
func (m *Metrics) Flush() error {
	err := m.flush()
	m.mu.Lock()
	children := m.children
	m.mu.Unlock()
	for _, c := range children {
		err = errors.Join(err, c.Flush())
	}
	return err
}

func (m *Metrics) flush() error {
	m.mu.Lock()
	order, all := m.order, m.series
	m.order, m.series = nil, map[string]*series{}
	dimKeys := append([]string(nil), m.dimKeys...)
	dims := make(map[string]string, len(m.dims))
	for k, v := range m.dims {
		dims[k] = v
	}
	ts := m.now().UnixMilli()
	m.mu.Unlock()

	names := order[:0:0]
	for _, n := range order {
		if _, clash := dims[n]; !clash {
			names = append(names, n)
		}
	}
	var buf bytes.Buffer
	for offset := 0; ; offset += maxValuesPerMetric {
		// Metrics that still have values at this offset.
		var live []string
		for _, n := range names {
			if len(all[n].values) > offset {
				live = append(live, n)
			}
		}
		if len(live) == 0 {
			break
		}
		for start := 0; start < len(live); start += maxMetricsPerDirective {
			end := min(start+maxMetricsPerDirective, len(live))
			line, err := m.line(ts, dimKeys, dims, live[start:end], all, offset)
			if err != nil {
				return err
			}
			buf.Write(line)
			buf.WriteByte('\n')
		}
	}
	if buf.Len() == 0 {
		return nil
	}
	if _, err := m.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("telemetry: write emf: %w", err)
	}
	return nil
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// line encodes one EMF document with names' values from offset on (at most
// 100 each).
func (m *Metrics) line(ts int64, dimKeys []string, dims map[string]string, names []string, all map[string]*series, offset int) ([]byte, error) {
	doc := make(map[string]any, len(names)+len(dimKeys)+1)
	dir := emfDirective{Namespace: m.namespace, Dimensions: [][]string{append([]string{}, dimKeys...)}}
	for _, k := range dimKeys {
		doc[k] = dims[k]
	}
	for _, n := range names {
		s := all[n]
		vals := s.values[offset:min(offset+maxValuesPerMetric, len(s.values))]
		if len(vals) == 1 {
			doc[n] = vals[0]
		} else {
			doc[n] = vals
		}
		dir.Metrics = append(dir.Metrics, emfMetric{Name: n, Unit: s.unit})
	}
	doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{dir}}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("telemetry: encode emf: %w", err)
	}
	return b, nil
}
