package local

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/linegate/linegate/internal/worker"
)

// The event log's rules, step by step: one entry per webhookEventId from the
// bus's acceptance on; ok is final (a duplicate or a failed receive after it
// never replaces it); dead-lettered until a redrive of its own DLQ.
func TestEventLogRules(t *testing.T) {
	type step func(l *eventLog)
	accepted := func(l *eventLog) { l.accepted("E1", "message", "1-trace") }
	result := func(o worker.Outcome) step {
		return func(l *eventLog) {
			var err error
			if o == worker.OutcomeFailed {
				err = errors.New("boom")
			}
			l.observe(worker.Result{WebhookEventID: "E1", Type: "message", Outcome: o, Err: err, TraceID: "1-record"})
		}
	}
	deadLettered := func(l *eventLog) { l.deadLettered("E1", "dlq-a") }
	redrive := func(dlq string) step { return func(l *eventLog) { l.redriven(dlq) } }
	tests := []struct {
		name  string
		steps []step
		want  eventView
	}{
		{"accepted only", []step{accepted},
			eventView{Outcome: "queued", Deliveries: 1, TraceID: "1-trace"}},
		{"handled", []step{accepted, result(worker.OutcomeOK)},
			eventView{Outcome: "ok", Deliveries: 1, ReceiveCount: 1, TraceID: "1-trace", RecordTraceID: "1-record"}},
		{"a duplicate after ok keeps ok", []step{accepted, result(worker.OutcomeOK), accepted, result(worker.OutcomeDuplicate)},
			eventView{Outcome: "ok", Deliveries: 2, ReceiveCount: 2, Duplicates: 1, TraceID: "1-trace", RecordTraceID: "1-record"}},
		{"a duplicate seen before the ok it duplicates", []step{accepted, result(worker.OutcomeDuplicate), result(worker.OutcomeOK)},
			eventView{Outcome: "ok", Deliveries: 1, ReceiveCount: 2, Duplicates: 1, TraceID: "1-trace", RecordTraceID: "1-record"}},
		{"a failure after ok keeps ok", []step{accepted, result(worker.OutcomeOK), result(worker.OutcomeFailed)},
			eventView{Outcome: "ok", Deliveries: 1, ReceiveCount: 2, TraceID: "1-trace", RecordTraceID: "1-record"}},
		{"failed then ok", []step{accepted, result(worker.OutcomeFailed), result(worker.OutcomeOK)},
			eventView{Outcome: "ok", Deliveries: 1, ReceiveCount: 2, TraceID: "1-trace", RecordTraceID: "1-record"}},
		{"failed", []step{accepted, result(worker.OutcomeFailed)},
			eventView{Outcome: "failed", Deliveries: 1, ReceiveCount: 1, TraceID: "1-trace", RecordTraceID: "1-record", Error: "boom"}},
		{"dead-lettered", []step{accepted, result(worker.OutcomeFailed), deadLettered},
			eventView{Outcome: "dead-lettered", Deliveries: 1, ReceiveCount: 1, TraceID: "1-trace", RecordTraceID: "1-record", Error: "boom", DeadLetterQueue: "dlq-a"}},
		{"a redrive of another DLQ leaves it", []step{accepted, result(worker.OutcomeFailed), deadLettered, redrive("dlq-b")},
			eventView{Outcome: "dead-lettered", Deliveries: 1, ReceiveCount: 1, TraceID: "1-trace", RecordTraceID: "1-record", Error: "boom", DeadLetterQueue: "dlq-a"}},
		{"redriven, queued again", []step{accepted, result(worker.OutcomeFailed), deadLettered, redrive("dlq-a")},
			eventView{Outcome: "queued", Deliveries: 1, ReceiveCount: 1, TraceID: "1-trace", RecordTraceID: "1-record", Error: "boom"}},
		{"a duplicate never seen handled here", []step{result(worker.OutcomeDuplicate)},
			eventView{Outcome: "duplicate", ReceiveCount: 1, Duplicates: 1, RecordTraceID: "1-record"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newEventLog(0)
			for _, s := range tt.steps {
				s(l)
			}
			got := l.list()
			for i := range got {
				got[i].ran = nil // when receives ended: asserted in the conversation tests
			}
			tt.want.WebhookEventID, tt.want.Type = "E1", "message"
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Fatalf("entries %+v\nwant [%+v]", got, tt.want)
			}
		})
	}
}

// The log keeps the newest first-seen events, at most its size, and an
// update of a kept event does not make it newer.
func TestEventLogIsBounded(t *testing.T) {
	l := newEventLog(3)
	for i := range 5 {
		l.accepted(fmt.Sprintf("E%d", i), "message", "")
	}
	l.observe(worker.Result{WebhookEventID: "E2", Outcome: worker.OutcomeOK})
	l.accepted("E5", "message", "")
	got := l.list()
	if len(got) != 3 || got[0].WebhookEventID != "E3" || got[1].WebhookEventID != "E4" || got[2].WebhookEventID != "E5" {
		t.Fatalf("kept %+v, want E3, E4, E5", got)
	}
}
