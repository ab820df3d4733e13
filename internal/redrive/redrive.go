// Package redrive moves a dead-letter queue's messages back to the queues
// they came from, with SQS's StartMessageMoveTask: the same call against AWS,
// an AWS-compatible endpoint, or `linegate local`.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ErrNotDLQ is returned when the named queue is not any queue's dead-letter
// queue (SQS refuses to move messages out of it).
var ErrNotDLQ = errors.New("redrive: not a dead-letter queue")

// ErrFailed is returned when the move task ends in FAILED or CANCELLED.
var ErrFailed = errors.New("redrive: move task did not complete")

// Queues is the SQS surface a redrive uses: what a caller's client must
// offer (the SDK's, the in-memory cloud's). Callers that redrive embed it in
// their own port.
type Queues interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// Result is what a finished redrive did.
type Result struct {
	Queue    string // the DLQ
	Source   string // its ARN
	Status   string // COMPLETED, FAILED, CANCELLED or RUNNING (when not waited for)
	Moved    int64
	ToMove   int64
	Failure  string
	Duration time.Duration
}

// Options tune a redrive.
type Options struct {
	// RatePerSecond caps the move (0: SQS's default, as fast as it can).
	RatePerSecond int32
	// Destination names the queue to move to. Empty moves each message back
	// to the queue it was dead-lettered from; a DLQ that EventBridge (not a
	// redrive policy) filled has no such queue and needs one.
	Destination string
	// Wait for the task to finish, polling every PollEvery (default 500 ms).
	Wait      bool
	PollEvery time.Duration
}

// Run starts moving every message of the DLQ queue (a URL, an ARN or a name,
// see QueueURL) back to its source queue(s) and, with opts.Wait, waits until
// the task ends (ctx bounds it).
func Run(ctx context.Context, q Queues, queue string, opts Options) (Result, error) {
	start := time.Now()
	res := Result{Queue: queue}
	src, err := queueARN(ctx, q, queue)
	if err != nil {
		return res, err
	}
	res.Source = src
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(res.Source)}
	dest := opts.Destination
	if dest == "" {
		if dest, err = onlySource(ctx, q, queue); err != nil {
			return res, err
		}
	}
	if dest != "" {
		arn, err := queueARN(ctx, q, dest)
		if err != nil {
			return res, err
		}
		in.DestinationArn = aws.String(arn)
	}
	if opts.RatePerSecond > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(opts.RatePerSecond)
	}
	if _, err := q.StartMessageMoveTask(ctx, in); err != nil {
		var unsupported *types.UnsupportedOperation
		if errors.As(err, &unsupported) {
			return res, fmt.Errorf("%w: %s: %v", ErrNotDLQ, queue, err)
		}
		return res, fmt.Errorf("start message move task from %s: %w", queue, err)
	}
	res.Status = "RUNNING"
	if !opts.Wait {
		res.Duration = time.Since(start)
		return res, nil
	}
	every := opts.PollEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	for {
		out, err := q.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(res.Source), MaxResults: aws.Int32(1)})
		if err != nil {
			return res, fmt.Errorf("list message move tasks of %s: %w", queue, err)
		}
		if len(out.Results) > 0 {
			t := out.Results[0]
			res.Status = aws.ToString(t.Status)
			res.Moved = t.ApproximateNumberOfMessagesMoved
			res.ToMove = aws.ToInt64(t.ApproximateNumberOfMessagesToMove)
			res.Failure = aws.ToString(t.FailureReason)
			switch res.Status {
			case "COMPLETED":
				res.Duration = time.Since(start)
				return res, nil
			case "FAILED", "CANCELLED":
				res.Duration = time.Since(start)
				return res, fmt.Errorf("%w: %s %s", ErrFailed, res.Status, res.Failure)
			}
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("wait for the move task of %s: %w", queue, ctx.Err())
		case <-time.After(every):
		}
	}
}

// onlySource returns the one queue whose redrive policy names the DLQ, or
// "" when several do (each message then goes back where SQS moved it
// from). Naming the destination matters: the worker dead-letters most
// failures itself with SendMessage, and SQS records no source for those, so
// a move task without a destination would leave them behind.
func onlySource(ctx context.Context, q Queues, dlq string) (string, error) {
	url, err := QueueURL(ctx, q, dlq)
	if err != nil {
		return "", err
	}
	out, err := q.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(url)})
	if err != nil {
		return "", fmt.Errorf("list the queues %s serves: %w", dlq, err)
	}
	switch len(out.QueueUrls) {
	case 0:
		return "", fmt.Errorf("%w: %s: no queue names it in its redrive policy", ErrNotDLQ, dlq)
	case 1:
		return out.QueueUrls[0], nil
	}
	return "", nil
}

// urlResolver is the SQS call QueueURL makes.
type urlResolver interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// QueueURL resolves a queue reference: a URL (https://… or http://…) is
// used as it is, an ARN (arn:<partition>:sqs:<region>:<account>:<name>) and
// a plain name are looked up with GetQueueUrl (an ARN's account as the
// queue's owner). A deployed stack's queue names carry CloudFormation's
// random suffix: resolve a logical id through the stack (internal/stack)
// first.
func QueueURL(ctx context.Context, q urlResolver, ref string) (string, error) {
	if strings.HasPrefix(ref, "https://") || strings.HasPrefix(ref, "http://") {
		return ref, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(ref)}
	if strings.HasPrefix(ref, "arn:") {
		parts := strings.Split(ref, ":")
		if len(parts) != 6 || parts[2] != "sqs" || parts[5] == "" {
			return "", fmt.Errorf("find queue %s: not an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)", ref)
		}
		in = &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5]), QueueOwnerAWSAccountId: aws.String(parts[4])}
	}
	u, err := q.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("find queue %s: %w", ref, err)
	}
	return aws.ToString(u.QueueUrl), nil
}

func queueARN(ctx context.Context, q Queues, name string) (string, error) {
	url, err := QueueURL(ctx, q, name)
	if err != nil {
		return "", err
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("queue attributes of %s: %w", name, err)
	}
	return attrs.Attributes[string(types.QueueAttributeNameQueueArn)], nil
}
