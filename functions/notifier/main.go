// Command notifier is the SNS-triggered Lambda that tells the operator on
// LINE: CloudWatch alarm state changes and handler crash reports become Flex
// cards pushed to every operator ID. The logic lives in pkg/alert, the
// wiring in pkg/compose/notifierfn.
package main

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/compose/notifierfn"
	"github.com/linegate/linegate/pkg/config"
)

func main() {
	compose.Main("notifier", config.LoadNotifier, func(ctx context.Context, cfg config.Notifier, env compose.Env) (any, error) {
		n, err := notifierfn.New(ctx, cfg, env.AWS.Region, env.Common)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, ev events.SNSEvent) error {
			defer func() { _ = env.EMF.Flush() }()
			return n.Handle(ctx, ev)
		}, nil
	})
}
