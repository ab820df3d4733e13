package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/cputime"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/signature"
)

// The accept-path benchmarks, run side by side and compared with benchstat
// (README "Benchmarks"):
//
//	go test -run '^$' -bench 'Accept|SDKValidateAndSplit|Floor' -benchmem -count 6 ./internal/ingress/ > accept.txt
//	benchstat -row /events -col .name accept.txt
//
// Every one starts from the same signed body in memory and first reads it
// (one copy into a buffer of its size, what API Gateway's string body
// costs the Lambda), then:
//
//   - BenchmarkAccept: linegate's whole accept path, Handle: the signature,
//     the exact-key split with its limits (UTF-8, depth, count), each
//     event's bus entry and, for chat events, its chat queue message (bus
//     and queue stubbed by senders that finish in memory; the goroutines
//     the real bus publisher starts for its calls are
//     BenchmarkAcceptSenders', in senders_bench_test.go).
//   - BenchmarkSDKValidateAndSplit: the fair baseline, the same work done
//     the naive way with LINE's SDK: webhook.ValidateSignature, then
//     json.Unmarshal into the destination and the events as
//     []json.RawMessage. It checks less than linegate (no exact keys, no
//     event types, no chats, no limits) and builds nothing.
//   - BenchmarkFloor: what no accept path can avoid: one HMAC-SHA256 of the
//     body compared with the signature (signature.Verify with one secret).
//   - BenchmarkSDKParseRequest: the SDK's webhook.ParseRequest, which
//     decodes every event fully into typed structs: more work than the
//     accept path does, kept for comparison only and labelled so.

// benchSizes are the events per body the accept path is measured at.
var benchSizes = []int{1, 10, 100}

// nopPublisher accepts everything, in memory: the benchmark measures the
// accept path (verify + split + build entries and chat queue messages),
// not the bus nor the queue.
type nopPublisher struct{}

func (nopPublisher) Start(_ context.Context, e []eventbus.Entry) *eventbus.Publication {
	return eventbus.Accepted(len(e))
}

// nopQueue accepts every chat queue message.
type nopQueue struct{}

func (nopQueue) Send(_ context.Context, m []chatqueue.Message) (chatqueue.Result, error) {
	return chatqueue.Result{Queued: len(m)}, nil
}

// benchBody builds a webhook body of n real text-message events.
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

// readBody is the read every benchmark starts with: the body copied into a
// buffer of its size.
func readBody(body []byte) []byte {
	b := make([]byte, len(body))
	copy(b, body)
	return b
}

// eachSize runs op as a sub-benchmark events=N for every size, with the
// body's bytes and allocations reported.
func eachSize(b *testing.B, op func(b *testing.B, n int, body []byte, sig string)) {
	for _, n := range benchSizes {
		body := benchBody(n)
		sig := sign(body)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			defer cputime.PerOp(b)()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			op(b, n, body, sig)
		})
	}
}

// BenchmarkAccept is linegate's accept path (see the top of this file).
func BenchmarkAccept(b *testing.B) { benchHandle(b, WithChatQueue(nopQueue{})) }

// BenchmarkAcceptBusOnly is BenchmarkAccept with no chat queue configured:
// every event goes to the bus alone. The difference from BenchmarkAccept is
// what the chat queue's messages and their hand-off cost.
func BenchmarkAcceptBusOnly(b *testing.B) { benchHandle(b) }

// benchHandle runs Handle, with opts, on every body size.
func benchHandle(b *testing.B, opts ...Option) {
	eachSize(b, func(b *testing.B, _ int, body []byte, sig string) {
		h := newHandler(b, nopPublisher{}, opts...)
		ctx := context.Background()
		for b.Loop() {
			resp, _ := h.Handle(ctx, "POST", sig, readBody(body))
			if resp.Status != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
}

// BenchmarkSDKValidateAndSplit is the fair baseline: the SDK's signature
// check and one json.Unmarshal into raw events.
func BenchmarkSDKValidateAndSplit(b *testing.B) {
	eachSize(b, func(b *testing.B, n int, body []byte, sig string) {
		for b.Loop() {
			raw := readBody(body)
			if !webhook.ValidateSignature(secret, sig, raw) {
				b.Fatal("signature")
			}
			var cb struct {
				Destination string            `json:"destination"`
				Events      []json.RawMessage `json:"events"`
			}
			if err := json.Unmarshal(raw, &cb); err != nil || len(cb.Events) != n {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFloor is the read and one HMAC-SHA256 compared with the
// signature: the least any accept path does.
func BenchmarkFloor(b *testing.B) {
	eachSize(b, func(b *testing.B, _ int, body []byte, sig string) {
		v := signature.NewVerifier([]byte(secret))
		for b.Loop() {
			if !v.Verify(readBody(body), sig) {
				b.Fatal("signature")
			}
		}
	})
}

// BenchmarkSDKParseRequest is the SDK's ParseRequest: a FULL decode of
// every event into typed structs, more work than the accept path does
// (kept for comparison; not the fair baseline).
func BenchmarkSDKParseRequest(b *testing.B) {
	eachSize(b, func(b *testing.B, n int, body []byte, sig string) {
		req, _ := http.NewRequest("POST", "/webhook", nil)
		req.Header.Set("x-line-signature", sig)
		for b.Loop() {
			req.Body = io.NopCloser(bytes.NewReader(body))
			cb, err := webhook.ParseRequest(secret, req)
			if err != nil || len(cb.Events) != n {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseBody is the reading of a body alone (no signature, no
// envelopes): where the accept path's scanning time goes.
func BenchmarkParseBody(b *testing.B) {
	eachSize(b, func(b *testing.B, n int, body []byte, _ string) {
		for b.Loop() {
			got, err := parseBody(body, DefaultMaxEvents)
			if err != nil || len(got.events) != n {
				b.Fatal(err)
			}
		}
	})
}
