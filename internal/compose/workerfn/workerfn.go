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

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/chatops"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linetoken"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/redrive"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// TopicPublisher is the one SNS call the worker makes: a crash report.
type TopicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Queues is the worker's SQS surface besides its event sources: settling a
// failed record (a source queue's redrive policy, a record's visibility, a
// send to its dead-letter queue), handing long work to the long-work queue,
// holding a result (SendMessage), resending held results (Receive, Delete,
// ChangeMessageVisibility) and redriving a DLQ from an alert card (the calls
// of pkg/redrive).
type Queues interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	redrive.Queues
}

// Deps are the worker's ports besides the bot.
type Deps struct {
	// Store is the idempotency table: DynamoDB in AWS, memory locally. When
	// it is also a worker.StateStore (both of those are), handlers' steps
	// (bot.Once) and chat sessions (Event.Session) live there too.
	Store idempotency.Store
	Ops   TopicPublisher // crash reports and the held notice; nil (or no OPS_TOPIC_ARN) disables them
	// Queues acts on the queues records come from (dead letters, retry
	// delays, deferred records of a failed chat, long work), holds pushes
	// LINE refused for the monthly limit in the HeldQueue (HELD_QUEUE_URL),
	// resends them and redrives DLQs for ChatOps. nil leaves failures to
	// SQS's visibility timeout and redrive, runs long routes in place, and
	// disables holding (the push fails) and those buttons.
	Queues Queues
	// Silencer mutes an alarm for ChatOps' Silence button; nil disables it.
	Silencer chatops.Silencer
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
		return nil, fmt.Errorf("worker: no bot: pass your router to worker.Start (docs/handlers.md)")
	}
	c = c.WithDefaults()
	tokens, secretVals, err := linetoken.FromConfig(ctx, cfg.Auth, c.SSM, c.HTTPClient, nil)
	if err != nil {
		return nil, fmt.Errorf("worker secrets: %w", err)
	}
	lineOpts := []lineapi.Option{lineapi.WithBaseURL(cfg.Auth.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens)}
	newMessenger := func() bot.Messenger { return lineapi.New("", lineOpts...) }
	holding := d.Queues != nil && cfg.HeldQueueURL != ""
	if holding {
		notice := heldNotice{pub: d.Ops, topic: cfg.OpsTopicARN, once: d.Store, log: c.Logger}
		holder := held.NewHolder(d.Queues, cfg.HeldQueueURL, held.WithLogger(c.Logger),
			held.WithOnHeld(func(ctx context.Context, it held.Item) {
				worker.MarkHeld(ctx)
				notice.tell(ctx, it)
			}))
		newMessenger = func() bot.Messenger { return holder.Wrap(lineapi.New("", lineOpts...)) }
	}
	opts := []worker.Option{
		worker.WithMessenger(newMessenger),
		worker.WithConcurrency(cfg.Concurrency),
		worker.WithFunctionTimeout(cfg.FunctionTimeout),
		worker.WithKeepFor(cfg.KeepCompleted),
		worker.WithSessionTTL(cfg.SessionTTL),
		worker.WithIdentity(d.Function, d.Region),
		worker.WithSecrets(secretVals...),
		worker.WithLogger(c.Logger),
		worker.WithMetrics(c.Metrics),
		worker.WithTracing(recordSpan, telemetry.TraceID),
		worker.WithEventContext(telemetry.WithEventID),
	}
	if s, ok := d.Store.(worker.StateStore); ok {
		opts = append(opts, worker.WithStateStore(s))
	}
	if d.Ops != nil && cfg.OpsTopicARN != "" {
		opts = append(opts, worker.WithCrashReports(d.Ops, cfg.OpsTopicARN))
	}
	if d.Queues != nil {
		opts = append(opts, worker.WithQueues(d.Queues), worker.WithRouteQueues(cfg.RouteQueues))
	}
	if d.Observer != nil {
		opts = append(opts, worker.WithObserver(d.Observer))
	}
	if cfg.ChatOps.Enabled() {
		ops, err := newChatOps(ctx, cfg, d, c, func() *lineapi.Client { return lineapi.New("", lineOpts...) }, holding)
		if err != nil {
			return nil, err
		}
		opts = append(opts, worker.WithIntercept(ops.Intercept))
	}
	return worker.New(router, d.Store, append(opts, d.Options...)...)
}

// recordSpan traces one record as a span of the invocation, linked (not
// merged) to the webhook's trace named by the record's trace header.
func recordSpan(ctx context.Context, name, upstream string) (context.Context, worker.Span) {
	ctx, s := telemetry.Start(ctx, name)
	if h, err := telemetry.ParseTraceHeader(upstream); err == nil {
		s.Link(h)
	}
	return ctx, s
}

// newChatOps builds the handler of the operator's taps on alert cards.
func newChatOps(ctx context.Context, cfg config.Worker, d Deps, c compose.Common, line func() *lineapi.Client, holding bool) (*chatops.Handler, error) {
	signer, err := postback.FromConfig(ctx, cfg.ChatOps, c.SSM)
	if err != nil {
		return nil, err
	}
	oc := chatops.Config{Signer: signer, Operators: cfg.ChatOps.Operators, Once: d.Store, DLQs: cfg.ChatOps.DLQs,
		Silencer: d.Silencer, Log: c.Logger, Metrics: c.Metrics}
	if d.Queues != nil {
		oc.Queues = d.Queues
	}
	if holding {
		oc.Resend = func(ctx context.Context) (held.Report, error) {
			return held.Resend(ctx, d.Queues, cfg.HeldQueueURL, line(), 0, c.Logger)
		}
	}
	return chatops.New(oc)
}

// InLambda builds the worker as functions/worker runs it in AWS: the
// idempotency table in DynamoDB, crash reports to the ops topic, its own
// queues, and the ChatOps silencer on CloudWatch alarms and EventBridge
// Scheduler, each client from env's AWS configuration.
func InLambda(ctx context.Context, cfg config.Worker, router *bot.Router, env compose.Env) (*worker.Processor, error) {
	return New(ctx, cfg, router, Deps{
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
}
