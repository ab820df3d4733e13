package workerfn

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/linegate/linegate/pkg/held"
	"github.com/linegate/linegate/pkg/idempotency"
)

type recordingTopic struct {
	mu   sync.Mutex
	msgs []*sns.PublishInput
}

func (tp *recordingTopic) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.msgs = append(tp.msgs, in)
	return &sns.PublishOutput{}, nil
}

// The operator is told once a month however many results are held, by
// however many workers; a new month tells again.
func TestHeldNoticeOncePerMonth(t *testing.T) {
	tp := &recordingTopic{}
	n := heldNotice{pub: tp, topic: "arn:aws:sns:us-east-1:1:ops", once: idempotency.NewMemory(), log: slog.New(slog.DiscardHandler)}
	dec := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.tell(context.Background(), held.Item{HeldAt: dec.Add(time.Duration(i) * time.Hour)})
		}()
	}
	wg.Wait()
	if len(tp.msgs) != 1 {
		t.Fatalf("%d notices for 5 held results, want 1", len(tp.msgs))
	}
	kind := tp.msgs[0].MessageAttributes[held.AttributeKind]
	if aws.ToString(kind.StringValue) != held.KindHeld || !strings.Contains(aws.ToString(tp.msgs[0].Message), "resend-held") {
		t.Fatalf("notice %+v", tp.msgs[0])
	}
	n.tell(context.Background(), held.Item{HeldAt: dec.AddDate(0, 1, 0)})
	if len(tp.msgs) != 2 {
		t.Fatalf("%d notices after a new month, want 2", len(tp.msgs))
	}
}
