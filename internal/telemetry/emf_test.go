package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// recorder is the interface the cores declare; Metrics must satisfy it.
type recorder interface {
	Count(name string, n float64)
	Duration(name string, d time.Duration)
}

var _ recorder = (*Metrics)(nil)

// emfUnits are the units the EMF specification allows (CloudWatch's
// StandardUnit values).
var emfUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true,
	"Megabits": true, "Gigabits": true, "Terabits": true, "Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true,
	"Terabytes/Second": true, "Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true, "Count/Second": true, "None": true,
}

// validateEMF checks one log line against the EMF specification's rules:
// a JSON object whose _aws member holds an integer millisecond Timestamp and
// a CloudWatchMetrics array of directives; each directive has a Namespace of
// 1..255 characters, Dimensions as an array of arrays of at most 30 strings
// each naming a top-level string member, and at most 100 Metrics whose Name
// names a top-level number or array of at most 100 numbers and whose
// optional Unit is an allowed unit.
func validateEMF(line []byte) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(line, &root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	rawAWS, ok := root["_aws"]
	if !ok {
		return errors.New("no _aws member")
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(rawAWS, &meta); err != nil {
		return fmt.Errorf("_aws is not an object: %w", err)
	}
	var ts json.Number
	dec := json.NewDecoder(bytes.NewReader(meta["Timestamp"]))
	dec.UseNumber()
	if err := dec.Decode(&ts); err != nil {
		return fmt.Errorf("_aws.Timestamp is not a number: %v", err)
	}
	if _, err := strconv.ParseInt(ts.String(), 10, 64); err != nil {
		return fmt.Errorf("_aws.Timestamp %s is not an integer", ts)
	}
	var directives []map[string]json.RawMessage
	if err := json.Unmarshal(meta["CloudWatchMetrics"], &directives); err != nil || directives == nil {
		return fmt.Errorf("_aws.CloudWatchMetrics is not an array of objects: %v", err)
	}
	for i, d := range directives {
		var ns string
		if err := json.Unmarshal(d["Namespace"], &ns); err != nil || len(ns) < 1 || len(ns) > 255 {
			return fmt.Errorf("directive %d: Namespace %s is not a string of 1..255 characters", i, d["Namespace"])
		}
		var dims [][]string
		if err := json.Unmarshal(d["Dimensions"], &dims); err != nil || dims == nil {
			return fmt.Errorf("directive %d: Dimensions %s is not an array of string arrays", i, d["Dimensions"])
		}
		for _, set := range dims {
			if len(set) > 30 {
				return fmt.Errorf("directive %d: dimension set of %d keys (max 30)", i, len(set))
			}
			for _, k := range set {
				var v string
				if err := json.Unmarshal(root[k], &v); err != nil {
					return fmt.Errorf("directive %d: dimension %q is not a top-level string member", i, k)
				}
			}
		}
		var metrics []struct {
			Name *string `json:"Name"`
			Unit *string `json:"Unit"`
		}
		if err := json.Unmarshal(d["Metrics"], &metrics); err != nil || metrics == nil {
			return fmt.Errorf("directive %d: Metrics is not an array", i)
		}
		if len(metrics) > 100 {
			return fmt.Errorf("directive %d: %d metrics (max 100)", i, len(metrics))
		}
		for _, m := range metrics {
			if m.Name == nil || *m.Name == "" || len(*m.Name) > 1024 {
				return fmt.Errorf("directive %d: metric without a valid Name", i)
			}
			if m.Unit != nil && !emfUnits[*m.Unit] {
				return fmt.Errorf("metric %s: unit %q not allowed", *m.Name, *m.Unit)
			}
			raw, ok := root[*m.Name]
			if !ok {
				return fmt.Errorf("metric %s: no top-level member", *m.Name)
			}
			var one float64
			if err := json.Unmarshal(raw, &one); err == nil {
				continue
			}
			var many []float64
			if err := json.Unmarshal(raw, &many); err != nil {
				return fmt.Errorf("metric %s: member %s is not a number or array of numbers", *m.Name, raw)
			}
			if len(many) > 100 {
				return fmt.Errorf("metric %s: %d values (max 100)", *m.Name, len(many))
			}
		}
	}
	return nil
}

// emfLines splits b into lines and validates each.
func emfLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if err := validateEMF(line); err != nil {
			t.Fatalf("invalid EMF line %s: %v", line, err)
		}
		var m map[string]any
		_ = json.Unmarshal(line, &m)
		out = append(out, m)
	}
	return out
}

