package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/telemetry"
)

// queueAPI is the SQS calls the worker makes on its own queues: the source
// queue's redrive policy, a failed message's visibility, and a send to a
// dead-letter queue or the long-work queue. The SQS client and the
// in-memory cloud both satisfy it.
type queueAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// redrive is a source queue's redrive policy as the worker needs it: where
// its dead letters go, and how many receives SQS allows.
type redrive struct {
	dlqURL      string
	dlqFIFO     bool
	maxReceives int
}

// queues acts on the queues records come from. A nil *queues does nothing
// (a worker built without an SQS client: failures then simply fail, and
// SQS's own redrive ends them).
type queues struct {
	api queueAPI

	mu       sync.Mutex
	policies map[string]redrive // by source queue ARN
}

func newQueues(api queueAPI) *queues {
	if api == nil {
		return nil
	}
	return &queues{api: api, policies: map[string]redrive{}}
}

// queueURL is the URL of the queue an ARN names
// (arn:<partition>:sqs:<region>:<account>:<name>), in SQS's standard form.
func queueURL(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", fmt.Errorf("%q is not an SQS queue ARN", arn)
	}
	domain := "amazonaws.com"
	if parts[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", parts[3], domain, parts[4], parts[5]), nil
}

// queueName is the last element of a queue's ARN or URL.
func queueName(arnOrURL string) string {
	if i := strings.LastIndexAny(arnOrURL, ":/"); i >= 0 {
		return arnOrURL[i+1:]
	}
	return arnOrURL
}

// policy returns the redrive policy of the queue a record came from, asked
// of SQS once per queue and kept for the process's life. A queue without
// one has a zero redrive.
func (q *queues) policy(ctx context.Context, sourceARN string) (redrive, error) {
	q.mu.Lock()
	rp, ok := q.policies[sourceARN]
	q.mu.Unlock()
	if ok {
		return rp, nil
	}
	url, err := queueURL(sourceARN)
	if err != nil {
		return redrive{}, err
	}
	out, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return redrive{}, fmt.Errorf("redrive policy of %s: %w", queueName(sourceARN), err)
	}
	if s := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]; s != "" {
		var raw struct {
			DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
			MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			return redrive{}, fmt.Errorf("redrive policy of %s: %w", queueName(sourceARN), err)
		}
		if rp.dlqURL, err = queueURL(raw.DeadLetterTargetArn); err != nil {
			return redrive{}, fmt.Errorf("redrive policy of %s: %w", queueName(sourceARN), err)
		}
		rp.dlqFIFO = strings.HasSuffix(raw.DeadLetterTargetArn, ".fifo")
		// SQS writes maxReceiveCount as a number or a numeric string.
		rp.maxReceives, _ = strconv.Atoi(strings.Trim(string(raw.MaxReceiveCount), `"`))
	}
	q.mu.Lock()
	q.policies[sourceARN] = rp
	q.mu.Unlock()
	return rp, nil
}

// changeVisibility hides the record's message for seconds from now (0:
// visible at once).
func (q *queues) changeVisibility(ctx context.Context, msg events.SQSMessage, seconds int32) error {
	url, err := queueURL(msg.EventSourceARN)
	if err != nil {
		return err
	}
	_, err = q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
		ReceiptHandle: aws.String(msg.ReceiptHandle), VisibilityTimeout: seconds})
	if err != nil {
		return fmt.Errorf("change visibility of %s: %w", msg.MessageId, err)
	}
	return nil
}

// Message attributes a dead letter the worker sends carries, so an operator
// (and a redrive tool) can tell why and from where.
const (
	AttrDeadLetterReason = "linegate-reason"
	AttrDeadLetterSource = "linegate-source-arn"
)

// deadLetter sends the record's body, attributes and trace header to dlq,
// with the reason it could not be handled. To a FIFO dead-letter queue it
// keeps the record's message group; its deduplication id is the record's
// own plus the time of its first receive, so the same dead letter sent
// twice (a crash before the record was acknowledged) is dropped by SQS,
// while the event dead-lettered again after a redrive is not.
func (q *queues) deadLetter(ctx context.Context, dlq redrive, msg events.SQSMessage, reason string) error {
	in := &sqs.SendMessageInput{
		QueueUrl: aws.String(dlq.dlqURL), MessageBody: aws.String(msg.Body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			AttrDeadLetterReason: {DataType: aws.String("String"), StringValue: aws.String(reason)},
			AttrDeadLetterSource: {DataType: aws.String("String"), StringValue: aws.String(msg.EventSourceARN)},
		},
		MessageSystemAttributes: traceAttribute(msg),
	}
	for name, a := range msg.MessageAttributes {
		if len(in.MessageAttributes) < 10 { // SQS's limit
			in.MessageAttributes[name] = sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		}
	}
	if dlq.dlqFIFO {
		group := msg.Attributes["MessageGroupId"]
		if group == "" {
			group = "dead-letters"
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(deadLetterDedupID(msg))
	}
	if _, err := q.api.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("send %s to the dead-letter queue: %w", msg.MessageId, err)
	}
	return nil
}

// deadLetterDedupID is the record's deduplication id (or message id) and
// the timestamp of its first receive, hashed when over SQS's 128 characters.
func deadLetterDedupID(msg events.SQSMessage) string {
	id := msg.Attributes["MessageDeduplicationId"]
	if id == "" {
		id = msg.MessageId
	}
	s := id + "-" + msg.Attributes["ApproximateFirstReceiveTimestamp"]
	if len(s) <= 128 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// forward sends the record's body unchanged (with its trace header) to the
// standard queue at url: the long-work queue.
func (q *queues) forward(ctx context.Context, url string, msg events.SQSMessage) error {
	_, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(msg.Body),
		MessageSystemAttributes: traceAttribute(msg)})
	if err != nil {
		return fmt.Errorf("send %s to %s: %w", msg.MessageId, queueName(url), err)
	}
	return nil
}

func traceAttribute(msg events.SQSMessage) map[string]sqstypes.MessageSystemAttributeValue {
	h := telemetry.SQSTraceHeader(msg.Attributes)
	if h == "" {
		return nil
	}
	return map[string]sqstypes.MessageSystemAttributeValue{telemetry.SQSTraceAttribute: {DataType: aws.String("String"), StringValue: aws.String(h)}}
}
