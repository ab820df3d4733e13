// Command notifier is the Lambda that tells the operator on LINE: it reads
// the ops queue (the ops SNS topic's subscriber, in batches behind a
// batching window), and CloudWatch alarm state changes and handler crash
// reports become Flex cards — one per alarm or stack signature, with a
// count — pushed to every operator ID. The logic lives in internal/alert, the
// wiring in internal/compose/notifierfn.
package main

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/config"
)

func main() {
	compose.Main("notifier", config.LoadNotifier, func(ctx context.Context, cfg config.Notifier, env compose.Env) (any, error) {
		n, err := notifierfn.New(ctx, cfg, env.AWS.Region, env.Common)
		if err != nil {
			return nil, err
		}
		return compose.Flushing(env.EMF, n.HandleQueue), nil
	})
}
