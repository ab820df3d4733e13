package local

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// metricStore is the local CloudWatch's custom metrics: every data point
// the functions write in Embedded Metric Format (their `linegate`
// namespace, with the Function dimension), and those put with POST
// /_local/metrics (any namespace: the way to drive an alarm whose metric
// nothing local produces, such as Lambda Throttles or EventBridge's
// FailedInvocations). The alarm evaluator reads it for every alarm whose
// metric has no built-in local source.
type metricStore struct {
	mu     sync.Mutex
	points map[string][]metricPoint // by metricKey
	// watched are the metric names some alarm reads (nil: every name);
	// keep is how long a point can matter to an alarm.
	watched map[string]bool
	quoted  [][]byte // the watched names in quotes, to skip a line without parsing it
	keep    time.Duration
}

type metricPoint struct {
	at    time.Time
	value float64
}

// maxPointsPerMetric bounds what one metric keeps (the newest).
const maxPointsPerMetric = 2_000

func newMetricStore() *metricStore { return &metricStore{points: map[string][]metricPoint{}} }

// watch keeps only the metrics alarms read, and their points for keep:
// a long run writes millions of EMF values nobody evaluates.
func (s *metricStore) watch(names []string, keep time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched, s.quoted = map[string]bool{}, nil
	for _, n := range names {
		if !s.watched[n] {
			s.quoted = append(s.quoted, []byte(`"`+n+`"`))
		}
		s.watched[n] = true
	}
	s.keep = keep
}

// mentions reports whether an EMF line may carry a watched metric: a
// cheap test that spares the JSON decoding of every other line (the
// functions flush their metrics on every invocation, the webhook's inside
// its request).
func (s *metricStore) mentions(line []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched == nil {
		return true
	}
	for _, q := range s.quoted {
		if bytes.Contains(line, q) {
			return true
		}
	}
	return false
}

// wants reports whether the store keeps points of the metric name.
func (s *metricStore) wants(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watched == nil || s.watched[name]
}

// metricKey names a metric: namespace, name and dimensions (sorted).
func metricKey(namespace, name string, dims map[string]string) string {
	keys := make([]string, 0, len(dims))
	for k := range dims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(namespace + "\x00" + name)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + dims[k])
	}
	return b.String()
}

// put records one data point.
func (s *metricStore) put(namespace, name string, dims map[string]string, value float64, at time.Time) {
	k := metricKey(namespace, name, dims)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched != nil && !s.watched[name] {
		return
	}
	p := append(s.points[k], metricPoint{at: at, value: value})
	if s.keep > 0 {
		old := 0
		for old < len(p) && p[old].at.Before(at.Add(-s.keep)) {
			old++
		}
		p = p[old:]
	}
	if len(p) > maxPointsPerMetric {
		p = slices.Clone(p[len(p)-maxPointsPerMetric:])
	}
	s.points[k] = p
}

// stat is the statistic of the data points in (now-period, now]; ok is
// false when there are none (CloudWatch's missing data).
func (s *metricStore) stat(namespace, name string, dims map[string]string, statistic string, period time.Duration, now time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in []float64
	for _, p := range s.points[metricKey(namespace, name, dims)] {
		if p.at.After(now.Add(-period)) && !p.at.After(now) {
			in = append(in, p.value)
		}
	}
	if len(in) == 0 {
		return 0, false
	}
	switch strings.ToLower(statistic) {
	case "maximum":
		return slices.Max(in), true
	case "minimum":
		return slices.Min(in), true
	case "average":
		sum := 0.0
		for _, v := range in {
			sum += v
		}
		return sum / float64(len(in)), true
	case "samplecount":
		return float64(len(in)), true
	}
	sum := 0.0
	for _, v := range in {
		sum += v
	}
	return sum, true
}

// emfTap passes the functions' log stream through and records each EMF
// line's metrics in the store, as CloudWatch Logs does in AWS.
type emfTap struct {
	next  io.Writer
	store *metricStore
	mu    sync.Mutex
	buf   []byte
}

func (t *emfTap) Write(p []byte) (int, error) {
	n, err := t.next.Write(p)
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		line := t.buf[:i]
		t.buf = t.buf[i+1:]
		if bytes.Contains(line, []byte(`"_aws"`)) && t.store.mentions(line) {
			t.record(line)
		}
	}
	if len(t.buf) > 1<<20 { // a line that never ends is no EMF line
		t.buf = nil
	}
	t.mu.Unlock()
	return n, err
}

// emfLine is the part of an EMF line the store reads.
type emfLine struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

func (t *emfTap) record(line []byte) {
	var head emfLine
	if json.Unmarshal(line, &head) != nil {
		return
	}
	wanted := false
	for _, d := range head.AWS.CloudWatchMetrics {
		for _, m := range d.Metrics {
			wanted = wanted || t.store.wants(m.Name)
		}
	}
	if !wanted {
		return
	}
	var all map[string]any
	if json.Unmarshal(line, &all) != nil {
		return
	}
	at := time.Now()
	if head.AWS.Timestamp > 0 {
		at = time.UnixMilli(head.AWS.Timestamp)
	}
	for _, d := range head.AWS.CloudWatchMetrics {
		for _, set := range append(d.Dimensions, []string(nil)) {
			dims := map[string]string{}
			for _, k := range set {
				if v, ok := all[k].(string); ok {
					dims[k] = v
				}
			}
			for _, m := range d.Metrics {
				for _, v := range emfValues(all[m.Name]) {
					t.store.put(d.Namespace, m.Name, dims, v, at)
				}
			}
			if len(d.Dimensions) > 0 {
				break // the dimension sets given; the empty set only when none is
			}
		}
	}
}

// emfValues reads a metric's value: a number or an array of numbers.
func emfValues(v any) []float64 {
	switch x := v.(type) {
	case float64:
		return []float64{x}
	case []any:
		var out []float64
		for _, e := range x {
			if f, ok := e.(float64); ok {
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

// metricPut is the body of POST /_local/metrics: one data point, as
// CloudWatch's PutMetricData takes it.
type metricPut struct {
	Namespace  string            `json:"namespace"`
	MetricName string            `json:"metricName"`
	Dimensions map[string]string `json:"dimensions"`
	Value      *float64          `json:"value"`
}

// serveMetrics answers POST /_local/metrics: the data point is recorded
// now, and the alarms on that metric see it at their next evaluation.
func (r *Runtime) serveMetrics(w http.ResponseWriter, req *http.Request) {
	var in metricPut
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(req.Body, 64<<10)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error() +
			` (want {"namespace": "AWS/Lambda", "metricName": "Throttles", "dimensions": {"FunctionName": "…"}, "value": 1})`})
		return
	}
	if strings.TrimSpace(in.Namespace) == "" || strings.TrimSpace(in.MetricName) == "" || in.Value == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "namespace, metricName and value are required"})
		return
	}
	r.metrics.put(in.Namespace, in.MetricName, in.Dimensions, *in.Value, time.Now())
	writeJSON(w, http.StatusOK, map[string]string{"result": fmt.Sprintf("%s %s = %v recorded", in.Namespace, in.MetricName, *in.Value)})
}
