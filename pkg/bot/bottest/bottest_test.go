package bottest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/bot/bottest"
)

// echo is the bot of the package's examples.
func echo() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, "You said: "+text)
	})
	return r
}

func Example() {
	b := bottest.New(echo())
	if err := b.Send(context.Background(), bottest.Text("U1", "hello")); err != nil {
		fmt.Println(err)
	}
	fmt.Println(b.Texts())
	// Output: [You said: hello]
}

// A reply goes out while the reply token is fresh; an answer after LINE's
// minute is pushed to the chat, as the worker does.
func ExampleBot_Advance() {
	var b *bottest.Bot
	r := bot.NewRouter()
	r.OnText("report", func(ctx context.Context, e *bot.Event, _ string) error {
		b.Advance(2 * time.Minute) // the report takes two minutes: the reply token expires
		return e.ReplyText(ctx, "Here is your report.")
	})
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, "You said: "+text)
	})
	b = bottest.New(r)
	_ = b.Send(context.Background(), bottest.Text("U1", "hi"))
	_ = b.Send(context.Background(), bottest.Text("U1", "report"))
	for _, m := range b.Messages() {
		fmt.Println(m.Via, m.To, m.Text)
	}
	// Output:
	// reply U1 You said: hi
	// push U1 Here is your report.
}

// Sending an event again is LINE's redelivery: once handled, it runs
// nothing; after a failure it runs again, and a bot.Once step that
// succeeded the first time is not repeated.
func TestRedeliveryAndOnce(t *testing.T) {
	var charges int
	fail := true
	r := bot.NewRouter()
	r.OnText("buy", func(ctx context.Context, e *bot.Event, _ string) error {
		id, err := bot.Once(ctx, e, "charge", func(context.Context) (string, error) {
			charges++
			return fmt.Sprintf("receipt-%d", charges), nil
		})
		if err != nil {
			return err
		}
		if fail {
			fail = false
			return errors.New("the shop's API timed out")
		}
		return e.ReplyText(ctx, "Paid: "+id)
	})
	b := bottest.New(r)
	ctx := context.Background()
	e := bottest.Text("U1", "buy")
	if err := b.Send(ctx, e); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("first attempt: %v, want the handler's error", err)
	}
	if err := b.Send(ctx, e); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if err := b.Send(ctx, e); err != nil {
		t.Fatalf("a redelivery after success: %v", err)
	}
	if got := b.Texts(); charges != 1 || !slices.Equal(got, []string{"Paid: receipt-1"}) {
		t.Fatalf("charged %d times, sent %q; want once and one answer", charges, got)
	}
}

// Sessions live for the Bot's life and can be read by the test; they lapse
// when the clock passes the worker's session TTL.
func TestSessions(t *testing.T) {
	type state struct{ Step string }
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		var st state
		s, err := e.Session(ctx, &st)
		if err != nil {
			return err
		}
		if st.Step == "" {
			if err := s.Save(ctx, state{Step: "size"}); err != nil {
				return err
			}
			return e.ReplyText(ctx, "Which size?")
		}
		if err := s.End(ctx); err != nil {
			return err
		}
		return e.ReplyText(ctx, "A "+text+" one, then.")
	})
	b := bottest.New(r)
	ctx := context.Background()
	if err := b.Send(ctx, bottest.Text("U1", "coffee")); err != nil {
		t.Fatal(err)
	}
	var st state
	if ok, err := b.Session(ctx, "U1", &st); err != nil || !ok || st.Step != "size" {
		t.Fatalf("session %+v ok=%v err=%v, want step size", st, ok, err)
	}
	if err := b.Send(ctx, bottest.Text("U1", "large")); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Session(ctx, "U1", &st); err != nil || ok {
		t.Fatalf("an ended session is there: ok=%v err=%v", ok, err)
	}
	if err := b.Send(ctx, bottest.Text("U2", "tea")); err != nil {
		t.Fatal(err)
	}
	b.Advance(25 * time.Hour)
	if ok, err := b.Session(ctx, "U2", &st); err != nil || ok {
		t.Fatalf("a session past the TTL is there: ok=%v err=%v", ok, err)
	}
	if got := b.Texts(); !slices.Equal(got, []string{"Which size?", "A large one, then.", "Which size?"}) {
		t.Fatalf("texts %q", got)
	}
}

// The builders' events route as LINE's do, and what the local LINE API
// refuses comes back as the handler's error, as it would from LINE.
func TestBuildersAndLINEsRules(t *testing.T) {
	r := bot.NewRouter()
	r.OnPostback(func(ctx context.Context, e *bot.Event, data string) error { return e.ReplyText(ctx, "chose "+data) })
	r.OnFollow(func(ctx context.Context, e *bot.Event) error {
		if err := e.ShowLoading(ctx, 5); err != nil {
			return err
		}
		return e.ReplyText(ctx, "welcome")
	})
	r.OnText("six", func(ctx context.Context, e *bot.Event, _ string) error {
		return e.Reply(ctx, messaging_api.TextMessage{Text: ""})
	})
	r.OnText("panic", func(context.Context, *bot.Event, string) error { panic("boom") })
	r.OnText("read", func(ctx context.Context, e *bot.Event, _ string) error { return e.MarkAsRead(ctx) })
	b := bottest.New(r)
	ctx := context.Background()
	for _, e := range []*bot.Event{bottest.Postback("U1", "size=L"), bottest.Follow("U2"), bottest.Text("U3", "read")} {
		if err := b.Send(ctx, e); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
	}
	if got := b.Texts(); !slices.Equal(got, []string{"chose size=L", "welcome"}) || !slices.Equal(b.Loading(), []string{"U2"}) {
		t.Fatalf("texts %q, loading %q", got, b.Loading())
	}
	if err := b.Send(ctx, bottest.Text("U1", "six")); err == nil {
		t.Fatal("an empty text was accepted: LINE refuses it")
	}
	if err := b.Send(ctx, bottest.Text("U1", "panic")); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("a panic: %v, want it as the error", err)
	}
	group, err := bottest.Event(`{"type":"message","mode":"active","timestamp":0,"webhookEventId":"01GROUP","replyToken":"rt-g","source":{"type":"group","groupId":"C1","userId":"U1"},"message":{"id":"9","type":"text","quoteToken":"q","text":"hi"}}`)
	if err != nil {
		t.Fatal(err)
	}
	r2 := bot.NewRouter()
	r2.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, "group: "+text) })
	b2 := bottest.New(r2)
	if err := b2.Send(ctx, group); err != nil {
		t.Fatal(err)
	}
	if m := b2.Messages(); len(m) != 1 || m[0].To != "C1" || m[0].Via != "reply" {
		t.Fatalf("group reply %+v", m)
	}
	if _, err := bottest.Event(`{"no":"type"}`); err == nil {
		t.Fatal("an event without a type was built")
	}
	if err := b.Send(ctx, nil); err == nil {
		t.Fatal("a nil event was sent")
	}
}
