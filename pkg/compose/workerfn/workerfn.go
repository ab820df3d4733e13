// Package workerfn wires the worker function: the access token from SSM, a
// LINE client per record, the idempotency store, crash reports to the ops
// topic, tracing, and the bot the caller passes in. functions/worker and
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
	"github.com/linegate/linegate/pkg/held"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/linetoken"
	"github.com/linegate/linegate/pkg/telemetry"
	"github.com/linegate/linegate/pkg/worker"
)

// TopicPublisher is the one SNS call the worker makes: a crash report.
type TopicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// QueueSender is the one SQS call holding a result makes.
type QueueSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Deps are the worker's ports besides the bot.
type Deps struct {
	Store idempotency.Store // DynamoDB in AWS, memory locally
	Ops   TopicPublisher    // crash reports and the held notice; nil (or no OPS_TOPIC_ARN) disables them
	// Held writes pushes LINE refused for the monthly limit to the
	// HeldQueue (HELD_QUEUE_URL); nil disables holding (the push fails).
	Held QueueSender
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
	tokens, secretVals, err := linetoken.FromConfig(ctx, cfg.Auth, c.SSM, c.HTTPClient, nil)
	if err != nil {
		return nil, fmt.Errorf("worker secrets: %w", err)
	}
	lineOpts := []lineapi.Option{lineapi.WithBaseURL(cfg.Auth.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens)}
	newMessenger := func() bot.Messenger { return lineapi.New("", lineOpts...) }
	if d.Held != nil && cfg.HeldQueueURL != "" {
		notice := held.Notice{Pub: d.Ops, Topic: cfg.OpsTopicARN, Once: d.Store, Log: c.Logger}
		holder := held.NewHolder(d.Held, cfg.HeldQueueURL, held.WithLogger(c.Logger),
			held.WithOnHeld(func(ctx context.Context, it held.Item) {
				worker.MarkHeld(ctx)
				notice.Tell(ctx, it)
			}))
		newMessenger = func() bot.Messenger { return holder.Wrap(lineapi.New("", lineOpts...)) }
	}
	opts := []worker.Option{
		worker.WithMessenger(newMessenger),
		worker.WithConcurrency(cfg.Concurrency),
		worker.WithFunctionTimeout(cfg.FunctionTimeout),
		worker.WithKeepFor(cfg.KeepCompleted),
		worker.WithIdentity(d.Function, d.Region),
		worker.WithSecrets(secretVals...),
		worker.WithLogger(c.Logger),
		worker.WithMetrics(c.Metrics),
		worker.WithTracing(recordSpan, telemetry.TraceID),
		worker.WithEventContext(telemetry.WithEventID),
	}
	if d.Ops != nil && cfg.OpsTopicARN != "" {
		opts = append(opts, worker.WithCrashReports(d.Ops, cfg.OpsTopicARN))
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
