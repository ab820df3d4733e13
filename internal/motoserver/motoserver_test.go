package motoserver

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestStartServesAWSProtocol(t *testing.T) {
	ep := Start(t)
	c := sqs.NewFromConfig(Config(ep))
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: strPtr("probe")}); err != nil {
		t.Fatalf("create queue on moto: %v", err)
	}
	out, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil || len(out.QueueUrls) != 1 {
		t.Fatalf("list queues = %v, %v; want one queue", out, err)
	}
	if err := Reset(ctx, ep); err != nil {
		t.Fatal(err)
	}
	out, err = c.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil || len(out.QueueUrls) != 0 {
		t.Fatalf("after reset list queues = %v, %v; want none", out.QueueUrls, err)
	}
}

func strPtr(s string) *string { return &s }
