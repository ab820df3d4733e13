package mem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud/mem"
)

// FuzzReceiptHandle feeds arbitrary receipt handles (outside input) to
// DeleteMessage and ChangeMessageVisibility: never a panic, and a handle
// that is not one of ours never deletes the message.
func FuzzReceiptHandle(f *testing.F) {
	f.Add("")
	f.Add("garbage")
	f.Add("cQBtc2cAMQ")                                             // "q\x00msg\x001"
	f.Add("cQAAMQ")                                                 // empty message id
	f.Add("cQB4AHgAeA")                                             // too many parts
	f.Add("cQBhYmMAOTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ") // huge sequence
	f.Fuzz(func(t *testing.T, handle string) {
		c := mem.New()
		defer c.Close()
		ctx := context.Background()
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl})
		if err != nil || len(r.Messages) != 1 {
			t.Fatal(err)
		}
		_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: out.QueueUrl, ReceiptHandle: aws.String(handle)})
		var rhi *sqstypes.ReceiptHandleIsInvalid
		if err != nil && !errors.As(err, &rhi) {
			t.Fatalf("DeleteMessage(%q) = %v", handle, err)
		}
		_, _ = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: out.QueueUrl, ReceiptHandle: aws.String(handle)})
		if handle != aws.ToString(r.Messages[0].ReceiptHandle) {
			if st := c.QueueStats(*out.QueueUrl); st.InFlight+st.Visible != 1 {
				t.Fatalf("a foreign handle %q deleted the message: %+v", handle, st)
			}
		}
	})
}

// FuzzQueueAttributes feeds arbitrary attribute values (RedrivePolicy JSON
// above all) to CreateQueue: never a panic; an accepted RedrivePolicy always
// reads back as valid JSON naming an existing queue.
func FuzzQueueAttributes(f *testing.F) {
	f.Add("RedrivePolicy", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":3}`)
	f.Add("RedrivePolicy", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":"3"}`)
	f.Add("RedrivePolicy", `{"maxReceiveCount":1e9}`)
	f.Add("RedrivePolicy", `[`)
	f.Add("VisibilityTimeout", "-1")
	f.Add("DelaySeconds", "900")
	f.Add("SqsManagedSseEnabled", "TRUE")
	f.Fuzz(func(t *testing.T, name, value string) {
		c := mem.New()
		defer c.Close()
		ctx := context.Background()
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("dlq")}); err != nil {
			t.Fatal(err)
		}
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: map[string]string{name: value}})
		if err != nil {
			return
		}
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatalf("GetQueueAttributes after accepting %s=%q: %v", name, value, err)
		}
		if rp, ok := a.Attributes["RedrivePolicy"]; ok && rp != "" {
			qs := c.Queues()
			if len(qs) != 2 || !qs[0].DLQ {
				t.Fatalf("accepted RedrivePolicy %q but the DLQ is not marked: %+v", rp, qs)
			}
		}
	})
}
