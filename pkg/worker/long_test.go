package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

// longRouterFor: "draw" is long and replies after waiting for release (or at
// once when release is nil); anything else echoes.
func longRouterFor(ran *atomic.Int32, release chan struct{}) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, "echo") })
	r.OnText("draw", func(ctx context.Context, e *bot.Event, _ string) error {
		ran.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return e.ReplyText(ctx, "drawn")
	}, bot.Long())
	return r
}

// On the chat queue a long route is not run: the loading animation shows,
// the record's body goes unchanged to the long-work queue, and the record
// completes at once. On the long-work queue the handler runs, claimed under
// its own key, so the hand-off's completion does not make it a duplicate.
func TestLongWorkIsHandedOffThenRun(t *testing.T) {
	var ran atomic.Int32
	q := newFakeSQS(5)
	m := &testmetrics.Recorder{}
	f := newFixture(t, longRouterFor(&ran, nil), WithQueues(q), WithLongQueue(longQueueURL), WithMetrics(m))
	msg := chatMessage("d1", "Ualice", 1, "draw a cat")
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg, chatMessage("e1", "Ualice", 1, "hi")}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 0 {
		t.Fatalf("failures %v, long handler ran %d times on the chat queue", failedIDs(resp), ran.Load())
	}
	sent := q.sends()
	if len(sent) != 1 || aws.ToString(sent[0].QueueUrl) != longQueueURL || aws.ToString(sent[0].MessageBody) != msg.Body ||
		sent[0].MessageGroupId != nil || aws.ToString(sent[0].MessageSystemAttributes["AWSTraceHeader"].StringValue) == "" {
		t.Fatalf("hand-off %+v", sent)
	}
	if len(f.line.Loading()) != 1 {
		t.Fatalf("loading animations %v, want one for the hand-off", f.line.Loading())
	}
	if f.seen[0].Outcome != OutcomeForwarded || m.Total("RecordsForwarded") != 1 {
		t.Fatalf("result %+v, metrics %v", f.seen[0], m.Counts())
	}
	// The chat's next message was answered in the same batch, long work or not.
	if len(f.line.Messages()) != 1 {
		t.Fatalf("messages %v, want only the echo", f.line.Messages())
	}

	long := msg
	long.EventSourceARN, long.ReceiptHandle = longQueueARN, "rh-long"
	delete(long.Attributes, "MessageGroupId")
	resp, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 1 {
		t.Fatalf("failures %v, ran %d on the long-work queue", failedIDs(resp), ran.Load())
	}
	if last := f.seen[len(f.seen)-1]; last.Outcome != OutcomeOK || !last.Long {
		t.Fatalf("long run result %+v", last)
	}
	if len(q.sends()) != 1 {
		t.Fatal("the long-work queue's record was handed off again")
	}
	// A redelivery of the long-work record is a duplicate.
	_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
	if ran.Load() != 1 {
		t.Fatal("a redelivered long-work record ran twice")
	}
}

// Without a long-work queue (or an SQS client) a long route runs where it is
// received.
func TestLongWorkWithoutLongQueueRunsInPlace(t *testing.T) {
	var ran atomic.Int32
	f := newFixture(t, longRouterFor(&ran, nil), WithQueues(newFakeSQS(5)))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{chatMessage("d1", "Ualice", 1, "draw")}})
	if len(resp.BatchItemFailures) != 0 || ran.Load() != 1 {
		t.Fatalf("failures %v, ran %d", failedIDs(resp), ran.Load())
	}
}

// Long work past the loading animation's minute shows it again every
// refresh, and stops once the handler has answered.
func TestLongWorkRefreshesLoading(t *testing.T) {
	var ran atomic.Int32
	release := make(chan struct{})
	f := newFixture(t, longRouterFor(&ran, release), WithQueues(newFakeSQS(5)), WithLongQueue(longQueueURL),
		WithLoadingRefresh(20*time.Millisecond))
	long := chatMessage("d1", "Ualice", 1, "draw")
	long.EventSourceARN = longQueueARN
	done := make(chan struct{})
	go func() {
		_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{long}})
		close(done)
	}()
	deadline := time.After(5 * time.Second)
	for len(f.line.Loading()) < 3 {
		select {
		case <-deadline:
			t.Fatalf("loading shown %d times in 5 s, want it refreshed every 20 ms", len(f.line.Loading()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(release)
	<-done
	n := len(f.line.Loading())
	time.Sleep(100 * time.Millisecond)
	if got := len(f.line.Loading()); got != n {
		t.Fatalf("loading shown %d more times after the handler answered", got-n)
	}
	if len(f.line.Messages()) != 1 {
		t.Fatalf("messages %v, want the answer", f.line.Messages())
	}
}
