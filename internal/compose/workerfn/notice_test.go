package workerfn

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testsns"
)

// The operator is told once a month however many results are held, by
// however many workers; a new month tells again.
func TestHeldNoticeOncePerMonth(t *testing.T) {
	tp := &testsns.Topic{}
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
	if len(tp.Published()) != 1 {
		t.Fatalf("%d notices for 5 held results, want 1", len(tp.Published()))
	}
	kind := tp.Published()[0].MessageAttributes[held.AttributeKind]
	if aws.ToString(kind.StringValue) != held.KindHeld || !strings.Contains(aws.ToString(tp.Published()[0].Message), "resend-held") {
		t.Fatalf("notice %+v", tp.Published()[0])
	}
	n.tell(context.Background(), held.Item{HeldAt: dec.AddDate(0, 1, 0)})
	if len(tp.Published()) != 2 {
		t.Fatalf("%d notices after a new month, want 2", len(tp.Published()))
	}
}
