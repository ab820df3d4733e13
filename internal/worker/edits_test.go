package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

// editSample is LINE's messageEdited event (the SDK v8.22.0 sample, in a
// group: edits are sent for group chats only), from pkg/bot's golden files.
func editSample(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../pkg/bot/testdata/messageEdited-group.json")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Events []map[string]any }
	if err := json.Unmarshal(b, &body); err != nil || len(body.Events) != 1 {
		t.Fatalf("sample: %v", err)
	}
	return body.Events[0]
}

// edit is the sample as another edit of the same message: its own
// webhookEventId, timestamp (ms after the sample's) and text.
func edit(t *testing.T, id string, after int64, text string) events.SQSMessage {
	t.Helper()
	ev := editSample(t)
	ev["webhookEventId"] = id
	ev["timestamp"] = ev["timestamp"].(float64) + float64(after)
	ev["message"].(map[string]any)["text"] = text
	raw, _ := json.Marshal(ev)
	m := message(id, 1, raw)
	m.Attributes["MessageGroupId"] = "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f"
	return m
}

// editBot records the texts its OnEdited handler saw; fail makes its next
// calls fail.
type editBot struct {
	mu   sync.Mutex
	seen []string
	fail int
}

func (b *editBot) router() *bot.Router {
	r := bot.NewRouter()
	r.OnEdited(func(_ context.Context, _ *bot.Event, text string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.seen = append(b.seen, text)
		if b.fail > 0 {
			b.fail--
			return errors.New("edit handler failed")
		}
		return nil
	})
	return r
}

func (b *editBot) texts() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.seen, "|")
}

// LINE's edits of one message may arrive out of order; the largest
// timestamp is the message's state. The newest edit seen is kept per chat
// and message: an older one arriving after it is acknowledged as stale
// without running the handler; a newer one runs; a retry of a failed edit
// runs again unless a newer edit came in between.
func TestEditsOlderThanTheNewestSeenChangeNothing(t *testing.T) {
	type delivery struct {
		msg     events.SQSMessage
		receive int
		want    Outcome
	}
	tests := []struct {
		name      string
		fail      int
		script    func(t *testing.T) []delivery
		wantTexts string
		wantStale float64
	}{
		{name: "in order", script: func(t *testing.T) []delivery {
			return []delivery{{edit(t, "01E1", 0, "v1"), 1, OutcomeOK}, {edit(t, "01E2", 1000, "v2"), 1, OutcomeOK}}
		}, wantTexts: "v1|v2"},
		{name: "the newer first: the older is stale", script: func(t *testing.T) []delivery {
			return []delivery{{edit(t, "01E2", 1000, "v2"), 1, OutcomeOK}, {edit(t, "01E1", 0, "v1"), 1, OutcomeStale},
				{edit(t, "01E3", 2000, "v3"), 1, OutcomeOK}}
		}, wantTexts: "v2|v3", wantStale: 1},
		{name: "same timestamp: the larger webhookEventId wins", script: func(t *testing.T) []delivery {
			return []delivery{{edit(t, "01E9", 0, "nine"), 1, OutcomeOK}, {edit(t, "01E8", 0, "eight"), 1, OutcomeStale}}
		}, wantTexts: "nine", wantStale: 1},
		{name: "a failed edit's retry runs again", fail: 1, script: func(t *testing.T) []delivery {
			m := edit(t, "01E1", 0, "v1")
			return []delivery{{m, 1, OutcomeFailed}, {m, 2, OutcomeOK}}
		}, wantTexts: "v1|v1"},
		{name: "a failed edit's retry after a newer edit is stale", fail: 1, script: func(t *testing.T) []delivery {
			m := edit(t, "01E1", 0, "v1")
			return []delivery{{m, 1, OutcomeFailed}, {edit(t, "01E2", 1000, "v2"), 1, OutcomeOK}, {m, 2, OutcomeStale}}
		}, wantTexts: "v1|v2", wantStale: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &editBot{fail: tt.fail}
			store := idempotency.NewMemory()
			m := &testmetrics.Recorder{}
			f := newFixtureOn(t, b.router(), store, WithStateStore(store), WithMetrics(m))
			for i, d := range tt.script(t) {
				d.msg.Attributes["ApproximateReceiveCount"] = fmt.Sprint(d.receive)
				if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{d.msg}}); err != nil {
					t.Fatal(err)
				}
				if got := f.seen[len(f.seen)-1].Outcome; got != d.want {
					t.Fatalf("delivery %d (%s): %s, want %s", i, d.msg.MessageId, got, d.want)
				}
			}
			if got := b.texts(); got != tt.wantTexts {
				t.Fatalf("the handler saw %q, want %q", got, tt.wantTexts)
			}
			if got := m.Total("StaleEditsSkipped"); got != tt.wantStale {
				t.Fatalf("StaleEditsSkipped = %v, want %v", got, tt.wantStale)
			}
		})
	}
}

// The edit mark's store failing fails the record (retried later) without
// running the handler; a mark that does not decode fails it too; a write
// that keeps conflicting gives up after a few rounds.
func TestEditOrderStoreFailures(t *testing.T) {
	down := errors.New("dynamodb: unavailable")
	tests := []struct {
		name  string
		fault func(op string, n int) error
		want  error
	}{
		{"cannot read the mark", func(op string, _ int) error { return when(op == "get", down) }, down},
		{"cannot write the mark", func(op string, _ int) error { return when(op == "put", down) }, down},
		{"the mark does not decode", func(op string, _ int) error { return when(op == "get", errCorrupt) }, nil},
		{"the write keeps conflicting", func(op string, _ int) error { return when(op == "put", idempotency.ErrConflict) }, idempotency.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &editBot{}
			store := &faultyState{Memory: idempotency.NewMemory(), fault: tt.fault}
			f := newFixtureOn(t, b.router(), store, WithStateStore(store))
			if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{edit(t, "01E1", 0, "v1")}}); err != nil {
				t.Fatal(err)
			}
			res := f.seen[len(f.seen)-1]
			if res.Outcome != OutcomeFailed || (tt.want != nil && !errors.Is(res.Err, tt.want)) || !strings.Contains(res.Err.Error(), "edit order") {
				t.Fatalf("result %+v, want failed with %v", res, tt.want)
			}
			if b.texts() != "" {
				t.Fatal("the handler ran")
			}
		})
	}
}

// Without a state store there is nothing to order edits by: every edit
// runs.
func TestEditsWithoutAStoreAllRun(t *testing.T) {
	b := &editBot{}
	f := newFixture(t, b.router())
	for _, m := range []events.SQSMessage{edit(t, "01E2", 1000, "v2"), edit(t, "01E1", 0, "v1")} {
		_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
	}
	if b.texts() != "v2|v1" {
		t.Fatalf("the handler saw %q", b.texts())
	}
}
