package local

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/pkg/backoff"
	"github.com/linegate/linegate/pkg/compose/webhookfn"
	"github.com/linegate/linegate/pkg/compose/workerfn"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/telemetry"
)

// cloudPorts are the cloud clients the runtime hands its consumers. Each
// field is typed as the union of the narrow interfaces its consumers
// declare, and a backend fills it: with the in-memory cloud, or with the
// SDK clients of an endpoint.
type cloudPorts struct {
	bus    webhookfn.EventPutter // the webhook
	chat   webhookfn.QueueSender // the webhook's chat queue: queues, traced
	ops    publisher             // the worker's crash reports, alarm notifications
	queues interface {
		webhookfn.QueueSender // the webhook's chat queue
		workerfn.QueueOps     // the worker's dead letters, retry delays and long-work hand-off
		sqsPoller             // event source mappings
		redriveQueues         // the SQS shim `linegate redrive` talks to
		queueMaker            // provisioning
	}
	rules  ruleMaker  // provisioning
	topics topicMaker // provisioning
}

// The in-memory cloud is not reached through the SDK, so its calls are
// traced here the way the SDK instrumentation traces real ones; the
// endpoint backend's SDK clients are instrumented directly.

// roundTrip is where a traced call goes and how long its simulated round
// trip takes (0: none).
type roundTrip struct {
	region  string
	latency time.Duration
}

// tracedBus records PutEvents and can add a simulated round trip.
type tracedBus struct {
	next webhookfn.EventPutter
	roundTrip
}

func (b tracedBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return slowCall(ctx, "EventBridge", "PutEvents", b.roundTrip, func(ctx context.Context) (*eventbridge.PutEventsOutput, error) {
		return b.next.PutEvents(ctx, in, opts...)
	})
}

// slowCall traces call as the AWS operation service.op, after waiting
// rt's latency: a simulated round trip.
func slowCall[O any](ctx context.Context, service, op string, rt roundTrip, call func(ctx context.Context) (O, error)) (O, error) {
	ctx, span := telemetry.StartAWSCall(ctx, service, op, rt.region)
	if err := backoff.Sleep(ctx, rt.latency); rt.latency > 0 && err != nil {
		span.End(err)
		var zero O
		return zero, err
	}
	out, err := call(ctx)
	span.End(err)
	return out, err
}

// tracedChatQueue records the webhook's SendMessageBatch and can add a
// simulated round trip, as tracedBus does for PutEvents.
type tracedChatQueue struct {
	next webhookfn.QueueSender
	roundTrip
}

func (q tracedChatQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return slowCall(ctx, "SQS", "SendMessageBatch", q.roundTrip, func(ctx context.Context) (*sqs.SendMessageBatchOutput, error) {
		return q.next.SendMessageBatch(ctx, in, opts...)
	})
}

// tracedTopics records Publish.
type tracedTopics struct {
	next   publisher
	region string
}

func (t tracedTopics) Publish(ctx context.Context, in *sns.PublishInput, opts ...func(*sns.Options)) (*sns.PublishOutput, error) {
	ctx, span := telemetry.StartAWSCall(ctx, "SNS", "Publish", t.region)
	out, err := t.next.Publish(ctx, in, opts...)
	span.End(err)
	return out, err
}

// tracedStore records the idempotency store's calls as the DynamoDB
// operations they are in AWS.
type tracedStore struct {
	next   idempotency.Store
	region string
}

func (s tracedStore) Claim(ctx context.Context, key string, d time.Duration) error {
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "PutItem", s.region)
	err := s.next.Claim(ctx, key, d)
	span.End(nil) // a refused claim is an answer, not a fault
	return err
}

func (s tracedStore) Complete(ctx context.Context, key string, d time.Duration) error {
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "UpdateItem", s.region)
	err := s.next.Complete(ctx, key, d)
	span.End(err)
	return err
}

func (s tracedStore) Release(ctx context.Context, key string) error {
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "DeleteItem", s.region)
	err := s.next.Release(ctx, key)
	span.End(err)
	return err
}
