// Package app is the bot: its handlers, registered on a router. The worker
// function runs it (functions/worker/main.go), linegate local runs it on
// this machine, and app_test.go tests it with package bottest.
package app

import (
	"context"

	"github.com/linegate/linegate/pkg/bot"
)

// New returns the bot's router.
func New() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, "You said: "+text)
	})
	return r
}
