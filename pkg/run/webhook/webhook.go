// Package webhook is the entry of the webhook function, the API Gateway
// Lambda that verifies LINE's signature, hands every event to EventBridge
// and every chat event to the FIFO chat queue, and answers in
// milliseconds. A project's functions/webhook/main.go is one line:
//
//	func main() { webhook.Start() }
//
// The function reads its configuration from the environment template.yaml
// gives it (docs/deploy.md lists every variable) and fails its INIT with
// one JSON log line naming every problem.
package webhook

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/webhookfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/ingress"
)

// Start runs the webhook function: it builds the handler as Handler does
// and hands it to lambda.Start, which also gives it the batches of the
// replay queue (replayed chat events it sends on to the chat queue, each in
// its chat's message group); it does not return. A configuration it cannot
// use is logged and exits 1.
func Start() { compose.Main("webhook", config.LoadWebhook, buildLambda) }

// Handler builds the webhook function's Lambda handler from the process's
// environment, as Start does before lambda.Start: for a main that starts
// Lambda's runtime itself, or wraps the handler. The handler answers LINE
// as the contract says: 200 once the bus and the chat queue took every
// event, 401 for a bad signature, 400, 405, 413 for bad requests, 5xx
// when the bus did not take everything (LINE redelivers).
func Handler(ctx context.Context) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	return compose.Build(ctx, "webhook", config.LoadWebhook, build)
}

func build(ctx context.Context, cfg config.Webhook, env compose.Env) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	h, err := core(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, h.APIGateway), nil
}

// buildLambda is Start's handler: LINE's requests and the replay queue's
// batches.
func buildLambda(ctx context.Context, cfg config.Webhook, env compose.Env) (func(context.Context, webhookfn.Event) (any, error), error) {
	h, err := core(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, webhookfn.Lambda(h)), nil
}

// core is the webhook over the SDK clients webhookfn pins (their retryer
// is linegate's, whatever the SDK's default).
func core(ctx context.Context, cfg config.Webhook, env compose.Env) (*ingress.Handler, error) {
	bus, queue := webhookfn.Clients(env.AWS)
	return webhookfn.New(ctx, cfg, bus, queue, env.Common)
}
