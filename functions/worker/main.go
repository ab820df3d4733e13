// Command worker is the SQS-triggered Lambda that runs the bot over batches
// from the interactive (FIFO), long-work and background queues, with partial
// batch failures.
// The logic lives in internal/worker and pkg/bot, the wiring in
// internal/compose/workerfn. The bot is yours: replace app.New with your router.
package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/chatops"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
)

func main() {
	compose.Main("worker", config.LoadWorker, func(ctx context.Context, cfg config.Worker, env compose.Env) (any, error) {
		bot := app.New(app.Config{Probes: cfg.Probes}) // your bot: its handlers, registered on a router
		p, err := workerfn.New(ctx, cfg, bot, workerfn.Deps{
			Store:  idempotency.NewDynamoDB(dynamodb.NewFromConfig(env.AWS), cfg.IdempotencyTable),
			Ops:    sns.NewFromConfig(env.AWS),
			Queues: sqs.NewFromConfig(env.AWS),
			Silencer: chatops.CloudWatchSilencer{
				Alarms: cloudwatch.NewFromConfig(env.AWS), Schedules: scheduler.NewFromConfig(env.AWS),
				RoleARN: cfg.ChatOps.SilenceRoleARN, Prefix: cfg.ChatOps.SchedulePrefix,
			},
			Function: env.Function,
			Region:   env.AWS.Region,
		}, env.Common)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, p.Handle), nil
	})
}
