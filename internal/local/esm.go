package local

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/pkg/backoff"
	"github.com/linegate/linegate/pkg/envelope"
)

// sqsPoller is the SQS calls an event source mapping makes: it receives
// batches and deletes what its function handled.
type sqsPoller interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// eventSource is one SQS event source mapping, polled like Lambda does: long
// polls for up to BatchSize messages (waiting up to the batching window for
// a fuller batch), one invocation per batch with the function's timeout,
// then a delete of every record the function did not report as failed.
// Failed records stay in flight until their visibility timeout ends, and the
// queue's redrive policy moves them to the DLQ after maxReceiveCount.
type eventSource struct {
	runtime *Runtime
	sqs     sqsPoller
	fn      template.Function
	mapping template.SQSMapping
	queue   template.Queue
	url     string
	arn     string
	handle  func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	metrics interface{ Flush() error }
}

// poll receives and invokes until ctx ends. When crashed is closed mid-
// invocation the batch is abandoned: nothing is deleted, as when a Lambda
// sandbox dies.
func (s *eventSource) poll(ctx context.Context, crashed <-chan struct{}) {
	batch := max(1, min(s.mapping.BatchSize, 10))
	for ctx.Err() == nil {
		msgs, err := s.receive(ctx, int32(batch), maxLocalPollWait)
		if err != nil {
			if ctx.Err() == nil {
				s.runtime.log.Warn("receive failed", "queue", s.queue.Name, "error", err.Error())
				_ = backoff.Sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		// Batching window: wait (once) for a fuller batch.
		if len(msgs) < batch && s.mapping.BatchingWindow > 0 {
			wctx, cancel := context.WithTimeout(ctx, scaled(s.mapping.BatchingWindow, s.runtime.cfg.TimeScale))
			more, _ := s.receive(wctx, int32(batch-len(msgs)), 0)
			cancel()
			msgs = append(msgs, more...)
		}
		s.invoke(ctx, msgs, crashed)
	}
}

func (s *eventSource) receive(ctx context.Context, n int32, wait int32) ([]sqstypes.Message, error) {
	out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(s.url), MaxNumberOfMessages: n, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

func (s *eventSource) invoke(ctx context.Context, msgs []sqstypes.Message, crashed <-chan struct{}) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = s.record(m)
	}
	ictx, seg := s.runtime.startInvocation(ctx, s.fn.Name)
	ictx, cancel := context.WithTimeout(ictx, s.fn.Timeout)
	resp, err := s.handle(ictx, ev)
	cancel()
	seg.End(err)
	select {
	case <-crashed:
		return // the process died: no deletes, no accounting
	default:
	}
	_ = s.metrics.Flush()
	s.runtime.counters.invoked(s.fn.Name, err)

	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	// Without ReportBatchItemFailures, or when the invocation failed, Lambda
	// deletes nothing: the whole batch comes back.
	if err != nil || (!s.mapping.ReportBatchItemFailures && len(failed) > 0) {
		for _, r := range ev.Records {
			failed[r.MessageId] = true
		}
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			s.noteFailure(ev.Records[i])
			continue
		}
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(del) > 0 {
		if _, err := s.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.url), Entries: del}); err != nil {
			s.runtime.log.Warn("delete batch failed; records will be received again", "queue", s.queue.Name, "error", err.Error())
		}
	}
}

// noteFailure marks a record that failed its last allowed receive: the next
// receive moves it to the queue's DLQ.
func (s *eventSource) noteFailure(r events.SQSMessage) {
	n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	if s.queue.MaxReceiveCount == 0 || n < s.queue.MaxReceiveCount {
		return
	}
	id := r.MessageId
	if _, env, err := envelope.Decode([]byte(r.Body)); err == nil {
		if h := eventHead(env.Event); h.WebhookEventID != "" {
			id = h.WebhookEventID
		}
	}
	dlq := s.queue.RedriveTarget
	if q, ok := s.runtime.queue(dlq); ok {
		dlq = q.Name
	}
	s.runtime.events.deadLettered(id, dlq)
	s.runtime.out.deadLettered(id, dlq)
}

func (s *eventSource) record(m sqstypes.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: map[string]string{}, MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource: "aws:sqs", EventSourceARN: s.arn, AWSRegion: s.runtime.top.Region,
	}
	for k, v := range m.Attributes {
		r.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return r
}

func scaled(d time.Duration, k float64) time.Duration {
	if k <= 0 {
		return d
	}
	return time.Duration(float64(d) / k)
}
