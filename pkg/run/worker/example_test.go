package worker_test

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/run/worker"
)

// env sets the worker's environment as the template gives it (a plain
// access token, as under sam local).
func env(routeQueues string) {
	for k, v := range map[string]string{
		"LINE_CHANNEL_ACCESS_TOKEN": "local-channel-access-token", "IDEMPOTENCY_TABLE": "linegate-IdempotencyTable",
		"AWS_REGION": "ap-northeast-1", "ROUTE_QUEUES": routeQueues,
	} {
		os.Setenv(k, v)
	}
}

// The handler Start runs for a bot: a batch of SQS records in, the records
// to retry out.
func ExampleHandler() {
	env("long=https://sqs.ap-northeast-1.amazonaws.com/000000000000/linegate-LongQueue")
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, text) })
	h, err := worker.Handler(context.Background(), r)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := h(context.Background(), events.SQSEvent{})
	fmt.Println(len(resp.BatchItemFailures), err)
	// Output: 0 <nil>
}

// A bot whose route names a route queue the template does not declare in
// the worker's queue table does not start.
func ExampleHandler_missingRouteQueue() {
	env("long=https://sqs.ap-northeast-1.amazonaws.com/000000000000/linegate-LongQueue")
	r := bot.NewRouter()
	r.OnText("report", func(ctx context.Context, e *bot.Event, _ string) error { return e.ReplyText(ctx, "...") }, bot.Queue("reports"))
	_, err := worker.Handler(context.Background(), r)
	fmt.Println(err)
	// Output: worker: a route names a route queue the worker's queue table (ROUTE_QUEUES) lacks: "reports"
}
