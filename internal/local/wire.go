package local

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/awswire"
)

// awsAPI is linegate local's AWS endpoint, on its own address: SQS,
// EventBridge and SNS over their wire protocols, served by the same cloud the
// in-process functions use, and with the in-memory cloud the idempotency
// tables' DynamoDB calls too. A function run elsewhere — under `sam local
// invoke --env-vars events/env.json`, whose AWS_ENDPOINT_URL points here —
// publishes onto this runtime's bus, sends to its queues and claims events
// in its tables; `linegate redrive --endpoint-url` drives its queues. With
// --endpoint-url the SQS, EventBridge and SNS calls are forwarded to that
// endpoint, and the functions should call it directly for DynamoDB.
func (r *Runtime) awsAPI() http.Handler {
	opts := []awswire.Option{
		awswire.WithSQS(redrives{SQS: r.ports.queues, r: r}), awswire.WithEventBridge(r.ports.events), awswire.WithSNS(r.ports.notify),
		awswire.WithObserver(r.observeAWS),
	}
	if r.tables != nil {
		opts = append(opts, awswire.WithDynamoDB(r.tables))
	}
	return awswire.New(opts...)
}

// observeAWS prints the calls from outside that move work: events put on
// the bus, reports published, redrives started.
func (r *Runtime) observeAWS(service, op string, err error) {
	if err != nil {
		r.out.line("aws       %s %s from outside failed: %v", service, op, err)
		return
	}
	switch service + "." + op {
	case "EventBridge.PutEvents":
		r.out.line("aws       PutEvents from outside accepted")
	case "SNS.Publish":
		r.out.line("aws       Publish from outside accepted")
	case "SQS.StartMessageMoveTask":
		r.out.line("sqs       redrive started")
	}
}

// redrives tells the event log which DLQ a redrive from outside empties:
// its dead-lettered events are queued again.
type redrives struct {
	awswire.SQS
	r *Runtime
}

func (q redrives) StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, opts ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	out, err := q.SQS.StartMessageMoveTask(ctx, in, opts...)
	if err == nil {
		q.r.events.redriven(queueNameOfARN(aws.ToString(in.SourceArn)))
	}
	return out, err
}

// queueNameOfARN is the queue name an SQS ARN ends with.
func queueNameOfARN(arn string) string {
	return arn[strings.LastIndexByte(arn, ':')+1:]
}
