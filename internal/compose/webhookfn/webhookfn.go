// Package webhookfn wires the webhook function: the channel secrets from
// SSM (the default channel's and each named channel's), an EventBridge
// publisher, the chat queue sender, and the ingress core.
// functions/webhook and `linegate local` both build the webhook here. It
// links EventBridge and SQS only: no DynamoDB, SNS or LINE client reaches
// the binary LINE waits on.
package webhookfn

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/ingress"
	"github.com/linegate/linegate/internal/secrets"
	"github.com/linegate/linegate/internal/telemetry"
)

// EventPutter is the one EventBridge call the webhook makes.
type EventPutter interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// QueueSender is the one SQS call the webhook makes: a batch of chat events
// to the FIFO chat queue.
type QueueSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Clients returns the webhook's EventBridge and SQS clients with the SDK's
// retryer pinned off. The webhook retries its two hand-offs itself, per entry
// and within PUBLISH_DEADLINE_MS, well inside LINE's webhook timeout; a
// second retry layer in the SDK would add attempts and backoff the deadline
// never planned for, and its defaults change between releases (aws-sdk-go-v2
// v1.48.0, 2026-11-10: retry behaviour 2.1, a 1 s backoff base for
// throttling errors, 14 tokens a retry). Pinned here, what the webhook does
// under throttling is what linegate decides, whatever the SDK's default,
// AWS_RETRY_MODE or AWS_MAX_ATTEMPTS say. (The publisher and the chat queue
// sender also turn the retryer off per call.)
func Clients(cfg aws.Config) (*eventbridge.Client, *sqs.Client) {
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.Retryer = aws.NopRetryer{} }),
		sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.Retryer = aws.NopRetryer{} })
}

// New resolves the secrets and builds the webhook core publishing to bus
// and sending chat events to queue, both within the publish deadline. When
// the channel secret is an SSM parameter, a signature that does not verify
// re-reads it (at most once per SECRET_REFRESH_COOLDOWN_MS), so a rotated
// secret is picked up by warm instances without a redeploy.
func New(ctx context.Context, cfg config.Webhook, bus EventPutter, queue QueueSender, c compose.Common) (*ingress.Handler, error) {
	c = c.WithDefaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.Secret, cfg.PreviousSecret)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	pub := eventbus.NewPublisher(bus, cfg.BusName, eventbus.WithSource(cfg.Source), eventbus.WithDeadline(cfg.PublishDeadline),
		eventbus.WithLogger(c.Logger), eventbus.WithMetrics(c.Metrics))
	chats := chatqueue.New(queue, cfg.ChatQueueURL, chatqueue.Config{Deadline: cfg.PublishDeadline, Log: c.Logger, Metrics: c.Metrics})
	opts := []ingress.Option{ingress.WithChatQueue(chats), ingress.WithSource(cfg.Source), ingress.WithRegion(cfg.Region),
		ingress.WithSecrets(vals...), ingress.WithMaxBodyBytes(cfg.MaxBodyBytes), ingress.WithBotUserID(cfg.BotUserID),
		ingress.WithLogger(c.Logger), ingress.WithMetrics(c.Metrics), ingress.WithTraceHeader(telemetry.TraceHeader)}
	if cfg.Secret.Param != "" && c.SSM != nil {
		ssm := c.SSM
		opts = append(opts, ingress.WithSecretRefresh(func(ctx context.Context) ([]string, error) {
			return secrets.Resolve(ctx, ssm, cfg.Secret, cfg.PreviousSecret)
		}, cfg.SecretRefreshCooldown))
	}
	named, err := channels(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	for _, ch := range named {
		opts = append(opts, ingress.WithChannel(ch))
	}
	return ingress.New(pub, opts...)
}

// channels reads every named channel's secrets and bot user ID (in as few
// SSM calls as GetParameters allows) and says how each re-reads its
// secrets after a signature that does not verify.
func channels(ctx context.Context, cfg config.Webhook, c compose.Common) ([]ingress.Channel, error) {
	if len(cfg.Channels) == 0 {
		return nil, nil
	}
	var all []config.Secret
	for _, ch := range cfg.Channels {
		all = append(all, ch.Secret, ch.PreviousSecret, ch.BotUserID)
	}
	vals, err := secrets.Resolve(ctx, c.SSM, all...)
	if err != nil {
		return nil, fmt.Errorf("webhook channel secrets: %w", err)
	}
	out := make([]ingress.Channel, 0, len(cfg.Channels))
	for i, ch := range cfg.Channels {
		v := vals[3*i : 3*i+3]
		if v[2] != "" {
			if err := config.CheckBotUserID(v[2]); err != nil {
				return nil, fmt.Errorf("channel %s (%s): %w", ch.Name, ch.BotUserID.Param, err)
			}
		}
		wc := ingress.Channel{Name: ch.Name, Secrets: v[:2], BotUserID: v[2]}
		if ch.Secret.Param != "" && c.SSM != nil {
			ssm, ch := c.SSM, ch
			wc.Reread = func(ctx context.Context) ([]string, error) {
				return secrets.Resolve(ctx, ssm, ch.Secret, ch.PreviousSecret)
			}
			wc.Cooldown = cfg.SecretRefreshCooldown
		}
		out = append(out, wc)
	}
	return out, nil
}

// Event is what the webhook function is invoked with: an API Gateway proxy
// request (HTTP API, payload format 1.0) from LINE, or a batch of records
// from its replay queue's event source. One decoding reads either.
type Event struct {
	events.APIGatewayProxyRequest
	Records []events.SQSMessage `json:"Records"`
}

// Lambda is the webhook function's handler: a batch of records is a replay
// to send on to the chat queue (ingress.Handler.Replays), anything else a
// webhook (ingress.Handler.APIGateway).
func Lambda(h *ingress.Handler) func(context.Context, Event) (any, error) {
	return func(ctx context.Context, ev Event) (any, error) {
		if len(ev.Records) > 0 {
			return h.Replays(ctx, events.SQSEvent{Records: ev.Records})
		}
		return h.APIGateway(ctx, ev.APIGatewayProxyRequest)
	}
}
