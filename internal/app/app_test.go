package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testmessenger"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

func event(t *testing.T, raw string, m bot.Messenger) *bot.Event {
	t.Helper()
	ev, err := bot.Parse(json.RawMessage(raw), "Ubot", time.Now(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"message","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"webhookEventId":"01A","replyToken":"rt","message":{"id":"1","type":"text","text":` + string(b) + `}}`
}

func TestExampleBot(t *testing.T) {
	tests := []struct {
		name        string
		probes      bool
		raw         string
		wantText    string
		wantLoading bool
		wantErr     error
		wantPanic   bool
		wantLong    bool
		wantFinal   bool
	}{
		{name: "echo", raw: text("hello"), wantText: "hello"},
		{name: "slow is long work", raw: text("slow report"), wantText: "Done with report", wantLong: true},
		{name: "follow", raw: `{"type":"follow","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"replyToken":"rt"}`, wantText: "Thanks for adding me"},
		{name: "postback", raw: `{"type":"postback","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"replyToken":"rt","postback":{"data":"action=buy"}}`, wantText: "You chose: action=buy"},
		{name: "probes off: echoed", raw: text("probe:fail"), wantText: "probe:fail"},
		{name: "probe fail", probes: true, raw: text("probe:fail"), wantErr: ErrProbe},
		{name: "probe panic", probes: true, raw: text("probe:panic"), wantPanic: true},
		{name: "probe permanent", probes: true, raw: text("probe:permanent"), wantErr: ErrProbePermanent, wantFinal: true},
		{name: "probe fail is not permanent", probes: true, raw: text("probe:fail"), wantErr: ErrProbe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &testmessenger.Messenger{}
			r := New(Config{Probes: tt.probes, SlowWork: 10 * time.Millisecond})
			defer func() {
				if p := recover(); (p != nil) != tt.wantPanic {
					t.Fatalf("panic = %v, want panic %v", p, tt.wantPanic)
				}
			}()
			ev := event(t, tt.raw, rec)
			if got := r.Long(ev); got != tt.wantLong {
				t.Fatalf("Long = %v, want %v", got, tt.wantLong)
			}
			err := r.Dispatch(context.Background(), ev)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if bot.IsPermanent(err) != tt.wantFinal {
				t.Fatalf("IsPermanent(%v) = %v, want %v", err, bot.IsPermanent(err), tt.wantFinal)
			}
			if tt.wantText != "" && (len(rec.Texts()) != 1 || !strings.HasPrefix(rec.Texts()[0], tt.wantText)) {
				t.Fatalf("texts %q, want one starting %q", rec.Texts(), tt.wantText)
			}
			if tt.wantLoading != (len(rec.Loading()) == 1) {
				t.Fatalf("loading %v", rec.Loading())
			}
		})
	}
}

func TestSlowHonoursDeadline(t *testing.T) {
	r := New(Config{SlowWork: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Dispatch(ctx, event(t, text("slow"), &testmessenger.Messenger{}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

func postback(id, data string) string {
	return `{"type":"postback","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"webhookEventId":"` + id + `","replyToken":"rt","postback":{"data":"` + data + `"}}`
}

// step delivers one event to the bot with the worker's state stores over
// store, and returns what the bot replied.
func step(t *testing.T, store *idempotency.Memory, raw string) []string {
	t.Helper()
	rec := &testmessenger.Messenger{}
	ev := event(t, raw, rec)
	worker.BindState(ev, store, time.Hour)
	if err := New(Config{}).Dispatch(context.Background(), ev); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return rec.Texts()
}

// The two-question order: its state lives in the chat's session between
// messages, a retried last answer gets the same order number, and a stale
// button does not restart anything.
func TestOrderFlow(t *testing.T) {
	store := idempotency.NewMemory()
	if got := step(t, store, text("order")); len(got) != 1 || got[0] != "What would you like?" {
		t.Fatalf("order: %q", got)
	}
	if got := step(t, store, postback("01D", "order:drink=coffee")); len(got) != 1 || got[0] != "Which size?" {
		t.Fatalf("drink: %q", got)
	}
	placed := step(t, store, postback("01S", "order:size=L"))
	if len(placed) != 1 || !strings.HasSuffix(placed[0], ": a L coffee is on its way.") {
		t.Fatalf("size: %q", placed)
	}
	// The same event retried (its reply failed, say): the same order.
	if again := step(t, store, postback("01S", "order:size=L")); len(again) != 1 || again[0] != placed[0] {
		t.Fatalf("retried last answer: %q; want %q (placed once)", again, placed)
	}
	// The conversation is over: an old button is refused.
	if got := step(t, store, postback("01X", "order:size=M")); len(got) != 1 || !strings.Contains(got[0], "another order") {
		t.Fatalf("stale button: %q", got)
	}
	if got := step(t, store, postback("01P", "action=buy")); len(got) != 1 || got[0] != "You chose: action=buy" {
		t.Fatalf("other postbacks: %q", got)
	}
}

// The order's questions carry quick-reply buttons whose postbacks the flow
// reads back.
func TestOrderQuestionsHaveButtons(t *testing.T) {
	b, err := json.Marshal(ask("Which size?", "size", "S", "L"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"quickReply"`, `"type":"postback"`, `"data":"order:size=L"`, `"displayText":"S"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}
