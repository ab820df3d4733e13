package bot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/bot/bottest"
)

// shop stands for your own API (a database, a payment provider, an LLM).
type shop struct{ placed, charged int }

func (s *shop) Place(ctx context.Context, user, text string) (int, error) {
	s.placed++
	return 480, nil
}

func (s *shop) Charge(ctx context.Context, order string) (string, error) {
	s.charged++
	return fmt.Sprintf("R-%d", s.charged), nil
}

var orders = &shop{}

// send delivers each event to r as the worker would (bottest) and prints
// what the bot sent LINE.
func send(r *bot.Router, events ...*bot.Event) {
	b := bottest.New(r)
	for _, e := range events {
		if err := b.Send(context.Background(), e); err != nil {
			fmt.Println("error:", err)
		}
	}
	for _, m := range b.Messages() {
		if m.Type != "text" {
			m.Text = "(" + m.Type + ")"
		}
		fmt.Println(m.Via+":", m.Text)
	}
}

// A router sends each event to the handler registered for it: the longest
// matching text prefix, the event's type, or the default.
func Example() {
	r := bot.NewRouter()
	r.OnText("order ", func(ctx context.Context, e *bot.Event, text string) error {
		total, err := orders.Place(ctx, e.Source.UserID, text)
		if err != nil {
			return err // the record fails alone and is retried; 5 failures → DLQ + the operator's card
		}
		return e.ReplyText(ctx, fmt.Sprintf("Order placed: %d yen", total))
	})
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, "You said: "+text) // "order " is longer: it wins for "order 2 coffee"
	})
	r.OnPostback(func(ctx context.Context, e *bot.Event, data string) error {
		return e.ReplyText(ctx, "You chose: "+data)
	})
	r.On("membership", func(ctx context.Context, e *bot.Event) error { return nil }) // any type, future ones too
	r.Default(func(ctx context.Context, e *bot.Event) error { return nil })          // what no route takes

	send(r, bottest.Text("U1", "order 2 coffee"), bottest.Text("U1", "hi"), bottest.Postback("U1", "size=L"))
	// Output:
	// reply: Order placed: 480 yen
	// reply: You said: hi
	// reply: You chose: size=L
}

// Middleware wraps every handler, outermost first.
func ExampleRouter_Use() {
	r := bot.NewRouter()
	r.Use(func(next bot.Handler) bot.Handler {
		return func(ctx context.Context, e *bot.Event) error {
			start := time.Now()
			err := next(ctx, e)
			_ = time.Since(start) // record it: a metric, a log line
			return err
		}
	})
	r.OnFollow(func(ctx context.Context, e *bot.Event) error {
		return e.ReplyText(ctx, "Thanks for adding me!")
	})
	send(r, bottest.Follow("U1"))
	// Output: reply: Thanks for adding me!
}

// A side effect outside LINE runs once per event and step, however often
// the event is retried: here the handler fails after the charge, LINE's
// redelivery runs it again, and the card is charged once.
func ExampleOnce() {
	payments := &shop{}
	failOnce := true
	r := bot.NewRouter()
	r.OnText("buy", func(ctx context.Context, e *bot.Event, text string) error {
		receipt, err := bot.Once(ctx, e, "charge", func(ctx context.Context) (string, error) {
			return payments.Charge(ctx, text)
		})
		if err != nil {
			return err
		}
		if failOnce { // a failure after the charge: the event is retried
			failOnce = false
			return errors.New("the receipt printer is off")
		}
		return e.ReplyText(ctx, "Paid: "+receipt)
	})
	e := bottest.Text("U1", "buy the blue one")
	send(r, e, e)
	fmt.Println("charged", payments.charged, "time")
	// Output:
	// error: the receipt printer is off
	// reply: Paid: R-1
	// charged 1 time
}

// order is a two-question conversation's state, kept per chat.
type order struct {
	Step  string // "drink", then "size"
	Drink string
}