// values returns every value of metric name across lines.
func values(lines []map[string]any, name string) []float64 {
	var out []float64
	for _, l := range lines {
		switch v := l[name].(type) {
		case float64:
			out = append(out, v)
		case []any:
			for _, x := range v {
				out = append(out, x.(float64))
			}
		}
	}
	return out
}

var fixedClock = func() time.Time { return time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC) }

func TestMetricsGolden(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "", WithClock(fixedClock))
	m.SetDimension("Function", "webhook")
	m.Count("EventsReceived", 3)
	m.Count("EventsReceived", 2)
	m.Count("Published", 1)
	m.Duration("PublishLatency", 1500*time.Microsecond)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := emfLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1", len(lines))
	}
	golden := filepath.Join("testdata", "emf_basic.golden.json")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("EMF output\n%s\nwant\n%s", buf.Bytes(), want)
	}
}

func TestMetricsFlushResets(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "test")
	if err := m.Flush(); err != nil || buf.Len() != 0 {
		t.Fatalf("empty flush wrote %q, %v", buf.String(), err)
	}
	m.Count("A", 1)
	_ = m.Flush()
	buf.Reset()
	_ = m.Flush()
	if buf.Len() != 0 {
		t.Fatalf("second flush repeated values: %s", buf.String())
	}
}

func TestMetricsSplits(t *testing.T) {
	tests := []struct {
		name      string
		metrics   int
		perMetric int
		wantLines int
	}{
		{"one", 1, 1, 1},
		{"100 metrics fit one line", 100, 1, 1},
		{"150 metrics need two", 150, 1, 2},
		{"250 values need three", 1, 250, 3},
		{"both limits", 120, 101, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			m := NewMetrics(&buf, "test", WithClock(fixedClock))
			m.SetDimension("Function", "worker")
			for i := range tt.metrics {
				for j := range tt.perMetric {
					m.Count(fmt.Sprintf("M%03d", i), float64(j))
				}
			}
			if err := m.Flush(); err != nil {
				t.Fatal(err)
			}
			lines := emfLines(t, buf.Bytes())
			if len(lines) != tt.wantLines {
				t.Fatalf("got %d lines, want %d", len(lines), tt.wantLines)
			}
			for i := range tt.metrics {
				got := values(lines, fmt.Sprintf("M%03d", i))
				if len(got) != tt.perMetric {
					t.Fatalf("M%03d: %d values, want %d", i, len(got), tt.perMetric)
				}
				for j, v := range got {
					if v != float64(j) {
						t.Fatalf("M%03d value %d = %v, want %d (order lost)", i, j, v, j)
					}
				}
			}
			for _, l := range lines {
				if l["Function"] != "worker" {
					t.Fatalf("line without dimension value: %v", l["Function"])
				}
			}
		})
	}
}

func TestMetricsEdgeCases(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "test", WithClock(fixedClock))
	for i := range 35 {
		m.SetDimension(fmt.Sprintf("D%02d", i), "v")
	}
	m.SetDimension("D00", "changed")
	m.SetDimension("", "x")
	m.SetDimension("Empty", "")
	m.Count("NaN", math.NaN())
	m.Count("Inf", math.Inf(1))
	m.Count("D01", 1) // collides with a dimension
	m.Count("", 1)
	m.Count("_aws", 1)
	m.Count("Kept", 1)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := emfLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("got %d lines", len(lines))
	}
	l := lines[0]
	dir := l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	dims := dir["Dimensions"].([]any)[0].([]any)
	if len(dims) != 30 || l["D00"] != "changed" {
		t.Fatalf("dimensions = %d keys, D00 = %v; want 30 and the last value", len(dims), l["D00"])
	}
	if _, ok := l["D30"]; ok {
		t.Fatal("31st dimension kept")
	}
	metrics := dir["Metrics"].([]any)
	if len(metrics) != 1 || metrics[0].(map[string]any)["Name"] != "Kept" {
		t.Fatalf("metrics = %v, want only Kept", metrics)
	}
}

func TestMetricsNoDimensions(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "test", WithClock(fixedClock))
	m.Duration("Latency", 2*time.Second)
	_ = m.Flush()
	l := emfLines(t, buf.Bytes())[0]
	dir := l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if dims := dir["Dimensions"].([]any); len(dims) != 1 || len(dims[0].([]any)) != 0 {
		t.Fatalf("Dimensions = %v, want [[]]", dir["Dimensions"])
	}
	if l["Latency"] != float64(2000) || dir["Metrics"].([]any)[0].(map[string]any)["Unit"] != "Milliseconds" {
		t.Fatalf("latency line = %v", l)
	}
	if ts := l["_aws"].(map[string]any)["Timestamp"]; ts != float64(fixedClock().UnixMilli()) {
		t.Fatalf("Timestamp = %v", ts)
	}
}

