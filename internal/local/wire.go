package local

import (
	"net/http"

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
		awswire.WithSQS(r.ports.queues), awswire.WithEventBridge(r.ports.events), awswire.WithSNS(r.ports.notify),
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
		r.events.redriven()
		r.out.line("sqs       redrive started")
	}
}
