package local

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/template"
)

// sqsPoller is the SQS calls an event source mapping makes: it receives
// batches and deletes what its function handled.
type sqsPoller interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// eventSource is one SQS event source mapping, polled like Lambda does: long
// polls until a message comes, then, with a batching window, keeps receiving
// until the batch holds BatchSize messages (up to 10,000) or the window has
// passed; one invocation per batch with the function's timeout, then a
// delete of every record the function did not report as failed. Failed
// records stay in flight until their visibility timeout ends, and the
// queue's redrive policy moves them to the DLQ after maxReceiveCount.
//
// The batching window is divided by the time scale like the queue's
// visibility timeout, so that the template's relation between the two
// (visibility ≥ 6 × timeout + window) holds: a message gathered at the
// start of a window never reappears before the window ends. At a time scale
// over 1 a burst is gathered over a shorter time, and coalesced less.
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
	alerts  bool     // the notifier's mapping: its dead letters are alerts, not LINE events
	gate    *esmGate // the scaling of this mapping (esmGate); nil: all its pollers poll
}

// poll receives and invokes until ctx ends; it is poller i of the mapping
// and polls only while its gate has scaled the mapping to more than i. When crashed is closed mid-invocation the batch is
// abandoned: nothing is deleted, as when a Lambda sandbox dies.
func (s *eventSource) poll(ctx context.Context, crashed <-chan struct{}, i int) {
	batch := max(1, min(s.mapping.BatchSize, 10))
	for ctx.Err() == nil {
		if s.gate != nil && !s.gate.await(ctx, i) {
			return
		}
		msgs, err := s.receive(ctx, int32(batch), maxLocalPollWait)
		if s.gate != nil && ctx.Err() == nil {
			s.gate.received(i, len(msgs))
		}
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
		s.invoke(ctx, s.gather(ctx, msgs), crashed)
	}
}

// gatherIdle is how long gather pauses between short polls in the last
// second of a batching window.
const gatherIdle = 50 * time.Millisecond

// gather fills a batch as Lambda does with a batching window: it keeps
// receiving until the batch holds BatchSize messages or the window, counted
// from the first message, has passed. Each receive asks for at most 10 and
// long-polls no longer than the window has left, so no receive outlives the
// window (a cancelled receive could leave messages in flight unseen).
func (s *eventSource) gather(ctx context.Context, msgs []sqstypes.Message) []sqstypes.Message {
	size, window := max(1, s.mapping.BatchSize), scaled(s.mapping.BatchingWindow, s.runtime.cfg.TimeScale)
	if window <= 0 {
		return msgs
	}
	end := time.Now().Add(window)
	for len(msgs) < size && ctx.Err() == nil {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		wait := int32(min(left/time.Second, maxLocalPollWait))
		more, err := s.receive(ctx, int32(min(size-len(msgs), 10)), wait)
		if err != nil {
			break
		}
		msgs = append(msgs, more...)
		if len(more) == 0 && wait == 0 {
			_ = backoff.Sleep(ctx, min(gatherIdle, time.Until(end)))
		}
	}
	return msgs
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
	// DeleteMessageBatch takes at most 10 entries; a mapping's batch may
	// hold up to 100 (the notifier's), or more with a batching window.
	for len(del) > 0 {
		n := min(len(del), 10)
		if _, err := s.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.url), Entries: del[:n]}); err != nil {
			s.runtime.log.Warn("delete batch failed; records will be received again", "queue", s.queue.Name, "error", err.Error())
		}
		del = del[n:]
	}
}

// noteFailure marks a record that failed its last allowed receive: the next
// receive moves it to the queue's DLQ.
func (s *eventSource) noteFailure(r events.SQSMessage) {
	n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	if s.queue.MaxReceiveCount == 0 || n < s.queue.MaxReceiveCount {
		return
	}
	if s.alerts {
		s.runtime.out.line("notifier  alert %s failed its last receive: moving to %s", r.MessageId, s.dlqName())
		return
	}
	id := r.MessageId
	if _, env, err := envelope.Decode([]byte(r.Body)); err == nil {
		if h := eventHead(env.Event); h.WebhookEventID != "" {
			id = h.WebhookEventID
		}
	}
	s.runtime.events.deadLettered(id, s.dlqName())
	s.runtime.out.deadLettered(id, s.dlqName())
}

// dlqName is the physical name of the queue's DLQ.
func (s *eventSource) dlqName() string {
	if q, ok := s.runtime.queue(s.queue.RedriveTarget); ok {
		return q.Name
	}
	return s.queue.RedriveTarget
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
