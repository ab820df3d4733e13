// Package app is the example bot, and the one place a bot author edits:
// register handlers on the router, answer with e.Reply / e.Push, and let
// linegate take care of acknowledgement, retries, duplicates and alerts.
//
// What this bot does:
//   - any text: echoes it;
//   - "slow …": long work (bot.Long): it runs on the long-work queue's own
//     capacity behind the loading animation, works for SlowWork (5 s), then
//     answers — by reply if the token is still fresh, by push otherwise —
//     while the chat's next messages and other users' are answered at once;
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

// ErrProbe is what probe:fail fails with.
var ErrProbe = errors.New("probe:fail: this handler always fails (PROBES_ENABLED=true)")

// ErrProbePermanent is what probe:permanent fails with, wrapped in
// bot.Permanent.
var ErrProbePermanent = errors.New("probe:permanent: this handler fails for good (PROBES_ENABLED=true)")

// New returns the example bot's router.
func New(cfg Config) *bot.Router {
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
	}, bot.Long())
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
		return e.ReplyText(ctx, "Thanks for adding me! Send me anything and I will echo it. Try \"menu\", \"order\", or \"slow\" for a long job.")
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
