package bot

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/testmessenger"
)

// Every real webhook sample decodes into typed events and reaches the handler
// registered for its type.
func TestSamplesRouteToTheirHandler(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 15 {
		t.Fatalf("found %d samples", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cb struct {
			Destination string            `json:"destination"`
			Events      []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(b, &cb); err != nil {
			t.Fatal(err)
		}
		for _, raw := range cb.Events {
			t.Run(filepath.Base(f), func(t *testing.T) {
				ev, err := Parse(raw, cb.Destination, time.Now(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var got string
				r := NewRouter()
				mark := func(name string) Handler {
					return func(context.Context, *Event) error { got = name; return nil }
				}
				r.OnText("", func(context.Context, *Event, string) error { got = "text"; return nil })
				r.OnMessage(mark("message"))
				r.OnFollow(mark("follow"))
				r.OnUnfollow(mark("unfollow"))
				r.OnPostback(func(_ context.Context, _ *Event, data string) error { got = "postback:" + data; return nil })
				r.OnEdited(func(_ context.Context, _ *Event, text string) error { got = "edited:" + text; return nil })
				r.Default(mark("default"))
				if err := r.Dispatch(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
				want := "default"
				switch ev.Type {
				case "message":
					want = "message"
					if _, ok := ev.Text(); ok {
						want = "text"
					}
				case "follow", "unfollow":
					want = ev.Type
				case "postback":
					d, _ := ev.PostbackData()
					want = "postback:" + d
				case "messageEdited":
					want = "edited:Hello, edited world" // the one edit sample: not a text route's
				}
				if ev.Standby() {
					want = ""
				}
				if got != want {
					t.Fatalf("%s routed to %q, want %q", ev.Type, got, want)
				}
				if ev.Typed == nil || ev.Typed.GetType() != ev.Type {
					t.Fatalf("typed event %T for %s", ev.Typed, ev.Type)
				}
				if _, unknown := ev.Typed.(webhook.UnknownEvent); unknown {
					t.Fatalf("sample type %s decoded as unknown", ev.Type)
				}
			})
		}
	}
}

func TestParseSourceAndFields(t *testing.T) {
	raw := json.RawMessage(`{"type":"message","mode":"active","timestamp":1462629479859,"source":{"type":"group","groupId":"Cgroup","userId":"Uuser"},"webhookEventId":"01X","deliveryContext":{"isRedelivery":true},"replyToken":"rt","message":{"id":"1","type":"text","text":"hi"}}`)
	ev, err := Parse(raw, "Ubot", time.Unix(100, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Source.Type != SourceGroup || ev.Source.ChatID() != "Cgroup" || ev.Source.UserID != "Uuser" || !ev.Redelivery ||
		ev.WebhookEventID != "01X" || ev.Timestamp.UnixMilli() != 1462629479859 || ev.Destination != "Ubot" {
		t.Fatalf("%+v", ev)
	}
	if txt, ok := ev.Text(); !ok || txt != "hi" {
		t.Fatal("text")
	}
	for _, bad := range []string{`nope`, `{}`, `{"type":"message","message":7}`} {
		if _, err := Parse(json.RawMessage(bad), "", time.Now(), nil); !errors.Is(err, ErrEvent) {
			t.Fatalf("Parse(%s) err = %v", bad, err)
		}
	}
	// A future event type is not an error: the SDK returns UnknownEvent.
	ev, err = Parse(json.RawMessage(`{"type":"hologram","webhookEventId":"01Y"}`), "", time.Now(), nil)
	if err != nil || ev.Type != "hologram" {
		t.Fatalf("future type: %v %v", ev, err)
	}
}

func TestTextPrefixRouting(t *testing.T) {
	r := NewRouter()
	var got string
	r.OnText("", func(_ context.Context, _ *Event, s string) error { got = "any:" + s; return nil })
	r.OnText("slow", func(_ context.Context, _ *Event, s string) error { got = "slow:" + s; return nil })
	r.OnText("slow down", func(_ context.Context, _ *Event, s string) error { got = "slowdown:" + s; return nil })
	for text, want := range map[string]string{"hello": "any:hello", "slow job": "slow:slow job", "slow down now": "slowdown:slow down now"} {
		ev := mustParse(t, `{"type":"message","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"1","type":"text","text":"`+text+`"}}`, nil)
		_ = r.Dispatch(context.Background(), ev)
		if got != want {
			t.Fatalf("%q routed %q, want %q", text, got, want)
		}
	}
}

func TestMiddlewareOrderAndOn(t *testing.T) {
	var trail []string
	r := NewRouter()
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, e *Event) error {
				trail = append(trail, name+">")
				err := next(ctx, e)
				trail = append(trail, "<"+name)
				return err
			}
		}
	}
	r.Use(mw("a"), mw("b"))
	r.On("membership", func(context.Context, *Event) error { trail = append(trail, "h"); return nil })
	if err := r.Dispatch(context.Background(), mustParse(t, `{"type":"membership","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, nil)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(trail, " ") != "a> b> h <b <a" {
		t.Fatalf("trail %v", trail)
	}
	// No route, no default: acknowledged, nothing runs.
	trail = nil
	_ = r.Dispatch(context.Background(), mustParse(t, `{"type":"beacon","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, nil))
	if len(trail) != 0 {
		t.Fatalf("unrouted event ran %v", trail)
	}
}

func TestEventSends(t *testing.T) {
	m := &testmessenger.Messenger{}
	ev := mustParse(t, `{"type":"message","mode":"active","timestamp":1700000000000,"source":{"type":"user","userId":"U1"},"webhookEventId":"01Z","replyToken":"rt","message":{"id":"1","type":"text","text":"x"}}`, m)
	ctx := context.Background()
	if err := ev.ShowLoading(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := ev.ReplyText(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := ev.ReplyText(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if err := ev.Push(ctx, "Uother", messaging_api.TextMessage{Text: "three"}); err != nil {
		t.Fatal(err)
	}
	if s := m.Sends(); len(s) != 2 || s[0].Target.ReplyToken != "rt" || s[1].Target.ReplyToken != "" || s[0].Target.Index != 0 || s[1].Target.Index != 1 ||
		s[0].Target.To != "U1" || s[0].Target.WebhookEventID != "01Z" || s[0].Target.EventTime.UnixMilli() != 1700000000000 {
		t.Fatalf("sends %+v", s)
	}
	if p := m.Pushes(); len(p) != 1 || p[0].To != "Uother" || p[0].RetryKey != lineapi.RetryKey("01Z", 2) {
		t.Fatalf("pushes %+v", p)
	}
	if l := m.Loading(); len(l) != 1 || l[0].Chat != "U1" {
		t.Fatalf("loading %+v", l)
	}
	// In a group the loading animation is not available: a no-op.
	g := mustParse(t, `{"type":"message","mode":"active","timestamp":1,"source":{"type":"group","groupId":"C1","userId":"U1"},"message":{"id":"1","type":"text","text":"x"}}`, m)
	_ = g.ShowLoading(ctx, 5)
	if len(m.Loading()) != 1 {
		t.Fatal("loading shown in a group")
	}
	// Errors carry context and the cause.
	m.Fail(lineapi.ErrRateLimited)
	if err := ev.ReplyText(ctx, "x"); !errors.Is(err, lineapi.ErrRateLimited) || !strings.HasPrefix(err.Error(), "reply:") {
		t.Fatalf("err %v", err)
	}
}

func TestStandbyAndNoMessenger(t *testing.T) {
	sb := mustParse(t, `{"type":"message","mode":"standby","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"1","type":"text","text":"x"}}`, &testmessenger.Messenger{})
	if err := sb.ReplyText(context.Background(), "x"); !errors.Is(err, ErrStandby) {
		t.Fatalf("standby reply err %v", err)
	}
	ran := false
	r := NewRouter()
	r.Default(func(context.Context, *Event) error { ran = true; return nil })
	_ = r.Dispatch(context.Background(), sb)
	if ran {
		t.Fatal("handler ran for a standby event")
	}
	nm := mustParse(t, `{"type":"follow","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, nil)
	if err := nm.ReplyText(context.Background(), "x"); !errors.Is(err, ErrNoMessenger) {
		t.Fatalf("no messenger err %v", err)
	}
}

func mustParse(t *testing.T, raw string, m Messenger) *Event {
	t.Helper()
	ev, err := Parse(json.RawMessage(raw), "Ubot", time.Now(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Seven messages go as one reply of five (free, while the token is fresh)
// and one push of two: packed five to a request, each with its own index.
func TestMessagesPackedFiveToARequest(t *testing.T) {
	m := &testmessenger.Messenger{}
	ev := mustParse(t, `{"type":"message","mode":"active","timestamp":1700000000000,"source":{"type":"user","userId":"U1"},"webhookEventId":"01Z","replyToken":"rt","message":{"id":"1","type":"text","text":"x"}}`, m)
	ctx := context.Background()
	if err := ev.ReplyText(ctx, "1", "2", "3", "4", "5", "6", "7"); err != nil {
		t.Fatal(err)
	}
	if s := m.Sends(); len(s) != 2 || len(s[0].Messages) != 5 || s[0].Target.ReplyToken != "rt" || len(s[1].Messages) != 2 ||
		s[1].Target.ReplyToken != "" || s[1].Target.Index != 1 {
		t.Fatalf("sends %+v, want a reply of 5 then a push of 2", s)
	}
	if err := ev.PushText(ctx, "U2", "a", "b", "c", "d", "e", "f"); err != nil {
		t.Fatal(err)
	}
	if p := m.Pushes(); len(p) != 2 || len(p[0].Messages) != 5 || len(p[1].Messages) != 1 {
		t.Fatalf("pushes %+v, want 5 then 1", p)
	}
}

// MarkAsRead posts the message's markAsReadToken, for a text (the typed
// event's) and for any other message content (read from the raw event);
// an event without one, in standby or without a messenger is refused
// before LINE is asked.
func TestMarkAsRead(t *testing.T) {
	samples := sampleEvents(t)
	tests := []struct {
		name      string
		raw       string
		messenger bool
		wantToken string
		wantErr   error
	}{
		{name: "text, LINE's sample", raw: string(samples["message-text-markasread-user#0"]), messenger: true, wantToken: "30yhdy232..."},
		{name: "sticker", raw: `{"type":"message","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"2","type":"sticker","packageId":"1","stickerId":"1","stickerResourceType":"STATIC","markAsReadToken":"st-1"}}`,
			messenger: true, wantToken: "st-1"},
		{name: "no token", raw: string(samples["message-text-user#0"]), messenger: true, wantErr: ErrNoReadToken},
		{name: "a follow has none", raw: `{"type":"follow","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, messenger: true, wantErr: ErrNoReadToken},
		{name: "standby", raw: `{"type":"message","mode":"standby","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"1","type":"text","text":"x","markAsReadToken":"t"}}`,
			messenger: true, wantErr: ErrStandby},
		{name: "no messenger", raw: string(samples["message-text-markasread-user#0"]), wantErr: ErrNoMessenger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmessenger.Messenger{}
			var ms Messenger
			if tt.messenger {
				ms = m
			}
			ev := mustParse(t, tt.raw, ms)
			err := ev.MarkAsRead(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			var want []string
			if tt.wantToken != "" {
				want = []string{tt.wantToken}
			}
			if got := m.Reads(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("reads %q, want %q", got, want)
			}
		})
	}
	// LINE's failure comes back wrapped, with its cause.
	m := &testmessenger.Messenger{}
	m.Fail(lineapi.ErrInvalidRequest)
	ev := mustParse(t, string(samples["message-text-markasread-user#0"]), m)
	if err := ev.MarkAsRead(context.Background()); !errors.Is(err, lineapi.ErrInvalidRequest) || !strings.HasPrefix(err.Error(), "mark as read:") {
		t.Fatalf("err %v", err)
	}
}
