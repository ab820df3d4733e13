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

// A handler whose push was held (MarkHeld) and that then succeeded ends
// with outcome held: acknowledged, completed, counted as RecordsHeld; one
// that fails after MarkHeld still fails. A redelivery is a duplicate.
func TestHeldOutcome(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		outcome Outcome
		failed  int
	}{
		{"held, then succeeded", nil, OutcomeHeld, 0},
		{"held, then failed", errors.New("later step failed"), OutcomeFailed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bot.NewRouter()
			r.OnText("", func(ctx context.Context, _ *bot.Event, _ string) error {
				if !MarkHeld(ctx) {
					t.Error("MarkHeld found no record in the handler's context")
				}
				return tt.err
			})
			m := &testmetrics.Recorder{}
			f := newFixture(t, r, WithMetrics(m))
			rec := message("m-held", 1, textEvent("01HELD", "x", time.Now(), ""))
			resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
			if len(resp.BatchItemFailures) != tt.failed || f.seen[0].Outcome != tt.outcome {
				t.Fatalf("failures %v outcome %q, want %d and %q", resp.BatchItemFailures, f.seen[0].Outcome, tt.failed, tt.outcome)
			}
			if tt.outcome == OutcomeHeld {
				if m.Total("RecordsHeld") != 1 {
					t.Errorf("RecordsHeld = %v", m.Total("RecordsHeld"))
				}
				_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
				if f.seen[1].Outcome != OutcomeDuplicate {
					t.Errorf("redelivered held record: %q, want duplicate", f.seen[1].Outcome)
				}
			}
		})
	}
	if MarkHeld(context.Background()) {
		t.Fatal("MarkHeld outside a record reported true")
	}
}

// An interceptor that handles an event keeps it from the router; one that
// declines lets the router run; its error fails the record.
func TestIntercept(t *testing.T) {
	tests := []struct {
		name       string
		handled    bool
		err        error
		routerRuns bool
		failed     int
	}{
		{"handled", true, nil, false, 0},
		{"declined", false, nil, true, 0},
		{"failed", true, errors.New("reply failed"), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			r := bot.NewRouter()
			r.OnText("", func(context.Context, *bot.Event, string) error { ran = true; return nil })
			f := newFixture(t, r, WithIntercept(func(context.Context, *bot.Event) (bool, error) { return tt.handled, tt.err }))
			resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-i", 1, textEvent("01INT", "x", time.Now(), ""))}})
			if ran != tt.routerRuns || len(resp.BatchItemFailures) != tt.failed {
				t.Fatalf("router ran %v, failures %d; want %v, %d", ran, len(resp.BatchItemFailures), tt.routerRuns, tt.failed)
			}
		})
	}
}
