package ingress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/pkg/chatqueue"
	"github.com/linegate/linegate/pkg/eventbus"
)

// nopPublisher accepts everything: the benchmark measures the accept path
// (verify + split + build entries and chat queue messages), not the bus nor
// the queue.
type nopPublisher struct{}

func (nopPublisher) Publish(_ context.Context, e []eventbus.Entry) (eventbus.Result, error) {
	return eventbus.Result{Accepted: len(e)}, nil
}

// nopQueue accepts every chat queue message.
type nopQueue struct{}

func (nopQueue) Send(_ context.Context, m []chatqueue.Message) (chatqueue.Result, error) {
	return chatqueue.Result{Queued: len(m)}, nil
}

// body builds a webhook body of n real text-message events.
func benchBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"destination":"U0123456789abcdef0123456789abcdef","events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"replyToken":"nHuyWiB7yP5Zw52FIkcQobQuGDXCTA","type":"message","mode":"active","timestamp":1462629479859,"source":{"type":"user","userId":"U4af4980629a0b5c7d02b0f1c7f0c4e3c"},"webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3Z%03d","deliveryContext":{"isRedelivery":false},"message":{"id":"444573844083572737","type":"text","quoteToken":"q3Plxr4AgKd...","text":"Hello, world! This is message %d"}}`, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkAccept compares linegate's accept path with line-bot-sdk-go's
// webhook.ParseRequest on the same signed bodies, in one run:
//
//	go test -run '^$' -bench Accept -benchmem ./pkg/ingress/
func BenchmarkAccept(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		body := benchBody(n)
		sig := sign(body)
		b.Run(fmt.Sprintf("events=%d/impl=linegate", n), func(b *testing.B) {
			h := newHandler(b, nopPublisher{}, WithChatQueue(nopQueue{}))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				resp, _ := h.Handle(context.Background(), "POST", sig, body)
				if resp.Status != 200 {
					b.Fatal(resp.Status)
				}
			}
		})
		b.Run(fmt.Sprintf("events=%d/impl=sdk-ParseRequest", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			req, _ := http.NewRequest("POST", "/webhook", nil)
			req.Header.Set("x-line-signature", sig)
			rd := bytes.NewReader(body)
			for b.Loop() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				cb, err := webhook.ParseRequest(secret, req)
				if err != nil || len(cb.Events) != n {
					b.Fatal(err)
				}
			}
		})
	}
}
