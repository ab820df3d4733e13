package ingress

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/eventbus"
)

// BenchmarkAcceptSenders is the accept path with the production senders:
// Handle over the real eventbus.Publisher and chatqueue.Sender, whose SDK
// clients answer in memory (putter, okQueue: every entry accepted, no
// network). Beside BenchmarkAccept, whose senders are stubs, it shows what
// a production request costs in the webhook's process, the senders' own
// work (their SDK inputs, their goroutines, their metrics) included: the
// figure the hand-off's design changes. It uses only what every version of
// the accept path has, so it runs unchanged on an older checkout (README
// "Benchmarks").
func BenchmarkAcceptSenders(b *testing.B) {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := eventbus.NewPublisher(&putter{}, "linegate-bench", eventbus.WithLogger(discard))
	q := chatqueue.New(okQueue{}, "https://sqs.ap-northeast-1.amazonaws.com/123456789012/chats.fifo", chatqueue.Config{Log: discard})
	eachSize(b, func(b *testing.B, _ int, body []byte, sig string) {
		h := newHandler(b, pub, WithChatQueue(q))
		ctx := context.Background()
		for b.Loop() {
			resp, err := h.Handle(ctx, "POST", sig, readBody(body))
			if resp.Status != 200 {
				b.Fatal(resp.Status, err)
			}
		}
	})
}

// putter is EventBridge's PutEvents for a real eventbus.Publisher, which
// calls it on goroutines of its own, as in production: every entry is
// accepted once wait (when set) returns nil; check (when set) sees every
// entry's Detail first.
type putter struct {
	wait  func(ctx context.Context) error
	check func(detail string)
}

func (p *putter) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if p.wait != nil {
		if err := p.wait(ctx); err != nil {
			return nil, err
		}
	}
	out := &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		if p.check != nil {
			p.check(aws.ToString(e.Detail))
		}
		out.Entries[i].EventId = aws.String("6a7e8feb-b491-4cf7-a9f1-bf3703467718")
	}
	return out, nil
}

// busOver is a real eventbus.Publisher over api.
func busOver(api *putter) *eventbus.Publisher {
	return eventbus.NewPublisher(api, "linegate-test", eventbus.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
}

// okQueue is a SendMessageBatch that accepts every message, in memory.
type okQueue struct{}

func (okQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{Successful: make([]sqstypes.SendMessageBatchResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		out.Successful[i] = sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("5fea7756-0ea4-451a-a703-a558b933e274"),
			MD5OfMessageBody: aws.String("d41d8cd98f00b204e9800998ecf8427e"), SequenceNumber: aws.String("18849496460467696128")}
	}
	return out, nil
}
