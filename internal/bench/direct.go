package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/cloud/mem"
)

// The durable-direct design's queue and workers: what a developer builds who
// wants durability without linegate. The webhook verifies the signature
// (the SDK's check, as the samples do), sends each event to one SQS queue
// (SendMessage, with the same simulated round trip as linegate's bus) and
// answers 200 once the queue has every event; pollers receive batches, run
// the handler (reply only, as the samples answer) and delete what
// succeeded. Durable and at-least-once, with no bus, no deduplication, no
// order per chat, no dead-letter queue.
const (
	directQueue = "bench-direct"
	// directWait is the pollers' long poll (seconds).
	directWait = 1
	// directBatch is the pollers' batch size (the template's).
	directBatch = 10
	// DefaultDirectPollers is how many pollers the durable-direct worker, and
	// linegate's chat queue, run when Options.Pollers is 0, so both run as
	// many handlers at once.
	DefaultDirectPollers = 5
)

// directQueueing is the part of a baseline that exists in durable-direct
// mode: the queue, its pollers and what they have in flight.
type directQueueing struct {
	cloud      *mem.Cloud
	url        string
	latency    time.Duration
	visibility time.Duration
	pollers    int
	records    int
	stop       context.CancelFunc
	polling    sync.WaitGroup
}

// startDirect creates the queue and starts the pollers.
func (b *baseline) startDirect(o Options) error {
	d := &directQueueing{cloud: mem.New(), latency: o.BusLatency, pollers: o.Pollers, records: o.RecordConcurrency,
		// A message becomes visible again only once its handler would
		// have finished (linegate's queues get the same bound).
		visibility: 2*o.Work + time.Second}
	if d.pollers <= 0 {
		d.pollers = DefaultDirectPollers
	}
	q, err := d.cloud.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(directQueue),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int((d.visibility + time.Second - 1) / time.Second))}})
	if err != nil {
		return fmt.Errorf("durable-direct queue: %w", err)
	}
	d.url = *q.QueueUrl
	ctx, stop := context.WithCancel(context.Background())
	d.stop = stop
	b.direct = d
	for range d.pollers {
		d.polling.Add(1)
		go func() { defer d.polling.Done(); b.poll(ctx, d) }()
	}
	return nil
}

// directMessage is what the webhook sends per event.
type directMessage struct {
	Destination string          `json:"destination"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	Event       json.RawMessage `json:"event"`
}

// enqueue sends the events to the queue, one SendMessage each, after the
// simulated round trip; an error means LINE gets a 500.
func (d *directQueueing) enqueue(ctx context.Context, dest string, received time.Time, events []json.RawMessage) error {
	for _, ev := range events {
		if err := backoff.Sleep(ctx, d.latency); err != nil {
			return err
		}
		body, err := json.Marshal(directMessage{Destination: dest, ReceivedAt: received, Event: ev})
		if err != nil {
			return err
		}
		if _, err := d.cloud.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(d.url), MessageBody: aws.String(string(body))}); err != nil {
			return err
		}
	}
	return nil
}

// poll receives batches until ctx ends, running each batch's records (at
// most records at once) and deleting those that succeeded.
func (b *baseline) poll(ctx context.Context, d *directQueueing) {
	sem := make(chan struct{}, max(1, d.records))
	for ctx.Err() == nil {
		out, err := d.cloud.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(d.url), MaxNumberOfMessages: directBatch,
			WaitTimeSeconds: directWait})
		if err != nil {
			_ = backoff.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		var wg sync.WaitGroup
		for _, m := range out.Messages {
			var msg directMessage
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &msg) != nil {
				continue // never sent by the webhook; left to expire
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if b.run(b.process(), msg.Event, msg.Destination, msg.ReceivedAt, false) {
					_, _ = d.cloud.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(d.url), ReceiptHandle: m.ReceiptHandle})
				}
			}()
		}
		wg.Wait()
	}
}

// queued is what the queue still holds, in flight included.
func (d *directQueueing) queued() int {
	s := d.cloud.QueueStats(d.url)
	return s.Visible + s.InFlight + s.Delayed
}

func (d *directQueueing) close() {
	d.stop()
	d.polling.Wait()
	_ = d.cloud.Close()
}

// logQueueError is how the webhook reports a queue that did not take an
// event.
func logQueueError(log *slog.Logger, err error) {
	log.Warn("durable-direct: event not queued, answering 500", "error", err.Error())
}
