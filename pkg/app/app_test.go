package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/lineapi"
)

type recorder struct {
	texts   []string
	loading []int
}

func (r *recorder) Send(_ context.Context, _ lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	for _, m := range msgs {
		r.texts = append(r.texts, m.(messaging_api.TextMessage).Text)
	}
	return lineapi.ViaReply, nil
}
func (r *recorder) Push(context.Context, string, string, ...messaging_api.MessageInterface) error {
	return nil
}
func (r *recorder) ShowLoading(_ context.Context, _ string, s int) error {
	r.loading = append(r.loading, s)
	return nil
}

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
			rec := &recorder{}
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
			if tt.wantText != "" && (len(rec.texts) != 1 || !strings.HasPrefix(rec.texts[0], tt.wantText)) {
				t.Fatalf("texts %q, want one starting %q", rec.texts, tt.wantText)
			}
			if tt.wantLoading != (len(rec.loading) == 1) {
				t.Fatalf("loading %v", rec.loading)
			}
		})
	}
}

func TestSlowHonoursDeadline(t *testing.T) {
	r := New(Config{SlowWork: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Dispatch(ctx, event(t, text("slow"), &recorder{}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}
