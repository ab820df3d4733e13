// Package quota is the entry of the quota function, the scheduled Lambda
// that governs the push quota: it reads the month's message quota and use
// from LINE, publishes them as metrics, and pages the operators at 80 % and
// 95 % with the projected month-end use (and when held results can be sent
// again). A project's functions/quota/main.go is one line:
//
//	func main() { quota.Start() }
package quota

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/quotafn"
	"github.com/linegate/linegate/internal/config"
)

// Start runs the quota function: it builds the handler as Handler does and
// hands it to lambda.Start; it does not return. A configuration it cannot
// use is logged and exits 1.
func Start() { compose.Main("quota", config.LoadQuota, build) }

// Handler builds the quota function's Lambda handler from the process's
// environment, as Start does before lambda.Start. Each scheduled event
// runs one check of the month's quota.
func Handler(ctx context.Context) (func(context.Context, events.EventBridgeEvent) (struct{}, error), error) {
	return compose.Build(ctx, "quota", config.LoadQuota, build)
}

func build(ctx context.Context, cfg config.Quota, env compose.Env) (func(context.Context, events.EventBridgeEvent) (struct{}, error), error) {
	g, err := quotafn.New(ctx, cfg, sqs.NewFromConfig(env.AWS), env.Common)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, func(ctx context.Context, _ events.EventBridgeEvent) (struct{}, error) {
		_, err := g.Run(ctx)
		return struct{}{}, err
	}), nil
}
