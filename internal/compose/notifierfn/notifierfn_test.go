package notifierfn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/linemock"
)

func newNotifier(t *testing.T, env map[string]string, d Deps) (*alert.Notifier, *linemock.Server) {
	t.Helper()
	line := linemock.New(linemock.WithTokens("tok"))
	srv := httptest.NewServer(line)
	t.Cleanup(srv.Close)
	base := map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "tok", "LINE_API_BASE_URL": srv.URL,
		"OPERATOR_LINE_IDS": "U0000000000000000000000000000cafe"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.LoadNotifier(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(context.Background(), cfg, "ap-northeast-1", d, compose.Common{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return n, line
}

// The handler tells the ops queue's batches from the sweep's schedule, and
// refuses anything else.
func TestHandlerDispatches(t *testing.T) {
	mem := idempotency.NewMemory()
	n, line := newNotifier(t, map[string]string{"ALERT_STATE_TABLE": "linegate-IdempotencyTable"}, Deps{Ledger: mem})
	h := Handler(n)
	alarm := `{"AlarmName":"linegate-worker-errors","NewStateValue":"ALARM","OldStateValue":"OK","StateChangeTime":"2026-03-14T01:02:03.000+0000"}`
	body, _ := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "m1", "Message": alarm, "Timestamp": "2026-03-14T01:02:03.000Z"})
	batch, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "r1", Body: string(body), EventSource: "aws:sqs"}}})
	out, err := h(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if resp, ok := out.(events.SQSEventResponse); !ok || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("answer %#v, want an SQS response without failures", out)
	}
	if len(line.Messages()) != 1 {
		t.Fatalf("%d pushes, want the alarm's card", len(line.Messages()))
	}
	if v, err := mem.Get(context.Background(), "alerts#ledger"); err != nil || v.Version == 0 {
		t.Fatalf("ledger %+v %v: the card was not recorded in the idempotency table", v, err)
	}
	sched := `{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","time":"2026-03-14T01:03:00Z","detail":{}}`
	if _, err := h(context.Background(), json.RawMessage(sched)); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	for _, bad := range []string{`{"detail-type":"Object Created"}`, `[1,2]`, `"x"`} {
		if _, err := h(context.Background(), json.RawMessage(bad)); !errors.Is(err, ErrUnknownEvent) {
			t.Errorf("%s: err %v, want ErrUnknownEvent", bad, err)
		}
	}
}

// The adapter tells the core a conflicting write, so it reads again.
func TestLedgerAdapterConflict(t *testing.T) {
	mem := idempotency.NewMemory()
	l := ledgerStore{mem}
	if _, err := l.Put(context.Background(), "k", []byte("a"), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := l.Put(context.Background(), "k", []byte("b"), 0, time.Hour)
	if !errors.Is(err, alert.ErrLedgerConflict) || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("err %v, want ErrLedgerConflict", err)
	}
	v, ver, err := l.Get(context.Background(), "k")
	if err != nil || string(v) != "a" || ver != 1 {
		t.Fatalf("Get = %q %d %v", v, ver, err)
	}
}
