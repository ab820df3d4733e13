// Package webhookfn wires the webhook function: the channel secrets from
// SSM, an EventBridge publisher, the chat queue sender, and the ingress core.
// functions/webhook and `linegate local` both build the webhook here. It
// links EventBridge and SQS only: no DynamoDB, SNS or LINE client reaches
// the binary LINE waits on.
package webhookfn

import (
	"context"
	"fmt"

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

// New resolves the secrets and builds the webhook core publishing to bus
// and sending chat events to queue, both within the publish deadline.
func New(ctx context.Context, cfg config.Webhook, bus EventPutter, queue QueueSender, c compose.Common) (*ingress.Handler, error) {
	c = c.WithDefaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.Secret, cfg.PreviousSecret)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	pub := eventbus.NewPublisher(bus, cfg.BusName, eventbus.WithSource(cfg.Source), eventbus.WithDeadline(cfg.PublishDeadline),
		eventbus.WithLogger(c.Logger), eventbus.WithMetrics(c.Metrics))
	chats := chatqueue.New(queue, cfg.ChatQueueURL, chatqueue.Config{Deadline: cfg.PublishDeadline, Log: c.Logger, Metrics: c.Metrics})
	return ingress.New(pub, ingress.WithChatQueue(chats), ingress.WithSource(cfg.Source), ingress.WithRegion(cfg.Region),
		ingress.WithSecrets(vals...), ingress.WithMaxBodyBytes(cfg.MaxBodyBytes), ingress.WithBotUserID(cfg.BotUserID),
		ingress.WithLogger(c.Logger), ingress.WithMetrics(c.Metrics), ingress.WithTraceHeader(telemetry.TraceHeader))
}
