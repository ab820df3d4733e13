package bench

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvariant is wrapped by every error that reports a violated invariant:
// callers (the CLI's exit status) branch on it.
var ErrInvariant = errors.New("bench: invariant violated")

// maxListed bounds how many events one violation line names.
const maxListed = 20

// EventAccount is what happened to one event of a linegate run.
type EventAccount struct {
	// Index is the event's number in the run ("<kind>:<index>").
	Index int `json:"index"`
	// WebhookEventID is the id LINE gave it ("" if never built).
	WebhookEventID string `json:"webhookEventId,omitempty"`
	// Poison marks an event whose handler always fails.
	Poison bool `json:"poison,omitempty"`
	// Effects is how many answers the LINE API recorded for it.
	Effects int `json:"effects"`
	// DeadLettered reports that linegate moved it to a DLQ.
	DeadLettered bool `json:"deadLettered,omitempty"`
}

// Accounting is the evidence the invariants are checked against after a
// linegate run.
type Accounting struct {
	Events []EventAccount `json:"events"`
	// DLQVisible is the number of messages in the work queues' DLQs.
	DLQVisible int `json:"dlqVisible"`
	// AlarmsFired are the DLQ alarms seen in ALARM during the run.
	AlarmsFired []string `json:"alarmsFired"`
	// OperatorNotified lists the fired alarms the operator got a LINE push
	// about.
	OperatorNotified []string `json:"operatorNotified"`
	// Injected is the chaos that was actually served, so a report shows the
	// faults happened.
	Injected Injected `json:"injected"`
}

// Injected counts the faults a chaos run served.
type Injected struct {
	// PutEventsFailures is PutEvents entries failed with InternalFailure.
	PutEventsFailures int `json:"putEventsFailures"`
	// FlakyEvents is events whose handler failed its first attempt.
	FlakyEvents int `json:"flakyEvents"`
	// WebhookFailures is events whose first delivery the webhook answered
	// with 500 (the bus refused it for every retry), so LINE redelivered.
	WebhookFailures int `json:"webhookFailures"`
	// Line429 and Line500 are LINE API reply/push calls answered so.
	Line429 int `json:"line429"`
	Line500 int `json:"line500"`
}

// Summary counts an Accounting for the report.
type Summary struct {
	Events       int      `json:"events"`
	Poison       int      `json:"poison"`
	ExactlyOnce  int      `json:"exactlyOnce"`
	Duplicates   int      `json:"duplicates"`
	Lost         int      `json:"lost"`
	DeadLettered int      `json:"deadLettered"`
	DLQVisible   int      `json:"dlqVisible"`
	AlarmsFired  []string `json:"alarmsFired"`
	Notified     []string `json:"operatorNotified"`
	Injected     Injected `json:"injected"`
}

// Summarize counts the accounting's events by what happened to them.
func (a Accounting) Summarize() Summary {
	s := Summary{Events: len(a.Events), DLQVisible: a.DLQVisible, AlarmsFired: a.AlarmsFired, Notified: a.OperatorNotified, Injected: a.Injected}
	for _, e := range a.Events {
		switch {
		case e.Poison:
			s.Poison++
			if e.DeadLettered {
				s.DeadLettered++
			}
		case e.Effects == 1:
			s.ExactlyOnce++
		case e.Effects == 0:
			s.Lost++
		default:
			s.Duplicates++
		}
	}
	return s
}

// Check verifies linegate's promises: every non-poison event had its effect
// exactly once (none lost, none duplicated); every poison event had no
// effect and is dead-lettered; the DLQs hold exactly the poison events; when
// there was poison, a DLQ alarm fired and the operator was told about it.
// The error wraps ErrInvariant and names every violation, with the events
// concerned.
func (a Accounting) Check() error {
	v := a.Violations()
	if len(v) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvariant, strings.Join(v, "; "))
}

// Violations lists what Check reports, one line per broken invariant (nil
// when all hold).
func (a Accounting) Violations() []string {
	var lost, dup, poisonDone, notDL []string
	poison := 0
	for _, e := range a.Events {
		id := describe(e)
		if e.Poison {
			poison++
			if e.Effects > 0 {
				poisonDone = append(poisonDone, id)
			}
			if !e.DeadLettered {
				notDL = append(notDL, id)
			}
			continue
		}
		switch {
		case e.Effects == 0:
			lost = append(lost, id)
		case e.Effects > 1:
			dup = append(dup, fmt.Sprintf("%s ×%d", id, e.Effects))
		}
	}
	var v []string
	add := func(what string, events []string) {
		if len(events) > 0 {
			v = append(v, fmt.Sprintf("%d %s: %s", len(events), what, list(events)))
		}
	}
	add("event(s) lost (no effect)", lost)
	add("event(s) with a duplicate effect", dup)
	add("poison event(s) had an effect", poisonDone)
	add("poison event(s) not dead-lettered", notDL)
	if a.DLQVisible != poison {
		v = append(v, fmt.Sprintf("the DLQs hold %d message(s), want %d (the poison events)", a.DLQVisible, poison))
	}
	if poison > 0 {
		if len(a.AlarmsFired) == 0 {
			v = append(v, "no DLQ alarm went to ALARM")
		}
		if len(a.OperatorNotified) == 0 {
			v = append(v, "the operator got no LINE push about a DLQ alarm")
		}
	}
	return v
}

func describe(e EventAccount) string {
	if e.WebhookEventID == "" {
		return fmt.Sprintf("#%d", e.Index)
	}
	return fmt.Sprintf("#%d (%s)", e.Index, e.WebhookEventID)
}

func list(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxListed], ", ") + fmt.Sprintf(", … and %d more", len(items)-maxListed)
}