func TestMetricsConcurrent(t *testing.T) {
	buf := &syncBuffer{}
	m := NewMetrics(buf, "test")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				m.Count("Hits", 1)
				m.Duration("Work", time.Millisecond)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			_ = m.Flush()
		}
	}()
	wg.Wait()
	_ = m.Flush()
	lines := emfLines(t, []byte(buf.String()))
	var hits float64
	for _, v := range values(lines, "Hits") {
		hits += v
	}
	if hits != 4000 || len(values(lines, "Work")) != 4000 {
		t.Fatalf("Hits sum %v and Work count %d, want 4000 each", hits, len(values(lines, "Work")))
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestMetricsWriteError(t *testing.T) {
	m := NewMetrics(failWriter{}, "test")
	m.Count("A", 1)
	if err := m.Flush(); err == nil {
		t.Fatal("Flush hid the write error")
	}
}

// TestValidateEMFRejects proves the validator can fail.
func TestValidateEMFRejects(t *testing.T) {
	ok := `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["F"]],"Metrics":[{"Name":"M","Unit":"Count"}]}]},"F":"x","M":1}`
	if err := validateEMF([]byte(ok)); err != nil {
		t.Fatalf("valid document rejected: %v", err)
	}
	many := make([]float64, 101)
	manyJSON, _ := json.Marshal(many)
	bad := map[string]string{
		"not json":          `{`,
		"no _aws":           `{"M":1}`,
		"float timestamp":   `{"_aws":{"Timestamp":1.5,"CloudWatchMetrics":[]},"M":1}`,
		"no directives":     `{"_aws":{"Timestamp":1}}`,
		"empty namespace":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"","Dimensions":[[]],"Metrics":[]}]}}`,
		"missing dimension": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["F"]],"Metrics":[]}]}}`,
		"numeric dimension": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["F"]],"Metrics":[]}]},"F":1}`,
		"missing metric":    `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]}}`,
		"string metric":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":"1"}`,
		"bad unit":          `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"M","Unit":"Furlongs"}]}]},"M":1}`,
		"101 values":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":` + string(manyJSON) + `}`,
	}
	// 31 dimension keys, each a valid top-level string: only the count is wrong.
	d31doc := map[string]any{}
	var keys []string
	for i := range 31 {
		k := fmt.Sprintf("D%d", i)
		d31doc[k], keys = "v", append(keys, k)
	}
	d31doc["_aws"] = map[string]any{"Timestamp": 1, "CloudWatchMetrics": []any{
		map[string]any{"Namespace": "n", "Dimensions": [][]string{keys}, "Metrics": []any{}}}}
	d31, _ := json.Marshal(d31doc)
	var metrics []map[string]string
	for range 101 {
		metrics = append(metrics, map[string]string{"Name": "M"})
	}
	m101, _ := json.Marshal(map[string]any{"M": 1, "_aws": map[string]any{"Timestamp": 1, "CloudWatchMetrics": []any{
		map[string]any{"Namespace": "n", "Dimensions": [][]string{{}}, "Metrics": metrics}}}})
	bad["31 dimensions"] = string(d31)
	bad["101 metrics"] = string(m101)
	for name, doc := range bad {
		if err := validateEMF([]byte(doc)); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

// A child made by With writes under the parent's dimensions plus its own,
// and is flushed with the parent.
func TestMetricsWith(t *testing.T) {
	var out bytes.Buffer
	m := NewMetrics(&out, "linegate")
	m.SetDimension("Function", "quota")
	c := m.With("Channel", "b")
	m.Count("QuotaMessagesUsed", 1)
	c.Count("QuotaMessagesUsed", 7)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), out.String())
	}
	var parent, child map[string]any
	if json.Unmarshal([]byte(lines[0]), &parent) != nil || json.Unmarshal([]byte(lines[1]), &child) != nil {
		t.Fatalf("not JSON: %s", out.String())
	}
	if parent["QuotaMessagesUsed"] != 1.0 || parent["Channel"] != nil || child["QuotaMessagesUsed"] != 7.0 || child["Channel"] != "b" || child["Function"] != "quota" {
		t.Fatalf("parent %v, child %v", parent, child)
	}
	dims := child["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"]
	if fmt.Sprint(dims) != "[[Function Channel]]" {
		t.Fatalf("child dimensions %v", dims)
	}
	out.Reset()
	if err := m.Flush(); err != nil || out.Len() != 0 {
		t.Fatalf("a second flush wrote %q (%v)", out.String(), err)
	}
}
