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
	"encoding/json"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
)

// Start runs the notifier function: it builds the handler as Handler does
// and hands it to lambda.Start, which also gives it its schedule's events
// (the sweep: digests of held reports, DLQ depths against the dead letters
// announced); it does not return. A configuration it cannot use is logged
// and exits 1.
func Start() { compose.Main("notifier", config.LoadNotifier, buildLambda) }

// Handler builds the notifier function's Lambda handler from the
// process's environment, as Start does before lambda.Start. It handles a
// batch of the ops queue's records and reports the ones it could not
// deliver as partial batch failures.
func Handler(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	return compose.Build(ctx, "notifier", config.LoadNotifier, build)
}

func build(ctx context.Context, cfg config.Notifier, env compose.Env) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	n, err := core(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, n.HandleQueue), nil
}

// buildLambda is Start's handler: the ops queue's batches and the sweep's
// schedule.
func buildLambda(ctx context.Context, cfg config.Notifier, env compose.Env) (func(context.Context, json.RawMessage) (any, error), error) {
	n, err := core(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	return compose.Flushing(env.EMF, notifierfn.Handler(n)), nil
}

// core is the notifier with its paging ledger (an item of the idempotency
// table) and the SQS client its sweep reads the DLQs' depths with, when the
// template names the table (ALERT_STATE_TABLE; unset under sam local).
func core(ctx context.Context, cfg config.Notifier, env compose.Env) (*alert.Notifier, error) {
	var d notifierfn.Deps
	if cfg.StateTable != "" {
		d.Ledger = idempotency.NewDynamoDB(dynamodb.NewFromConfig(env.AWS), cfg.StateTable)
		d.Queues = sqs.NewFromConfig(env.AWS)
	}
	return notifierfn.New(ctx, cfg, env.AWS.Region, d, env.Common)
}
