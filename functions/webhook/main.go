// Command webhook is the API Gateway Lambda that verifies LINE's signature,
// hands every event to EventBridge and every chat event to the FIFO chat
// queue, and answers in milliseconds; it also sends replayed chat events on
// from the replay queue to the chat queue. The logic
// lives in internal/ingress, the wiring in internal/compose/webhookfn.
package main

import (
	"context"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/webhookfn"
	"github.com/linegate/linegate/internal/config"
)

func main() {
	compose.Main("webhook", config.LoadWebhook, func(ctx context.Context, cfg config.Webhook, env compose.Env) (any, error) {
		bus, queue := webhookfn.Clients(env.AWS)
		h, err := webhookfn.New(ctx, cfg, bus, queue, env.Common)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, webhookfn.Lambda(h)), nil
	})
}
