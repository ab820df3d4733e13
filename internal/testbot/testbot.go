// Package testbot is the bot the infrastructure's own tests run: a handful of
// probe behaviours whose words are fixed here, so a change to the example
// bot (internal/app, yours to rewrite) never breaks a test of the pipeline.
//
//   - any text: replied as it is (echo);
//   - "probe:panic": the handler panics with PanicMessage;
//   - "probe:fail": the handler fails with ErrFail, on every receive;
//   - "probe:permanent": the handler fails with bot.Permanent(ErrPermanent);
//   - "probe:slow DURATION" (a Go duration, default 1s): the loading
//     animation, that long a wait, then SlowReply by reply or push;
//   - "probe:push TEXT": TEXT pushed to the chat (a push, never a reply);
//   - follow: FollowReply; postback: PostbackReply + the data.
package testbot

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// The testbot's words.
const (
	PanicMessage  = "testbot: probe:panic panicked on purpose"
	SlowReply     = "testbot: slow work done"
	FollowReply   = "testbot: followed"
	PostbackReply = "testbot: postback "
)

// ErrFail is what probe:fail fails with.
var ErrFail = errors.New("testbot: probe:fail failed on purpose")

// ErrPermanent is what probe:permanent fails with, wrapped in bot.Permanent.
var ErrPermanent = errors.New("testbot: probe:permanent can never succeed")

// New returns the testbot's router.
func New() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, text)
	})
	r.OnText("probe:panic", func(context.Context, *bot.Event, string) error { panic(PanicMessage) })
	r.OnText("probe:fail", func(context.Context, *bot.Event, string) error { return ErrFail })
	r.OnText("probe:permanent", func(context.Context, *bot.Event, string) error { return bot.Permanent(ErrPermanent) })
	r.OnText("probe:slow", func(ctx context.Context, e *bot.Event, text string) error {
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(text, "probe:slow")))
		if err != nil {
			d = time.Second
		}
		if err := e.ShowLoading(ctx, 5); err != nil {
			return err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		return e.ReplyText(ctx, SlowReply)
	})
	r.OnText("probe:push", func(ctx context.Context, e *bot.Event, text string) error {
		return e.PushText(ctx, e.Source.ChatID(), strings.TrimSpace(strings.TrimPrefix(text, "probe:push")))
	})
	r.OnFollow(func(ctx context.Context, e *bot.Event) error { return e.ReplyText(ctx, FollowReply) })
	r.OnPostback(func(ctx context.Context, e *bot.Event, data string) error {
		return e.ReplyText(ctx, PostbackReply+data)
	})
	return r
}
