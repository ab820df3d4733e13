package redrive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/redrive"
)

func TestRedriveMovesEverythingBack(t *testing.T) {
	c := mem.New()
	defer c.Close()
	ctx := context.Background()
	work, dlq := cloudtest.QueueWithDLQ(t, c, "work", "work-dlq", 1, map[string]string{"VisibilityTimeout": "0"})
	for range 3 {
		c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(work), MessageBody: aws.String("poison")})
	}
	// Receive each once (maxReceiveCount 1), then the next receive moves them to the DLQ.
	for i := 0; i < 10 && c.QueueStats(dlq).Visible < 3; i++ {
		c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work), MaxNumberOfMessages: 10})
	}
	if n := c.QueueStats(dlq).Visible; n != 3 {
		t.Fatalf("setup: DLQ holds %d", n)
	}
	res, err := redrive.Run(ctx, c, "work-dlq", redrive.Options{Wait: true, PollEvery: time.Millisecond})
	if err != nil || res.Status != "COMPLETED" || res.Moved != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	if n := c.QueueStats(work).Visible; n != 3 {
		t.Fatalf("source queue holds %d after the redrive, want 3", n)
	}
	// Messages SQS did not dead-letter itself (the worker sends a failure
	// that cannot succeed straight to the DLQ) have no recorded source: the
	// redrive names the one queue the DLQ serves.
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String("dead-lettered by the worker")})
	res, err = redrive.Run(ctx, c, "work-dlq", redrive.Options{Wait: true, PollEvery: time.Millisecond})
	if err != nil || res.Status != "COMPLETED" || res.Moved != 1 || c.QueueStats(work).Visible != 4 {
		t.Fatalf("redrive of a message without a recorded source: %+v %v", res, err)
	}
	// Into another queue explicitly.
	other, _ := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("other")})
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String("from eventbridge")})
	res, err = redrive.Run(ctx, c, "work-dlq", redrive.Options{Destination: "other", Wait: true, PollEvery: time.Millisecond})
	if err != nil || res.Moved != 1 || c.QueueStats(aws.ToString(other.QueueUrl)).Visible != 1 {
		t.Fatalf("redrive to another queue: %+v %v", res, err)
	}
	if _, err := redrive.Run(ctx, c, "work-dlq", redrive.Options{Destination: "missing"}); err == nil {
		t.Fatal("unknown destination: want an error")
	}
	if _, err := redrive.Run(ctx, c, "work", redrive.Options{}); !errors.Is(err, redrive.ErrNotDLQ) {
		t.Fatalf("redrive from a non-DLQ: %v", err)
	}
	if _, err := redrive.Run(ctx, c, "nope", redrive.Options{}); err == nil {
		t.Fatal("unknown queue: want an error")
	}
}

// fakeSQS reports a move task that fails.
type fakeSQS struct{ status string }

func (f fakeSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("u")}, nil
}
func (f fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:1:dlq"}}, nil
}
func (f fakeSQS) StartMessageMoveTask(context.Context, *sqs.StartMessageMoveTaskInput, ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	return &sqs.StartMessageMoveTaskOutput{}, nil
}
func (f fakeSQS) ListDeadLetterSourceQueues(context.Context, *sqs.ListDeadLetterSourceQueuesInput, ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	return &sqs.ListDeadLetterSourceQueuesOutput{QueueUrls: []string{"u"}}, nil
}
func (f fakeSQS) ListMessageMoveTasks(context.Context, *sqs.ListMessageMoveTasksInput, ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	return &sqs.ListMessageMoveTasksOutput{Results: []types.ListMessageMoveTasksResultEntry{{Status: aws.String(f.status), FailureReason: aws.String("AccessDenied on the source queue")}}}, nil
}

func TestRedriveReportsFailureAndDeadline(t *testing.T) {
	_, err := redrive.Run(context.Background(), fakeSQS{status: "FAILED"}, "dlq", redrive.Options{Wait: true, PollEvery: time.Millisecond})
	if !errors.Is(err, redrive.ErrFailed) {
		t.Fatalf("err %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = redrive.Run(ctx, fakeSQS{status: "RUNNING"}, "dlq", redrive.Options{Wait: true, PollEvery: 5 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}
