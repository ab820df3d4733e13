// Package app is the example bot, and the one place a bot author edits:
// register handlers on the router, answer with e.Reply / e.Push, and let
// linegate take care of acknowledgement, retries, duplicates and alerts.
//
// What this bot does:
//   - any text: echoes it;
//   - "slow …": long work (bot.Queue("long")): it runs on the long-work queue's own
//     capacity behind the loading animation, works for SlowWork (5 s), then
//     answers — by reply if the token is still fresh, by push otherwise —
//     while the chat's next messages and other users' are answered at once;
//   - "ask …": a question people often split over several quick messages:
//     the route is debounced (bot.Debounce, AskWindow 2 s), so a burst of
//     "ask" messages gets one answer quoting every part, after the bot has
//     marked them read (Event.MarkAsRead);
//   - an edited message (messageEdited, in groups): answers with what the
//     message says now; an older edit arriving after a newer one is not
//     answered (the worker drops it);
//   - "order": a two-question order (drink, then size) with quick-reply
//     buttons, its state in the chat's session (Event.Session) and the
//     order placed once per event (bot.Once);
//   - "menu": today's drinks as a Flex carousel; each card's Order button
//     is a postback the bot answers, its other button sends a message;
//   - follow: a greeting;
//   - other postbacks: says which choice was made;
//   - with probes enabled: "probe:panic" panics (the operator gets a crash
//     card), "probe:fail" fails every time (retries with growing delays,
//     then the DLQ and its alarm), "probe:permanent" fails with
//     bot.Permanent (the DLQ on its first receive, and the alarm), and
//     "probe:push TEXT" pushes TEXT instead of replying (it counts against
//     the month's quota; with the quota spent the push is held).
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// Config tunes the example bot.
type Config struct {
	// Probes turns on probe:panic and probe:fail (off in the template, on in
	// `linegate local`).
	Probes bool
	// SlowWork is how long "slow" works (default 5 s).
	SlowWork time.Duration
}

// AskWindow is the debounce window of "ask": the pause that ends a burst.
// AskMaxWait bounds how long a burst that keeps going waits for its answer.
const (
	AskWindow  = 2 * time.Second
	AskMaxWait = 10 * time.Second
)

// ErrProbe is what probe:fail fails with.
var ErrProbe = errors.New("probe:fail: this handler always fails (PROBES_ENABLED=true)")

// ErrProbePermanent is what probe:permanent fails with, wrapped in
// bot.Permanent.
var ErrProbePermanent = errors.New("probe:permanent: this handler fails for good (PROBES_ENABLED=true)")

// New returns the example bot's router, configured from the process's
// environment (ConfigFromEnv): functions/worker/main.go runs it.
func New() *bot.Router { return NewWith(ConfigFromEnv(os.Getenv)) }

// ConfigFromEnv reads the bot's configuration: PROBES_ENABLED=true turns
// the probes on (the template's ProbesEnabled; linegate local sets it).
// The worker's own configuration refuses a PROBES_ENABLED that is not a
// boolean before the bot runs.
func ConfigFromEnv(getenv func(string) string) Config {
	probes, _ := strconv.ParseBool(getenv("PROBES_ENABLED"))
	return Config{Probes: probes}
}

// NewWith returns the example bot's router with cfg.
func NewWith(cfg Config) *bot.Router {
	if cfg.SlowWork == 0 {
		cfg.SlowWork = 5 * time.Second
	}
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, text)
	})
	r.OnText("slow", func(ctx context.Context, e *bot.Event, text string) error {
		// The worker already shows the loading animation for long work, and
		// refreshes it past a minute.
		select {
		case <-time.After(cfg.SlowWork):
		case <-ctx.Done():
			return ctx.Err()
		}
		what := strings.TrimSpace(strings.TrimPrefix(text, "slow"))
		if what == "" {
			what = "the job"
		}
		return e.ReplyText(ctx, fmt.Sprintf("Done with %s after %s.", what, cfg.SlowWork.Round(time.Millisecond)))
	}, bot.Queue("long"))
	r.OnText("ask", answerAsk, bot.Debounce(AskWindow, AskMaxWait))
	r.OnEdited(func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, "Edited: now it says \u201c"+text+"\u201d")
	})
	r.OnText("order", startOrder)
	r.OnText("menu", showMenu)
	r.OnPostback(func(ctx context.Context, e *bot.Event, data string) error {
		if strings.HasPrefix(data, orderPrefix) {
			return answerOrder(ctx, e, data)
		}
		if strings.HasPrefix(data, menuPrefix) {
			return orderFromMenu(ctx, e, data)
		}
		return e.ReplyText(ctx, "You chose: "+data)
	})
	r.OnFollow(func(ctx context.Context, e *bot.Event) error {
		return e.ReplyText(ctx, "Thanks for adding me! Send me anything and I will echo it. Try \"menu\", \"order\", \"ask\" (in as many messages as you like), or \"slow\" for a long job.")
	})
	if cfg.Probes {
		r.OnText("probe:panic", func(context.Context, *bot.Event, string) error {
			panic("probe:panic: a handler crashed on purpose (PROBES_ENABLED=true)")
		})
		r.OnText("probe:fail", func(context.Context, *bot.Event, string) error {
			return ErrProbe
		})
		r.OnText("probe:push", func(ctx context.Context, e *bot.Event, text string) error {
			what := strings.TrimSpace(strings.TrimPrefix(text, "probe:push"))
			if what == "" {
				what = "probe:push"
			}
			return e.PushText(ctx, e.Source.ChatID(), what)
		})
		r.OnText("probe:permanent", func(context.Context, *bot.Event, string) error {
			return bot.Permanent(ErrProbePermanent)
		})
	}
	return r
}

// answerAsk answers a burst of "ask" messages once: it marks them read
// (the newest's token covers the ones before it), then quotes every part.
func answerAsk(ctx context.Context, e *bot.Event, _ string) error {
	if err := e.MarkAsRead(ctx); err != nil && !errors.Is(err, bot.ErrNoReadToken) {
		return err
	}
	batch := e.Batch()
	parts := make([]string, 0, len(batch))
	for _, ev := range batch {
		text, _ := ev.Text()
		parts = append(parts, "\u201c"+strings.TrimSpace(strings.TrimPrefix(text, "ask"))+"\u201d")
	}
	head := "You asked"
	if len(parts) > 1 {
		head = fmt.Sprintf("You asked, in %d messages", len(parts))
	}
	return e.ReplyText(ctx, head+": "+strings.Join(parts, " "))
}
