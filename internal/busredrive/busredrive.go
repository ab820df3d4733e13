// Package busredrive sends the messages of an EventBridge rule target's
// dead-letter queue back onto their bus: SQS's StartMessageMoveTask only
// redrives the DLQs of SQS queues, and these messages carry the original
// event. Each message is deleted only after the bus accepted its event (at
// least once). The CLI's `linegate redrive` uses it; no Lambda links it.
package busredrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/redrive"
)

// Attributes EventBridge sets on every message it dead-letters from a rule
// target (the body is the event itself).
const (
	AttrRuleARN   = "RULE_ARN"
	AttrErrorCode = "ERROR_CODE"
)

// ErrNotEventsDLQ means a message in the queue was not dead-lettered by
// EventBridge (it has no RULE_ARN attribute or its body is not an event):
// it is left in the queue.
var ErrNotEventsDLQ = errors.New("redrive: not an EventBridge dead letter")

// eventsQueue is the SQS calls an EventBridge redrive makes.
type eventsQueue interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// bus is the EventBridge call an EventBridge redrive makes.
type bus interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// EventsResult is what an EventBridge redrive did.
type EventsResult struct {
	Queue    string // the DLQ's URL
	Put      int    // events the bus accepted (and deleted from the DLQ)
	Failed   int    // events the bus refused: left in the DLQ, visible again after the visibility timeout
	Skipped  int    // messages that are no EventBridge dead letter: left in the DLQ
	Duration time.Duration
}

// EventsOptions tune an EventBridge redrive.
type EventsOptions struct {
	// Bus overrides the bus each event goes back to; by default it is the
	// bus of the rule that dead-lettered it (its RULE_ARN attribute).
	Bus string
	// VisibilityTimeout hides each received batch while it is put back
	// (default 60 s): long enough for PutEvents, short enough that a
	// message whose put failed comes back soon.
	VisibilityTimeout time.Duration
}

// Events empties a rule target's dead-letter queue back onto the event bus:
// it receives up to 10 messages at a time, puts each event (the message
// body, as EventBridge dead-letters it) back on its bus with PutEvents, and
// deletes a message only after the bus accepted its event, so a crash or a
// refused entry never loses an event (at least once: an event can be put
// twice, which the worker's idempotency absorbs). Every rule of the bus sees
// the event again, not only the one whose target failed. It returns when a
// receive comes back empty; ctx bounds it. Refused entries and foreign
// messages are counted, left in the queue, and reported as an error
// wrapping redrive.ErrFailed or ErrNotEventsDLQ.
func Events(ctx context.Context, q eventsQueue, b bus, queueURL string, opts EventsOptions) (EventsResult, error) {
	start := time.Now()
	res := EventsResult{Queue: queueURL}
	vis := opts.VisibilityTimeout
	if vis <= 0 {
		vis = time.Minute
	}
	seen := map[string]bool{} // message ids already handled, so a refused one is not retried in a loop
	for {
		// A long poll of 1 s asks every SQS server, so an empty answer means
		// the queue has nothing visible left.
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			VisibilityTimeout: int32(vis / time.Second), MessageAttributeNames: []string{"All"}})
		if err != nil {
			res.Duration = time.Since(start)
			return res, fmt.Errorf("receive from %s: %w", queueURL, err)
		}
		fresh := 0
		var entries []ebtypes.PutEventsRequestEntry
		var handles []*string
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			fresh++
			entry, err := entryOf(m, opts.Bus)
			if err != nil {
				res.Skipped++
				continue
			}
			entries = append(entries, entry)
			handles = append(handles, m.ReceiptHandle)
		}
		if fresh == 0 {
			break
		}
		if len(entries) == 0 {
			continue
		}
		put, err := b.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			res.Failed += len(entries)
			res.Duration = time.Since(start)
			return res, fmt.Errorf("put events back: %w (the messages stay in the DLQ)", err)
		}
		for i, e := range put.Entries {
			if i >= len(handles) {
				break
			}
			if e.ErrorCode != nil || e.EventId == nil {
				res.Failed++
				continue
			}
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: handles[i]}); err != nil {
				res.Duration = time.Since(start)
				return res, fmt.Errorf("delete a redriven message from %s: %w (its event is on the bus and may be put again)", queueURL, err)
			}
			res.Put++
		}
	}
	res.Duration = time.Since(start)
	switch {
	case res.Failed > 0:
		return res, fmt.Errorf("%w: the bus refused %d event(s); they stay in the DLQ", redrive.ErrFailed, res.Failed)
	case res.Skipped > 0:
		return res, fmt.Errorf("%w: %d message(s) without RULE_ARN or with a body that is not an event stay in the DLQ", ErrNotEventsDLQ, res.Skipped)
	}
	return res, nil
}

// entryOf rebuilds the PutEvents entry of a dead-lettered event.
func entryOf(m types.Message, busOverride string) (ebtypes.PutEventsRequestEntry, error) {
	rule := m.MessageAttributes[AttrRuleARN]
	if rule.StringValue == nil {
		return ebtypes.PutEventsRequestEntry{}, ErrNotEventsDLQ
	}
	var ev struct {
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
		Time       time.Time       `json:"time"`
		Resources  []string        `json:"resources"`
		Detail     json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || ev.Source == "" || ev.DetailType == "" || len(ev.Detail) == 0 {
		return ebtypes.PutEventsRequestEntry{}, ErrNotEventsDLQ
	}
	busName := busOverride
	if busName == "" {
		busName = BusOfRule(*rule.StringValue)
	}
	e := ebtypes.PutEventsRequestEntry{EventBusName: aws.String(busName), Source: aws.String(ev.Source), DetailType: aws.String(ev.DetailType),
		Detail: aws.String(string(ev.Detail)), Resources: ev.Resources}
	if !ev.Time.IsZero() {
		e.Time = aws.Time(ev.Time)
	}
	return e, nil
}

// BusOfRule is the bus of a rule ARN: arn:…:rule/<bus>/<rule> names it,
// arn:…:rule/<rule> is on the default bus.
func BusOfRule(ruleARN string) string {
	_, path, ok := strings.Cut(ruleARN, ":rule/")
	if !ok {
		return "default"
	}
	if b, _, ok := strings.Cut(path, "/"); ok {
		return b
	}
	return "default"
}

// peeker is the SQS calls IsEventsDLQ makes.
type peeker interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// IsEventsDLQ peeks at the queue's first visible message and reports
// whether EventBridge dead-lettered it; false for an empty queue. The
// message is made visible again at once (ChangeMessageVisibility 0: some
// emulators read a receive's VisibilityTimeout of 0 as "the queue's
// default").
func IsEventsDLQ(ctx context.Context, q peeker, queueURL string) (bool, error) {
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, VisibilityTimeout: 0,
		MessageAttributeNames: []string{AttrRuleARN}})
	if err != nil {
		return false, fmt.Errorf("peek at %s: %w", queueURL, err)
	}
	if len(out.Messages) == 0 {
		return false, nil
	}
	m := out.Messages[0]
	// A message whose visibility timeout ran out between the two calls (a
	// queue with a short one, a slow network) is visible again already: SQS
	// answers MessageNotInflight, which is what this call wanted.
	var notInflight *types.MessageNotInflight
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil && !errors.As(err, &notInflight) {
		return false, fmt.Errorf("peek at %s: make the message visible again: %w", queueURL, err)
	}
	return m.MessageAttributes[AttrRuleARN].StringValue != nil, nil
}
