package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/pkg/bot"
)

// foldEnv is a worker whose logs and EMF metrics go to one stream, as in
// Lambda: the record's log line may carry its invocation's metrics.
type foldEnv struct {
	out     bytes.Buffer
	metrics *telemetry.Metrics
	line    *linemock.Server
	proc    *Processor
}

func newFoldEnv(t *testing.T, level slog.Level, router *bot.Router) *foldEnv {
	t.Helper()
	e := &foldEnv{line: linemock.New(linemock.WithTokens(token))}
	srv := httptest.NewServer(e.line)
	t.Cleanup(srv.Close)
	e.metrics = telemetry.NewMetrics(&e.out, "linegate", telemetry.WithFolding(true))
	e.metrics.SetDimension("Function", "linegate-WorkerFunction-Hk3f8sAbCdEf")
	p, err := New(router, idempotency.NewMemory(), WithMetrics(e.metrics), WithLogger(telemetry.NewLogger(&e.out, telemetry.WithLevel(level))),
		// The LINE client records into the invocation's metrics, as the
		// Lambda worker's does.
		WithMessenger(func() bot.Messenger {
			return lineapi.New(token, lineapi.WithBaseURL(srv.URL), lineapi.WithMetrics(e.metrics),
				lineapi.WithSleep(func(context.Context, time.Duration) error { return nil }))
		}))
	if err != nil {
		t.Fatal(err)
	}
	e.proc = p
	return e
}

// text is a text message event whose reply token LINE issued just now.
func (e *foldEnv) text(id, user, text string) events.SQSMessage {
	tok := "rt-" + id
	e.line.IssueReplyToken(tok, time.Now())
	return message("m-"+id, 1, json.RawMessage(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":%q},"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":%q,"message":{"id":"1","type":"text","quoteToken":"q","text":%q}}`,
		time.Now().UnixMilli(), user, id, tok, text)))
}

// invoke runs one batch and flushes the invocation's metrics, as
// compose.Flushing does, and returns every line written.
func (e *foldEnv) invoke(t *testing.T, msgs ...events.SQSMessage) []map[string]any {
	t.Helper()
	e.out.Reset()
	if _, err := e.proc.Handle(context.Background(), events.SQSEvent{Records: msgs}); err != nil {
		t.Fatal(err)
	}
	if err := e.metrics.Flush(); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.out.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %v\n%s", err, l)
		}
		lines = append(lines, m)
	}
	return lines
}

// declared returns the metric names a line's _aws declares, each checked to
// be a top-level number or array of numbers of the line (EMF's rule).
func declared(t *testing.T, line map[string]any) []string {
	t.Helper()
	raw, _ := json.Marshal(line["_aws"])
	var meta struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	}
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Timestamp == 0 || len(meta.CloudWatchMetrics) != 1 {
		t.Fatalf("_aws %s (%v)", raw, err)
	}
	d := meta.CloudWatchMetrics[0]
	if d.Namespace != "linegate" || len(d.Dimensions) != 1 || len(d.Dimensions[0]) != 1 || line[d.Dimensions[0][0]] != "linegate-WorkerFunction-Hk3f8sAbCdEf" {
		t.Fatalf("directive %+v on line %v", d, line)
	}
	var names []string
	for _, m := range d.Metrics {
		switch line[m.Name].(type) {
		case float64, []any:
		default:
			t.Errorf("metric %s declared but its member is %v", m.Name, line[m.Name])
		}
		names = append(names, m.Name)
	}
	return names
}

// An invocation with one record writes one line: the record's log line is
// also the EMF document of everything the invocation recorded (the
// worker's counts and durations, the LINE client's reply and request
// latency), so nothing is left for the invocation's own EMF line.
func TestOneRecordOneLine(t *testing.T) {
	e := newFoldEnv(t, slog.LevelInfo, echoRouter())
	lines := e.invoke(t, e.text("01FOLD1", "Uuser0001", "hello"))
	if len(lines) != 1 {
		t.Fatalf("%d lines, want the record's line only: %v", len(lines), lines)
	}
	l := lines[0]
	if l["message"] != "record processed" || l["webhookEventId"] != "01FOLD1" || l["outcome"] != "ok" || l["LineRepliesSent"] != 1.0 {
		t.Fatalf("line %v", l)
	}
	got := strings.Join(declared(t, l), " ")
	for _, want := range []string{"EndToEndLatency", "LineRepliesSent", "LineRequestLatency"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not in the folded document (%s)", want, got)
		}
	}
	if strings.Contains(e.out.String(), "hello") {
		t.Fatalf("the message text reached the log: %s", e.out.String())
	}
}

// A failed record's line carries the metrics too, at WARN.
func TestOneFailedRecordOneLine(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error { return errors.New("downstream down") })
	e := newFoldEnv(t, slog.LevelInfo, r)
	lines := e.invoke(t, e.text("01FOLD2", "Uuser0001", "hi"))
	if len(lines) != 1 || lines[0]["message"] != "record failed" || lines[0]["level"] != "WARN" || lines[0]["RecordsFailed"] != 1.0 {
		t.Fatalf("lines %v, want one WARN record line carrying RecordsFailed", lines)
	}
	if names := declared(t, lines[0]); !strings.Contains(strings.Join(names, " "), "RecordsFailed") {
		t.Fatalf("declared %v", names)
	}
}

// With two records the lines stay apart: each record's line is its own,
// and the invocation's metrics leave in one EMF line of their own (a
// line per record carrying every record's values would be a reader's trap).
func TestTwoRecordsKeepTheirMetricsApart(t *testing.T) {
	e := newFoldEnv(t, slog.LevelInfo, echoRouter())
	a, b := e.text("01FOLD3", "Uuser0001", "a"), e.text("01FOLD4", "Uuser0002", "b")
	lines := e.invoke(t, a, b)
	var records, emf int
	for _, l := range lines {
		switch {
		case l["message"] == "record processed" && l["_aws"] == nil:
			records++
		case l["message"] == nil && l["_aws"] != nil:
			emf++
			declared(t, l)
			if v, ok := l["LineRepliesSent"].([]any); !ok || len(v) != 2 {
				t.Errorf("LineRepliesSent %v, want one value per record", l["LineRepliesSent"])
			}
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	if records != 2 || emf != 1 {
		t.Fatalf("%d record lines and %d EMF lines, want 2 and 1: %v", records, emf, lines)
	}
}

// When the record's line is not logged (LOG_LEVEL above INFO), its metrics
// are not lost with it: they leave in the invocation's EMF line.
func TestMetricsSurviveAnUnloggedRecord(t *testing.T) {
	e := newFoldEnv(t, slog.LevelWarn, echoRouter())
	lines := e.invoke(t, e.text("01FOLD5", "Uuser0001", "hello"))
	if len(lines) != 1 || lines[0]["message"] != nil || lines[0]["LineRepliesSent"] != 1.0 {
		t.Fatalf("lines %v, want the EMF line alone", lines)
	}
	declared(t, lines[0])
}
