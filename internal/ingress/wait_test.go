package ingress

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	smithy "github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/eventbus"
)

// laterPutter is a PutEvents that finishes after Start has returned: its
// first call is throttled, so the entries only reach the bus on the retry,
// which the real eventbus.Publisher makes inside Wait. It records, for each
// call, whether the webhook had already answered when the call began (the
// publisher reads the entries' pooled bytes to build each call's input).
type laterPutter struct {
	mu        sync.Mutex
	answered  bool // set by the test when Handle returns
	calls     int
	late      int // calls begun after Handle returned
	succeeded int
	details   []string
}

func (p *laterPutter) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.answered {
		p.late++
	}
	if p.calls == 1 {
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
	}
	out := &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		p.details = append(p.details, aws.ToString(e.Detail))
		out.Entries[i].EventId = aws.String("6a7e8feb-b491-4cf7-a9f1-bf3703467718")
	}
	p.succeeded++
	return out, nil
}

// The webhook answers only once the bus has taken every event, and its
// publisher reads nothing of the request's memory after the answer: the
// bus here finishes later than Start (the first PutEvents is throttled and
// the retry runs inside Wait), so a handler that answered before Wait —
// and gave the request's pooled buffer to the next request — would answer
// before the one successful call, or have a call begin after it.
func TestWebhookAnswersOnlyAfterTheBusFinished(t *testing.T) {
	text := sample(t, "message-text-user.json")
	api := &laterPutter{}
	retried := make(chan struct{}, 1)
	pub := eventbus.NewPublisher(api, "linegate-test", eventbus.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		eventbus.WithDeadline(time.Minute), eventbus.WithBackoff(time.Millisecond, time.Millisecond),
		eventbus.WithSleep(func(context.Context, time.Duration) error {
			select {
			case retried <- struct{}{}:
			default:
			}
			return nil
		}))
	q := &fakeQueue{}
	h := newHandler(t, pub, WithChatQueue(q))

	resp, err := h.Handle(context.Background(), "POST", sign(text), text)
	api.mu.Lock()
	api.answered = true
	calls, late, succeeded, details := api.calls, api.late, api.succeeded, slices.Clone(api.details)
	api.mu.Unlock()

	if resp.Status != 200 || err != nil {
		t.Fatalf("status %d, err %v; want 200 once the retry went through", resp.Status, err)
	}
	if calls != 2 || succeeded != 1 || late != 0 {
		t.Fatalf("when the webhook answered: %d PutEvents call(s), %d accepted, %d begun after the answer; want 2, 1, 0 "+
			"(the handler answered before the bus finished)", calls, succeeded, late)
	}
	select {
	case <-retried:
	default:
		t.Fatal("the publisher never backed off: the first call was not retried, and the test proves nothing")
	}
	if len(details) != 1 || len(q.sent) != 1 {
		t.Fatalf("bus details %d, queue messages %d; want one of each", len(details), len(q.sent))
	}
	// What the bus got on the retry is the event's envelope, intact.
	ev, _, derr := envelope.Decode(q.sent[0].Body)
	if derr != nil || string(ev.Detail) != details[0] {
		t.Fatalf("the retried entry's Detail\n  %s\nis not the Detail of the queued envelope\n  %s (%v)", details[0], ev.Detail, derr)
	}
}
