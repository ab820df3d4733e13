package workerfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testsns"
	"github.com/linegate/linegate/pkg/bot"
)

// token is a plain (local) access token that does not look like one: only
// the worker's wiring, which names it a secret, keeps it out of reports.
const token = "plain-token-42-not-shaped"

// keepSpy remembers how long completed markers are kept.
type keepSpy struct {
	*idempotency.Memory
	mu   sync.Mutex
	keep []time.Duration
}

func (s *keepSpy) Complete(ctx context.Context, key string, keepFor time.Duration) error {
	s.mu.Lock()
	s.keep = append(s.keep, keepFor)
	s.mu.Unlock()
	return s.Memory.Complete(ctx, key, keepFor)
}

func loadConfig(t *testing.T, env map[string]string) config.Worker {
	t.Helper()
	base := map[string]string{
		"LINE_CHANNEL_ACCESS_TOKEN": token, "IDEMPOTENCY_TABLE": "local",
		"LINE_API_BASE_URL": "http://127.0.0.1:1", // never called: the handlers here send nothing
		"OPS_TOPIC_ARN":     "arn:aws:sns:us-east-1:000000000000:ops",
	}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.LoadWorker(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quiet() compose.Common {
	return compose.Common{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

// textRecord is an SQS record carrying a LINE text event as EventBridge
// delivers it.
func textRecord(id, text string) events.SQSMessage {
	ev := fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":"Uuser0001"},"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"message":{"id":"1","type":"text","quoteToken":"q","text":%q}}`,
		time.Now().UnixMilli(), id, text)
	body, _ := json.Marshal(map[string]any{
		"version": "0", "id": "eb-" + id, "detail-type": "message", "source": "line.webhook",
		"account": "000000000000", "time": "2026-11-29T08:00:00Z", "region": "us-east-1", "resources": []string{},
		"detail": map[string]any{"destination": "Ubot", "receivedAt": time.Now().UTC().Format(time.RFC3339Nano), "event": json.RawMessage(ev)},
	})
	return events.SQSMessage{MessageId: "m-" + id, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// A handler that panics with the access token in its message: the crash
// report the wired worker publishes names the panic, not the token.
func TestCrashReportsScrubTheAccessToken(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error {
		panic("LINE refused the call made with " + token)
	})
	ops := &testsns.Topic{}
	p, err := workerfn.New(context.Background(), loadConfig(t, nil), r,
		workerfn.Deps{Store: idempotency.NewMemory(), Ops: ops, Function: "WorkerFunction", Region: "us-east-1"}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{textRecord("01WF1", "hi")}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("resp %+v err %v: want the panicking record failed", resp, err)
	}
	published := ops.Published()
	if len(published) != 1 {
		t.Fatalf("%d crash reports published, want 1", len(published))
	}
	msg := aws.ToString(published[0].Message)
	rep, err := crash.Parse([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(msg, token) {
		t.Fatalf("the access token reached the crash report: error %q", rep.Error)
	}
	if rep.Error != "LINE refused the call made with "+crash.Redacted || rep.Function != "WorkerFunction" {
		t.Fatalf("report %+v: want the panic with the token redacted", rep)
	}
}

// IDEMPOTENCY_KEEP_HOURS reaches the store: a handled event's completed
// marker is kept that long.
func TestCompletedMarkersKeptForConfiguredHours(t *testing.T) {
	tests := []struct {
		hours string
		want  time.Duration
	}{
		{hours: "", want: 48 * time.Hour},
		{hours: "336", want: 336 * time.Hour},
	}
	for _, tt := range tests {
		t.Run("IDEMPOTENCY_KEEP_HOURS="+tt.hours, func(t *testing.T) {
			r := bot.NewRouter()
			r.OnText("", func(context.Context, *bot.Event, string) error { return nil })
			store := &keepSpy{Memory: idempotency.NewMemory()}
			p, err := workerfn.New(context.Background(), loadConfig(t, map[string]string{"IDEMPOTENCY_KEEP_HOURS": tt.hours}), r,
				workerfn.Deps{Store: store}, quiet())
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{textRecord("01WF2", "hi")}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if len(store.keep) != 1 || store.keep[0] != tt.want {
				t.Fatalf("completed markers kept for %v, want [%v]", store.keep, tt.want)
			}
		})
	}
}

// The wired worker keeps handlers' steps and sessions in its idempotency
// store: a handler using both succeeds, and the session outlives the event.
func TestHandlersGetStepsAndSessions(t *testing.T) {
	store := idempotency.NewMemory()
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		if err := e.Once(ctx, "note", func(context.Context) error { return nil }); err != nil {
			return err
		}
		var seen []string
		s, err := e.Session(ctx, &seen)
		if err != nil {
			return err
		}
		return s.Save(ctx, append(seen, text))
	})
	p, err := workerfn.New(context.Background(), loadConfig(t, map[string]string{"SESSION_TTL_HOURS": "2"}), r, workerfn.Deps{Store: store}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"one", "two"} {
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{textRecord(fmt.Sprint("01WF3", i), text)}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("record %d: resp %+v err %v", i, resp, err)
		}
	}
	got, err := store.Get(context.Background(), idempotency.SessionKey("", "Uuser0001"))
	if err != nil || got.Version != 2 || !strings.Contains(string(got.Value), `["one","two"]`) {
		t.Fatalf("session %s at version %d, %v; want both texts at version 2", got.Value, got.Version, err)
	}
}
