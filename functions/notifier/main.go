// Command notifier is the Lambda that tells the operator on LINE: it reads
// the ops queue (the ops SNS topic's subscriber, in batches behind a
// batching window), and CloudWatch alarm state changes, handler crash
// reports and dead-letter notices become Flex cards — one per problem and
// window, with a count — pushed to every operator ID; on its schedule it
// sweeps (digests, DLQ depths). The logic lives in internal/alert, the
// wiring in internal/compose/notifierfn.
package main

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
)

func main() {
	compose.Main("notifier", config.LoadNotifier, func(ctx context.Context, cfg config.Notifier, env compose.Env) (any, error) {
		var d notifierfn.Deps
		if cfg.StateTable != "" {
			d.Ledger = idempotency.NewDynamoDB(dynamodb.NewFromConfig(env.AWS), cfg.StateTable)
			d.Queues = sqs.NewFromConfig(env.AWS)
		}
		n, err := notifierfn.New(ctx, cfg, env.AWS.Region, d, env.Common)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, notifierfn.Handler(n)), nil
	})
}
