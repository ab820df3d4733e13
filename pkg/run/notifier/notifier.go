// Package notifier is the entry of the notifier function, the Lambda that
// tells the operators on LINE: it reads the ops queue (the ops SNS topic's
// subscriber), and CloudWatch alarm state changes, dead-letter notices and
// handler crash reports become Flex cards, one per problem with a count,
// pushed to every operator. A project's functions/notifier/main.go is one
// line:
//
//	func main() { notifier.Start() }
package notifier

import (
	"context"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/config"
)

// Start runs the notifier function: it builds the handler as Handler does
// and hands it to lambda.Start; it does not return. A configuration it
// cannot use is logged and exits 1.
func Start() { compose.Main("notifier", config.LoadNotifier, build) }

// Handler builds the notifier function's Lambda handler from the
// process's environment, as Start does before lambda.Start. It handles a
// batch of the ops queue's records and reports the ones it could not
// deliver as partial batch failures.
func Handler(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	return compose.Build(ctx, "notifier", config.LoadNotifier, build)
}

func build(ctx context.Context, cfg config.Notifier, env compose.Env) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	n, err := notifierfn.New(ctx, cfg, env.AWS.Region, env.Common)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, n.HandleQueue), nil
}
