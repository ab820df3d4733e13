package notifier_test

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/run/notifier"
)

// The handler Start runs: a batch of the ops queue's records in, the ones
// to retry out.
func ExampleHandler() {
	for k, v := range map[string]string{
		"LINE_CHANNEL_ACCESS_TOKEN": "local-channel-access-token", "AWS_REGION": "ap-northeast-1",
		"OPERATOR_LINE_IDS": "U0000000000000000000000000000cafe",
	} {
		os.Setenv(k, v)
	}
	// The function logs and writes its EMF metrics to standard output, as
	// Lambda wants: away from this example's output.
	stdout := os.Stdout
	os.Stdout, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer func() { os.Stdout = stdout }()
	h, err := notifier.Handler(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := h(context.Background(), events.SQSEvent{})
	fmt.Fprintln(stdout, len(resp.BatchItemFailures), err)
	// Output: 0 <nil>
}
