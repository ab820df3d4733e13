package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/run/webhook"
)

// The handler Start runs, built from the environment the template gives
// the function (here a plain channel secret, as under sam local), answers
// LINE's verify request, an empty events array, with 200, and a body whose
// signature is not the channel's with 401.
func ExampleHandler() {
	for k, v := range map[string]string{
		"LINE_CHANNEL_SECRET": "channel-secret", "EVENT_BUS_NAME": "linegate", "AWS_REGION": "ap-northeast-1",
		"CHAT_QUEUE_URL": "https://sqs.ap-northeast-1.amazonaws.com/000000000000/linegate-InteractiveQueue.fifo",
	} {
		os.Setenv(k, v)
	}
	// The function logs and writes its EMF metrics to standard output, as
	// Lambda wants: away from this example's output.
	stdout := os.Stdout
	os.Stdout, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer func() { os.Stdout = stdout }()
	h, err := webhook.Handler(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	body := `{"destination":"U00000000000000000000000000000000","events":[]}`
	mac := hmac.New(sha256.New, []byte("channel-secret"))
	mac.Write([]byte(body))
	for _, sig := range []string{base64.StdEncoding.EncodeToString(mac.Sum(nil)), "bm90IHRoZSBzaWduYXR1cmU="} {
		resp, _ := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/webhook", Body: body,
			Headers: map[string]string{"x-line-signature": sig}})
		fmt.Fprintln(stdout, resp.StatusCode)
	}
	// Output:
	// 200
	// 401
}
