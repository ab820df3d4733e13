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

// sqsShim answers the few SQS calls a redrive makes (GetQueueUrl,
// GetQueueAttributes, StartMessageMoveTask, ListMessageMoveTasks, ListQueues)
// in SQS's JSON protocol, so `linegate redrive --endpoint-url
// http://127.0.0.1:3000` drives the local cloud with the same SDK code that
// drives AWS, by calling q.
func (r *Runtime) sqsShim(q redriveQueues) http.Handler {
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
			var in sqs.GetQueueUrlInput
			if err = dec.Decode(&in); err == nil {
				out, err = q.GetQueueUrl(ctx, &in)
			}
		case "GetQueueAttributes":
			var in sqs.GetQueueAttributesInput
			if err = dec.Decode(&in); err == nil {
				out, err = q.GetQueueAttributes(ctx, &in)
			}
		case "StartMessageMoveTask":
			var in sqs.StartMessageMoveTaskInput
			if err = dec.Decode(&in); err == nil {
				out, err = q.StartMessageMoveTask(ctx, &in)
				if err == nil {
					r.events.redriven(queueNameOfARN(deref(in.SourceArn)))
					r.out.line("sqs       redrive started from %s", deref(in.SourceArn))
				}
			}
		case "ListMessageMoveTasks":
			var in sqs.ListMessageMoveTasksInput
			if err = dec.Decode(&in); err == nil {
				out, err = q.ListMessageMoveTasks(ctx, &in)
			}
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

// queueNameOfARN is the queue name an SQS ARN ends with.
func queueNameOfARN(arn string) string {
	return arn[strings.LastIndexByte(arn, ':')+1:]
}
