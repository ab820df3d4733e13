package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
		{name: "one ask on its own", raw: text("ask what time is it"), wantText: "You asked: \u201cwhat time is it\u201d"},
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
			r := NewWith(Config{Probes: tt.probes, SlowWork: 10 * time.Millisecond})
			defer func() {
				if p := recover(); (p != nil) != tt.wantPanic {
					t.Fatalf("panic = %v, want panic %v", p, tt.wantPanic)
				}
			}()
			ev := event(t, tt.raw, rec)
			if got := r.Queue(ev) == "long"; got != tt.wantLong {
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
	r := NewWith(Config{SlowWork: time.Hour})
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
	if err := NewWith(Config{}).Dispatch(context.Background(), ev); err != nil {
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

// A debounced burst of "ask" messages gets one answer quoting every part in
// order, after the bot marked them read with the newest message's token
// (it covers the ones before it).
func TestAskAnswersTheWholeBurst(t *testing.T) {
	r := NewWith(Config{})
	rec := &testmessenger.Messenger{}
	var batch []*bot.Event
	for i, part := range []string{"ask what is", "ask the capital", "ask of France?"} {
		raw := fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":"U1"},"webhookEventId":"01A%d","replyToken":"rt-%d","message":{"id":"%d","type":"text","markAsReadToken":"read-%d","text":%q}}`,
			i+1, i, i, i, i, part)
		batch = append(batch, event(t, raw, rec))
	}
	newest := batch[len(batch)-1]
	if route, window, _ := r.Debounced(newest); route == "" || window != AskWindow {
		t.Fatalf("ask is not debounced by %v: %q %v", AskWindow, route, window)
	}
	newest.BindBatch(batch)
	if err := r.Dispatch(context.Background(), newest); err != nil {
		t.Fatal(err)
	}
	want := "You asked, in 3 messages: \u201cwhat is\u201d \u201cthe capital\u201d \u201cof France?\u201d"
	if got := rec.Texts(); len(got) != 1 || got[0] != want {
		t.Fatalf("answers %q, want [%q]", got, want)
	}
	if s := rec.Sends(); s[0].Target.ReplyToken != "rt-2" {
		t.Fatalf("answered with %q, want the newest reply token", s[0].Target.ReplyToken)
	}
	if reads := rec.Reads(); len(reads) != 1 || reads[0] != "read-2" {
		t.Fatalf("read marks %q, want the newest message's token", reads)
	}
}

// An edit (LINE's messageEdited sample, in a group) is answered with what
// the message says now.
func TestEditIsAnswered(t *testing.T) {
	b, err := os.ReadFile("../../pkg/bot/testdata/messageEdited-group.json")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Events []json.RawMessage }
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	rec := &testmessenger.Messenger{}
	if err := NewWith(Config{}).Dispatch(context.Background(), event(t, string(body.Events[0]), rec)); err != nil {
		t.Fatal(err)
	}
	if got := rec.Texts(); len(got) != 1 || got[0] != "Edited: now it says \u201cHello, edited world\u201d" {
		t.Fatalf("answers %q", got)
	}
	if s := rec.Sends(); s[0].Target.To != "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f" {
		t.Fatalf("answered in %q, want the group", s[0].Target.To)
	}
}
