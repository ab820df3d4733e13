// Package workerfn wires the worker function: the access token from SSM, a
// LINE client per record, the idempotency store, crash reports to the ops
// topic, the SQS calls on its own queues (dead letters, retry delays, the
// long-work hand-off), tracing, and the bot the caller passes in. functions/worker and
// `linegate local` both build the worker here; the bot is always the
// caller's (a user's bot is their handlers plus one line in main).
package workerfn

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/secrets"
	"github.com/linegate/linegate/pkg/telemetry"
	"github.com/linegate/linegate/pkg/worker"
)

// TopicPublisher is the one SNS call the worker makes: a crash report.
type TopicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// QueueOps is the SQS calls the worker makes on its own queues: a source
// queue's redrive policy (to find its dead-letter queue), a failed record's
// visibility (retry delays, deferred records of a failed chat), and a send
// (a dead letter, or long work to the long-work queue).
type QueueOps interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Deps are the worker's ports besides the bot.
type Deps struct {
	Store idempotency.Store // DynamoDB in AWS, memory locally
	Ops   TopicPublisher    // crash reports; nil (or no OPS_TOPIC_ARN) disables them
	// Queues acts on the queues records come from; nil leaves failures to
	// SQS's visibility timeout and redrive, and runs long routes in place.
	Queues QueueOps
	// Observer sees every record's result (`linegate local`'s event log).
	Observer func(worker.Result)
	Region   string
	Function string
	// Options are applied last (tests, benchmarks, local tweaks).
	Options []worker.Option
}

// New resolves the access token and builds the SQS batch processor running
// router.
func New(ctx context.Context, cfg config.Worker, router *bot.Router, d Deps, c compose.Common) (*worker.Processor, error) {
	if router == nil {
		return nil, fmt.Errorf("worker: no bot: pass your router (see README 'Writing a handler')")
	}
	c = c.WithDefaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("worker secrets: %w", err)
	}
	token := vals[0]
	lineOpts := []lineapi.Option{lineapi.WithBaseURL(cfg.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient)}
	opts := []worker.Option{
		worker.WithMessenger(func() bot.Messenger { return lineapi.New(token, lineOpts...) }),
		worker.WithConcurrency(cfg.Concurrency),
		worker.WithFunctionTimeout(cfg.FunctionTimeout),
		worker.WithKeepFor(cfg.KeepCompleted),
		worker.WithIdentity(d.Function, d.Region),
		worker.WithSecrets(token),
		worker.WithLogger(c.Logger),
		worker.WithMetrics(c.Metrics),
		worker.WithTracing(recordSpan, telemetry.TraceID),
		worker.WithEventContext(telemetry.WithEventID),
	}
	if d.Ops != nil && cfg.OpsTopicARN != "" {
		opts = append(opts, worker.WithCrashReports(d.Ops, cfg.OpsTopicARN))
	}
	if d.Queues != nil {
		opts = append(opts, worker.WithQueues(d.Queues), worker.WithLongQueue(cfg.LongQueueURL))
	}
	if d.Observer != nil {
		opts = append(opts, worker.WithObserver(d.Observer))
	}
	return worker.New(router, d.Store, append(opts, d.Options...)...)
}

// recordSpan traces one record as a subsegment of the invocation, linked
// (not merged) to the webhook's trace named by the record's AWSTraceHeader.
func recordSpan(ctx context.Context, name, upstream string) (context.Context, worker.Span) {
	ctx, s := telemetry.StartSubsegment(ctx, name)
	if h, err := telemetry.ParseTraceHeader(upstream); err == nil {
		s.Link(h)
	}
	return ctx, s
}
