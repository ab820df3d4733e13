package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

// runOne handles one text record with router and returns its result.
func runOne(t *testing.T, f *fixture, id string) (Result, events.SQSEventResponse) {
	t.Helper()
	rec := message("m-"+id, 1, textEvent(id, "x", time.Now(), ""))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	return f.seen[len(f.seen)-1], resp
}

// heldRouter marks its record held, then returns err.
func heldRouter(t *testing.T, err error) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, _ *bot.Event, _ string) error {
		if !MarkHeld(ctx) {
			t.Error("MarkHeld found no record in the handler's context")
		}
		return err
	})
	return r
}

// A handler whose push was held (MarkHeld) and that then succeeded ends
// with outcome held: acknowledged, completed, counted as RecordsHeld; a
// redelivery is a duplicate. One that fails after MarkHeld still fails.
func TestHeldOutcome(t *testing.T) {
	m := &testmetrics.Recorder{}
	f := newFixture(t, heldRouter(t, nil), WithMetrics(m))
	res, resp := runOne(t, f, "01HELD")
	if res.Outcome != OutcomeHeld || len(resp.BatchItemFailures) != 0 || m.Total("RecordsHeld") != 1 {
		t.Fatalf("outcome %q, failures %v, RecordsHeld %v; want held, none, 1", res.Outcome, resp.BatchItemFailures, m.Total("RecordsHeld"))
	}
	if res, _ := runOne(t, f, "01HELD"); res.Outcome != OutcomeDuplicate {
		t.Errorf("redelivered held record: %q, want duplicate", res.Outcome)
	}

	f = newFixture(t, heldRouter(t, errors.New("a later step failed")))
	if res, resp := runOne(t, f, "01HELDFAIL"); res.Outcome != OutcomeFailed || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("held then failed: %q %v, want failed", res.Outcome, resp.BatchItemFailures)
	}
	if MarkHeld(context.Background()) {
		t.Fatal("MarkHeld outside a record reported true")
	}
}

// An interceptor that handles an event keeps it from the router; one that
// declines lets the router run; its error fails the record.
func TestIntercept(t *testing.T) {
	check := func(name string, handled bool, err error, wantRouter bool, wantFailed int) {
		t.Run(name, func(t *testing.T) {
			ran := false
			r := bot.NewRouter()
			r.OnText("", func(context.Context, *bot.Event, string) error { ran = true; return nil })
			f := newFixture(t, r, WithIntercept(func(context.Context, *bot.Event) (bool, error) { return handled, err }))
			if _, resp := runOne(t, f, "01INT"); ran != wantRouter || len(resp.BatchItemFailures) != wantFailed {
				t.Fatalf("router ran %v, failures %d; want %v, %d", ran, len(resp.BatchItemFailures), wantRouter, wantFailed)
			}
		})
	}
	check("handled", true, nil, false, 0)
	check("declined", false, nil, true, 0)
	check("failed", true, errors.New("reply failed"), false, 1)
}