// A session is the chat's conversation state between messages: load it,
// change it, save it (only if nobody saved since), end it.
func ExampleEvent_Session() {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		var o order
		s, err := e.Session(ctx, &o)
		if err != nil {
			return err
		}
		switch o.Step {
		case "":
			if err := s.Save(ctx, order{Step: "drink"}); err != nil {
				return err
			}
			return e.ReplyText(ctx, "Which drink?")
		case "drink":
			err := s.Save(ctx, order{Step: "size", Drink: text})
			if errors.Is(err, bot.ErrSessionConflict) { // another message of the chat saved first
				return e.ReplyText(ctx, "Your order changed in another message; please choose again.")
			}
			if err != nil {
				return err
			}
			return e.ReplyText(ctx, "Which size?")
		}
		if err := s.End(ctx); err != nil {
			return err
		}
		return e.ReplyText(ctx, fmt.Sprintf("A %s %s is on its way.", text, o.Drink))
	})
	send(r, bottest.Text("U1", "order"), bottest.Text("U1", "coffee"), bottest.Text("U1", "large"))
	// Output:
	// reply: Which drink?
	// reply: Which size?
	// reply: A large coffee is on its way.
}

// Long work runs on a route queue of its own: the worker shows the
// loading animation and hands the event over, so the chat's next messages
// and every other chat are answered at once. (bottest runs it in place.)
func ExampleQueue() {
	r := bot.NewRouter()
	r.OnText("draw ", func(ctx context.Context, e *bot.Event, text string) error {
		img, err := images.Generate(ctx, text) // 20 s of an image model
		if errors.Is(err, images.ErrRefused) {
			return bot.Permanent(err) // retrying cannot help: the DLQ at once, the operator is told
		}
		if err != nil {
			return err // transient: retried 2, 4, 8, 16 s later
		}
		return e.Reply(ctx, img) // reply while the token is fresh, else push with the retry key
	}, bot.Queue("long"))
	send(r, bottest.Text("U1", "draw a cat"))
	// Output: reply: (image)
}

// images stands for an image model's API.
var images = struct {
	Generate   func(ctx context.Context, prompt string) (messaging_api.ImageMessage, error)
	ErrRefused error
}{
	Generate: func(ctx context.Context, prompt string) (messaging_api.ImageMessage, error) {
		url := "https://example.com/" + strings.ReplaceAll(prompt, " ", "-") + ".png"
		return messaging_api.ImageMessage{OriginalContentUrl: url, PreviewImageUrl: url}, nil
	},
	ErrRefused: errors.New("the model refused the prompt"),
}

// llm stands for a language model's API.
var llm = struct {
	Ask func(ctx context.Context, prompt string) (string, error)
}{Ask: func(ctx context.Context, prompt string) (string, error) { return "You asked: " + prompt, nil }}

// A debounced route answers a burst of a chat's messages once, on its
// newest event, with the whole burst in e.Batch(). (bottest runs each
// event on its own: a batch of one.)
func ExampleDebounce() {
	r := bot.NewRouter()
	r.OnText("ask", func(ctx context.Context, e *bot.Event, _ string) error {
		_ = e.MarkAsRead(ctx) // the newest's token covers the messages before it
		var parts []string
		for _, m := range e.Batch() { // the burst, oldest first; e is the last
			text, _ := m.Text()
			parts = append(parts, text)
		}
		answer, err := bot.Once(ctx, e, "llm", func(ctx context.Context) (string, error) {
			return llm.Ask(ctx, strings.Join(parts, "\n"))
		})
		if err != nil {
			return err
		}
		return e.ReplyText(ctx, answer)
	}, bot.Debounce(2*time.Second, 10*time.Second))
	send(r, bottest.Text("U1", "ask what time is it"))
	// Output: reply: You asked: ask what time is it
}

// errNoSuchItem is an answer your API gives for good.
var errNoSuchItem = errors.New("no such item")

// A failure a retry cannot fix is dead-lettered on its first receive, and
// the operator's card says so.
func ExamplePermanent() {
	r := bot.NewRouter()
	r.OnText("item ", func(ctx context.Context, e *bot.Event, text string) error {
		if text != "item 42" {
			return bot.Permanent(fmt.Errorf("%s: %w", text, errNoSuchItem))
		}
		return e.ReplyText(ctx, "Item 42: in stock")
	})
	err := bottest.New(r).Send(context.Background(), bottest.Text("U1", "item 7"))
	fmt.Println(err, bot.IsPermanent(err), errors.Is(err, errNoSuchItem))
	// Output: item 7: no such item true true
}
