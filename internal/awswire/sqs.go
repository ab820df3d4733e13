package awswire

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/linegate/linegate/internal/redrive"
)

// SQS is the SQS calls the server serves: every call linegate's functions,
// `linegate redrive` and `linegate local`'s own event sources make.
type SQS interface {
	redrive.Queues // GetQueueUrl, GetQueueAttributes and the move-task calls
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error)
}

func (s *Server) addSQS() {
	q := s.sqs
	ops := map[string]func(context.Context, []byte) (any, error){
		"CreateQueue":                  sdkCall(q.CreateQueue),
		"GetQueueUrl":                  sdkCall(q.GetQueueUrl),
		"GetQueueAttributes":           sdkCall(q.GetQueueAttributes),
		"SetQueueAttributes":           sdkCall(q.SetQueueAttributes),
		"SendMessage":                  sdkCall(q.SendMessage),
		"SendMessageBatch":             sdkCall(q.SendMessageBatch),
		"ReceiveMessage":               sdkCall(q.ReceiveMessage),
		"DeleteMessage":                sdkCall(q.DeleteMessage),
		"DeleteMessageBatch":           sdkCall(q.DeleteMessageBatch),
		"ChangeMessageVisibility":      sdkCall(q.ChangeMessageVisibility),
		"ChangeMessageVisibilityBatch": sdkCall(q.ChangeMessageVisibilityBatch),
		"PurgeQueue":                   sdkCall(q.PurgeQueue),
		"StartMessageMoveTask":         sdkCall(q.StartMessageMoveTask),
		"ListMessageMoveTasks":         sdkCall(q.ListMessageMoveTasks),
		"ListDeadLetterSourceQueues":   sdkCall(q.ListDeadLetterSourceQueues),
	}
	encode := sdkEncoder(awsjson.New10(schemas.AmazonSQS))
	for name, call := range ops {
		s.json["AmazonSQS."+name] = jsonOp{service: "SQS", namespace: "com.amazonaws.sqs", query: true, version: "1.0", call: call, encode: encode}
	}
}
