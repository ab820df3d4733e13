package local

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/compose/webhookfn"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/worker"
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
		sqsPoller             // event source mappings
		awswire.SQS           // the AWS endpoint: `linegate redrive`, `resend-held`, functions under `sam local invoke`
		queueMaker            // provisioning
		workerfn.Queues       // dead letters, retry delays, long work, held results, resends, ChatOps redrive
	}
	rules  ruleMaker  // provisioning
	topics topicMaker // provisioning
	// events and notify are the whole EventBridge and SNS the AWS endpoint
	// serves (the bus above is the webhook's, with tracing and latency).
	events awswire.EventBridge
	notify awswire.SNS
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

// tableStore is what the worker keeps in the idempotency table: event
// records and crash markers, handlers' steps and chat sessions. Both
// backends' stores are one.
type tableStore interface {
	idempotency.Store
	worker.StateStore
}

// tracedStore records the idempotency store's calls as the DynamoDB
// operations they are in AWS.
type tracedStore struct {
	next   tableStore
	region string
	model  *capacityModel // the capacity model's round trips and write quota; nil without
}

// modelled applies the capacity model to one call (write: it spends the
// table's write throughput).
func (s tracedStore) modelled(ctx context.Context, write bool) error {
	if s.model == nil {
		return nil
	}
	return s.model.dynamo(ctx, write)
}

func (s tracedStore) Claim(ctx context.Context, key string, d time.Duration) error {
	if err := s.modelled(ctx, true); err != nil {
		return err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "PutItem", s.region)
	err := s.next.Claim(ctx, key, d)
	span.End(nil) // a refused claim is an answer, not a fault
	return err
}

func (s tracedStore) Complete(ctx context.Context, key string, d time.Duration) error {
	if err := s.modelled(ctx, true); err != nil {
		return err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "UpdateItem", s.region)
	err := s.next.Complete(ctx, key, d)
	span.End(err)
	return err
}

func (s tracedStore) Release(ctx context.Context, key string) error {
	if err := s.modelled(ctx, true); err != nil {
		return err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "DeleteItem", s.region)
	err := s.next.Release(ctx, key)
	span.End(err)
	return err
}

func (s tracedStore) ClaimValue(ctx context.Context, key string, d time.Duration) ([]byte, error) {
	if err := s.modelled(ctx, true); err != nil {
		return nil, err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "PutItem", s.region)
	v, err := s.next.ClaimValue(ctx, key, d)
	span.End(nil) // a refused claim is an answer, not a fault
	return v, err
}

func (s tracedStore) CompleteValue(ctx context.Context, key string, v []byte, d time.Duration) error {
	if err := s.modelled(ctx, true); err != nil {
		return err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "UpdateItem", s.region)
	err := s.next.CompleteValue(ctx, key, v, d)
	span.End(err)
	return err
}

func (s tracedStore) Get(ctx context.Context, key string) (idempotency.Versioned, error) {
	if err := s.modelled(ctx, false); err != nil {
		return idempotency.Versioned{}, err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "GetItem", s.region)
	v, err := s.next.Get(ctx, key)
	span.End(err)
	return v, err
}

func (s tracedStore) Put(ctx context.Context, key string, v []byte, expected int64, d time.Duration) (int64, error) {
	if err := s.modelled(ctx, true); err != nil {
		return 0, err
	}
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "PutItem", s.region)
	n, err := s.next.Put(ctx, key, v, expected, d)
	span.End(nil) // a conflict is an answer, not a fault
	return n, err
}

func (s tracedStore) Delete(ctx context.Context, key string, expected int64) error {
	ctx, span := telemetry.StartAWSCall(ctx, "DynamoDB", "DeleteItem", s.region)
	err := s.next.Delete(ctx, key, expected)
	span.End(nil) // a conflict is an answer, not a fault
	return err
}

// acceptance is what one webhook request put on the bus, for its console
// line: the events held (their worker lines wait for the webhook line) and
// those the bus accepted.
type acceptance struct {
	mu       sync.Mutex
	held     []string
	accepted map[string]bool
	printed  bool // the request's webhook line is out (touched by its handler goroutine only)
}

// hold holds the worker lines of ids (once per request), before the bus
// can hand them to a worker.
func (a *acceptance) hold(p *printer, ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(a.held, id) {
			a.held = append(a.held, id)
			p.hold(id)
		}
	}
}

func (a *acceptance) accept(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.accepted == nil {
		a.accepted = map[string]bool{}
	}
	a.accepted[id] = true
}

// outcome returns the held ids and how many distinct events were accepted.
func (a *acceptance) outcome() (held []string, accepted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.held), len(a.accepted)
}

type acceptanceKey struct{}

func withAcceptance(ctx context.Context, a *acceptance) context.Context {
	return context.WithValue(ctx, acceptanceKey{}, a)
}

// holdingChatQueue holds the worker lines of the events a webhook request
// sends to the chat queue, as acceptingBus does for the bus's: the webhook
// hands the events to both at once, and a worker can receive one from the
// queue before the bus has seen it.
type holdingChatQueue struct {
	next webhookfn.QueueSender
	r    *Runtime
}

func (q holdingChatQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if acc, _ := ctx.Value(acceptanceKey{}).(*acceptance); acc != nil {
		ids := make([]string, 0, len(in.Entries))
		for _, e := range in.Entries {
			if e.MessageBody == nil {
				continue
			}
			if _, d, err := envelope.Decode([]byte(*e.MessageBody)); err == nil {
				if h := eventHead(d.Event); h.WebhookEventID != "" {
					ids = append(ids, h.WebhookEventID)
				}
			}
		}
		acc.hold(q.r.out, ids)
	}
	return q.next.SendMessageBatch(ctx, in, opts...)
}

// acceptingBus tells the runtime about every entry the bus accepted: the
// event log gets one entry per webhook event from the moment it is safe in
// the bus, with the trace of the webhook invocation that put it there.
// Inside a webhook request, the events' worker lines are held before the
// bus sees them, so none can print before the request's webhook line.
type acceptingBus struct {
	next webhookfn.EventPutter
	r    *Runtime
}

func (b acceptingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	heads := make([]struct{ Type, WebhookEventID string }, len(in.Entries))
	ids := make([]string, 0, len(in.Entries))
	for i, e := range in.Entries {
		var d envelope.Detail
		if e.Detail != nil && json.Unmarshal([]byte(*e.Detail), &d) == nil {
			heads[i] = eventHead(d.Event)
			if heads[i].WebhookEventID != "" {
				ids = append(ids, heads[i].WebhookEventID)
			}
		}
	}
	acc, _ := ctx.Value(acceptanceKey{}).(*acceptance)
	if acc != nil {
		acc.hold(b.r.out, ids)
	}
	out, err := b.next.PutEvents(ctx, in, opts...)
	if err != nil || out == nil {
		return out, err
	}
	trace := telemetry.TraceID(ctx)
	for i, e := range out.Entries {
		if i >= len(heads) || e.ErrorCode != nil || heads[i].WebhookEventID == "" {
			continue
		}
		if acc != nil {
			acc.accept(heads[i].WebhookEventID)
		}
		b.r.events.accepted(heads[i].WebhookEventID, heads[i].Type, trace)
	}
	// With --state the bus's events are on disk already; their event log
	// entries are before the webhook answers too.
	if err := b.r.syncState(ctx); err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	b.r.console.hub.Notify(console.TopicEvents)
	return out, err
}
