// Package worker is the entry of the worker function, the SQS-triggered
// Lambda that runs your bot over the chat queue, the background queue and
// the route queues, with partial batch failures. A project's
// functions/worker/main.go is one line, with the bot passed in:
//
//	func main() { worker.Start(app.New()) }
//
// Under `linegate local` the same binary is the bot's own process: started
// with the bot-process protocol's sockets in its environment, Start serves
// the router to linegate local, which runs the rest of the worker (queues,
// idempotency, replies) around it, instead of starting Lambda's runtime.
package worker

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/botproc"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/pkg/bot"
)

// Start runs the worker function with router, the bot: it builds the
// handler as Handler does and hands it to lambda.Start; it does not
// return. A configuration it cannot use (or a route queue the template
// does not declare) is logged and exits 1. Started by linegate local as
// the bot process, it serves router to linegate local until stopped.
func Start(router *bot.Router) {
	if botproc.Child(os.Getenv) {
		if err := botproc.ServeChild(context.Background(), router, os.Getenv); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	compose.Main("worker", config.LoadWorker, builder(router))
}

// Handler builds the worker function's Lambda handler for router from the
// process's environment, as Start does before lambda.Start. It handles a
// batch of SQS records and reports the ones to retry as partial batch
// failures.
func Handler(ctx context.Context, router *bot.Router) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	return compose.Build(ctx, "worker", config.LoadWorker, builder(router))
}

func builder(router *bot.Router) func(ctx context.Context, cfg config.Worker, env compose.Env) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	return func(ctx context.Context, cfg config.Worker, env compose.Env) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
		p, err := workerfn.InLambda(ctx, cfg, router, env)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, p.Handle), nil
	}
}
