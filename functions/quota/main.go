// Command quota is the scheduled Lambda that governs the push quota: it
// reads the month's message quota and use from LINE, publishes them as
// metrics, and pages the operators at 80 % and 95 % with the projected
// month-end use (and when held results can be sent again). The logic lives
// in pkg/quota, the wiring in internal/compose/quotafn.
package main

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/quotafn"
	"github.com/linegate/linegate/internal/config"
)

func main() {
	compose.Main("quota", config.LoadQuota, func(ctx context.Context, cfg config.Quota, env compose.Env) (any, error) {
		g, err := quotafn.New(ctx, cfg, sqs.NewFromConfig(env.AWS), env.Common)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, func(ctx context.Context, _ events.EventBridgeEvent) (struct{}, error) {
			_, err := g.Run(ctx)
			return struct{}{}, err
		}), nil
	})
}
