package local

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithy "github.com/aws/smithy-go"
)

// redriveQueues is the SQS calls a redrive makes, which the shim serves.
type redriveQueues interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
}

// shimQueues is what the shim serves: a redrive's calls, and the three a
// resend of held results adds.
type shimQueues interface {
	redriveQueues
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// sqsShim answers the few SQS calls a redrive makes (GetQueueUrl,
// GetQueueAttributes, StartMessageMoveTask, ListMessageMoveTasks) and those
// `linegate resend-held` makes (ReceiveMessage, DeleteMessage,
// ChangeMessageVisibility) in SQS's JSON protocol, so the CLI drives the
// local cloud with `--endpoint-url http://127.0.0.1:3000` and the same SDK
// code that drives AWS, by calling q.
func (r *Runtime) sqsShim(q shimQueues) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		target := req.Header.Get("X-Amz-Target")
		op, ok := strings.CutPrefix(target, "AmazonSQS.")
		if !ok {
			writeJSON(w, 404, map[string]string{"error": "not found"})
			return
		}
		ctx := req.Context()
		var out any
		var err error
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20))
		switch op {
		case "GetQueueUrl":
			out, err = call(ctx, dec, q.GetQueueUrl)
		case "GetQueueAttributes":
			out, err = call(ctx, dec, q.GetQueueAttributes)
		case "StartMessageMoveTask":
			out, err = call(ctx, dec, func(ctx context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
				out, err := q.StartMessageMoveTask(ctx, in)
				if err == nil {
					r.events.redriven()
					r.out.line("sqs       redrive started from %s", deref(in.SourceArn))
				}
				return out, err
			})
		case "ListMessageMoveTasks":
			out, err = call(ctx, dec, q.ListMessageMoveTasks)
		case "ReceiveMessage":
			out, err = call(ctx, dec, q.ReceiveMessage)
		case "DeleteMessage":
			out, err = call(ctx, dec, q.DeleteMessage)
		case "ChangeMessageVisibility":
			out, err = call(ctx, dec, q.ChangeMessageVisibility)
		default:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			writeJSON(w, 400, map[string]string{"__type": "com.amazonaws.sqs#UnsupportedOperation", "message": op + " is not served by linegate local"})
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if err != nil {
			code, msg := "InvalidParameterValue", err.Error()
			var api smithy.APIError
			if errors.As(err, &api) {
				code, msg = api.ErrorCode(), api.ErrorMessage()
			}
			w.Header().Set("x-amzn-query-error", code+";Sender")
			writeJSON(w, 400, map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
			return
		}
		writeJSON(w, 200, out)
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// call decodes an operation's input from the request body and makes it.
func call[In, Out any](ctx context.Context, dec *json.Decoder, op func(context.Context, *In, ...func(*sqs.Options)) (*Out, error)) (any, error) {
	var in In
	if err := dec.Decode(&in); err != nil {
		return nil, err
	}
	return op(ctx, &in)
}
