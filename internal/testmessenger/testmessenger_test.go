package testmessenger_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/testmessenger"
	"github.com/linegate/linegate/pkg/bot"
)

// What a bot asks of LINE through an event is recorded, in order; after
// Fail every call returns the error.
func TestMessengerRecordsWhatABotAsks(t *testing.T) {
	m := &testmessenger.Messenger{}
	raw := `{"type":"message","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"webhookEventId":"01Z","replyToken":"rt","message":{"id":"1","type":"text","text":"x"}}`
	ev, err := bot.Parse(json.RawMessage(raw), "Ubot", time.Now(), m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ev.ShowLoading(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := ev.Reply(ctx, messaging_api.TextMessage{Text: "a"}, messaging_api.StickerMessage{}); err != nil {
		t.Fatal(err)
	}
	if err := ev.PushText(ctx, "U2", "b"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	m.Fail(boom)
	if err := ev.ReplyText(ctx, "c"); !errors.Is(err, boom) {
		t.Fatalf("reply after Fail = %v, want boom", err)
	}
	if s := m.Sends(); len(s) != 2 || s[0].Target.ReplyToken != "rt" || len(s[0].Messages) != 2 {
		t.Errorf("sends %+v, want the reply of two messages, then c", s)
	}
	if p := m.Pushes(); len(p) != 1 || p[0].To != "U2" || p[0].RetryKey == "" || len(p[0].Messages) != 1 {
		t.Errorf("pushes %+v", p)
	}
	if l := m.Loading(); len(l) != 1 || l[0] != (testmessenger.Loading{Chat: "U1", Seconds: 20}) {
		t.Errorf("loading %+v", l)
	}
	if n := len(m.Messages()); n != 3 {
		t.Errorf("%d messages sent, want 3", n)
	}
	if got := m.Texts(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("Texts = %q, want the sent texts a and c", got)
	}
}
