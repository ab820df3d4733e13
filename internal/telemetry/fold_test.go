package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// foldedLine logs one "record processed" line through a redacting JSON
// logger, with what m.Fold gives appended, and returns the line (or fails).
func foldedLine(t *testing.T, m *Metrics) ([]byte, bool) {
	t.Helper()
	var buf bytes.Buffer
	log := NewLogger(&buf, WithLevel(slog.LevelInfo))
	attrs := []any{"webhookEventId", "01JDFOLD", "outcome", "ok", "secret", "s3cr3t"}
	a, ok := m.Fold()
	if ok {
		attrs = append(attrs, a)
	}
	log.InfoContext(context.Background(), "record processed", attrs...)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("%d lines logged, want 1:\n%s", len(lines), buf.Bytes())
	}
	return lines[0], ok
}

// A folded record line is one EMF document (by the specification's rules,
// validateEMF) that is also the log record: its message and attributes, the
// metrics' values at the top level, and nothing left for Flush. A metric
// whose name looks like a secret's key is not redacted; an attribute that is
// one still is.
func TestFoldMakesTheLogLineAnEMFDocument(t *testing.T) {
	var out bytes.Buffer
	m := NewMetrics(&out, "linegate", WithFolding(true), WithClock(func() time.Time { return time.UnixMilli(1775044800000) }))
	m.SetDimension("Function", "linegate-WorkerFunction-Hk3f8sAbCdEf")
	m.Count("RecordsProcessed", 1)
	m.Count("SecretRereads", 2)
	m.Duration("LineRequestLatency", 30*time.Millisecond+353*time.Microsecond)
	m.Duration("LineRequestLatency", 12*time.Millisecond)

	line, ok := foldedLine(t, m)
	if !ok {
		t.Fatal("Fold declined")
	}
	if err := validateEMF(line); err != nil {
		t.Fatalf("the folded line is no EMF document: %v\n%s", err, line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"message": "record processed", "webhookEventId": "01JDFOLD", "outcome": "ok", "secret": Redacted,
		"Function": "linegate-WorkerFunction-Hk3f8sAbCdEf", "RecordsProcessed": 1.0, "SecretRereads": 2.0,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v\n%s", k, got[k], want, line)
		}
	}
	if lat := fmt.Sprint(got["LineRequestLatency"]); lat != "[30.353 12]" {
		t.Errorf("LineRequestLatency = %s, want both observations [30.353 12]", lat)
	}
	var meta struct {
		AWS emfMeta `json:"_aws"`
	}
	if err := json.Unmarshal(line, &meta); err != nil || meta.AWS.Timestamp != 1775044800000 {
		t.Fatalf("_aws = %+v (%v)", meta.AWS, err)
	}
	units := map[string]string{}
	for _, mt := range meta.AWS.CloudWatchMetrics[0].Metrics {
		units[mt.Name] = mt.Unit
	}
	if want := map[string]string{"RecordsProcessed": "Count", "SecretRereads": "Count", "LineRequestLatency": "Milliseconds"}; fmt.Sprint(units) != fmt.Sprint(want) {
		t.Errorf("metrics declared %v, want %v", units, want)
	}
	if err := m.Flush(); err != nil || out.Len() != 0 {
		t.Errorf("Flush after Fold wrote %q (%v), want nothing: Fold took everything", out.String(), err)
	}
	// The next invocation starts empty and keeps the dimension.
	m.Count("RecordsProcessed", 1)
	if line, ok := foldedLine(t, m); !ok || !bytes.Contains(line, []byte(`"Function":"linegate-WorkerFunction-Hk3f8sAbCdEf"`)) || bytes.Contains(line, []byte("SecretRereads")) {
		t.Errorf("second fold (%v): %s", ok, line)
	}
}

// Fold declines, and leaves everything to Flush, when folding is off, when
// nothing was recorded, and when what was recorded needs more than one EMF
// document.
func TestFoldDeclines(t *testing.T) {
	cases := []struct {
		name    string
		folding bool
		record  func(m *Metrics)
		lines   int // EMF lines Flush writes afterwards
	}{
		{"folding off", false, func(m *Metrics) { m.Count("RecordsProcessed", 1) }, 1},
		{"nothing recorded", true, func(*Metrics) {}, 0},
		{"101 metrics", true, func(m *Metrics) {
			for i := range maxMetricsPerDirective + 1 {
				m.Count(fmt.Sprintf("Metric%d", i), 1)
			}
		}, 2},
		{"101 values of one metric", true, func(m *Metrics) {
			for range maxValuesPerMetric + 1 {
				m.Duration("RecordDuration", time.Millisecond)
			}
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			m := NewMetrics(&out, "", WithFolding(c.folding))
			m.SetDimension("Function", "worker")
			c.record(m)
			line, ok := foldedLine(t, m)
			if ok || bytes.Contains(line, []byte("_aws")) {
				t.Fatalf("Fold folded (%v): %s", ok, line)
			}
			if err := m.Flush(); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), "\n"); n != c.lines {
				t.Fatalf("Flush wrote %d lines, want %d:\n%s", n, c.lines, out.String())
			}
			for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
				if len(l) > 0 {
					if err := validateEMF(l); err != nil {
						t.Errorf("flushed line: %v", err)
					}
				}
			}
		})
	}
}

// A metric named like a dimension is dropped from a folded document, as
// Flush drops it: it would collide with the dimension's member.
func TestFoldDropsAMetricNamedLikeADimension(t *testing.T) {
	m := NewMetrics(&bytes.Buffer{}, "", WithFolding(true))
	m.SetDimension("Function", "worker")
	m.Count("Function", 1)
	m.Count("RecordsProcessed", 1)
	line, ok := foldedLine(t, m)
	if !ok || validateEMF(line) != nil || !bytes.Contains(line, []byte(`"Function":"worker"`)) || bytes.Contains(line, []byte(`{"Name":"Function"`)) {
		t.Fatalf("folded (%v): %s", ok, line)
	}
}

// Durations are kept to the microsecond, in milliseconds.
func TestDurationToTheMicrosecond(t *testing.T) {
	var out bytes.Buffer
	m := NewMetrics(&out, "")
	m.Duration("RecordDuration", 2*time.Millisecond+517*time.Microsecond+695*time.Nanosecond)
	m.Duration("QueueLatency", 400*time.Nanosecond)
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"RecordDuration":2.518`) || !strings.Contains(out.String(), `"QueueLatency":0,`) {
		t.Fatalf("durations not rounded to the microsecond: %s", out.String())
	}
}

// FoldingLogs follows the Lambda log format NewLambdaLogger writes.
func TestFoldingLogs(t *testing.T) {
	for format, want := range map[string]bool{"": true, "JSON": true, "TEXT": false, "json": false} {
		t.Setenv("AWS_LAMBDA_LOG_FORMAT", format)
		if got := FoldingLogs(); got != want {
			t.Errorf("AWS_LAMBDA_LOG_FORMAT=%q: FoldingLogs() = %v, want %v", format, got, want)
		}
	}
}
