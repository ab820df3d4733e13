package console

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/xraycollector"
)

// Step is one step of a webhook event's way through the pipeline, for the
// console's timeline: the webhook's acknowledgement, the hand-offs to the
// bus and the chat queue, each worker receive, the handler's run and the
// LINE calls it made, and a dead letter.
type Step struct {
	At time.Time `json:"at"`
	// Stage is "webhook", "bus", "queue", "receive", "handler", "line" or
	// "dead-letter".
	Stage      string  `json:"stage"`
	Title      string  `json:"title"`
	Detail     string  `json:"detail,omitempty"`
	Status     string  `json:"status"` // "ok", "error" or "pending"
	DurationMs float64 `json:"durationMs,omitempty"`
	TraceID    string  `json:"traceId,omitempty"`
	SegmentID  string  `json:"segmentId,omitempty"`
}

// Timeline lays out the steps of activity a from what the collector
// received: webhook is the trace of the webhook invocation that accepted
// the event ("" when unknown), traces every trace it can use by id. A
// receive whose trace has not arrived yet is still a step, from the
// worker's own report.
func Timeline(a Activity, webhook string, traces map[string]xraycollector.Trace) []Step {
	var steps []Step
	if tr, ok := traces[webhook]; ok {
		steps = append(steps, webhookSteps(tr)...)
	} else {
		steps = append(steps, Step{At: a.ReceivedAt, Stage: "webhook", Title: "Webhook received the event", Status: "ok", TraceID: webhook})
	}
	for _, r := range a.Receives {
		steps = append(steps, receiveSteps(a.WebhookEventID, r, traces[r.TraceID])...)
	}
	slices.SortStableFunc(steps, func(x, y Step) int { return x.At.Compare(y.At) })
	return steps
}

// epoch turns X-Ray's seconds since the epoch into a time.
func epoch(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func ms(s xraycollector.Segment) float64 {
	if s.End == 0 {
		return 0
	}
	return math.Round((s.End-s.Start)*1e6) / 1e3
}

func status(s xraycollector.Segment) string {
	switch {
	case s.InProgress:
		return "pending"
	case s.Fault || s.Error || s.HTTPStatus >= 400:
		return "error"
	}
	return "ok"
}

// webhookSteps: the invocation and its hand-offs (PutEvents to the bus,
// SendMessageBatch to the chat queue).
func webhookSteps(tr xraycollector.Trace) []Step {
	var out []Step
	for _, s := range tr.Segments {
		switch {
		case s.Type == "segment" && s.ParentID == "":
			title := "Webhook acknowledged"
			if s.HTTPStatus != 0 {
				title = fmt.Sprintf("Webhook answered %d", s.HTTPStatus)
			}
			out = append(out, Step{At: epoch(s.Start), Stage: "webhook", Title: title, Detail: s.Name, Status: status(s),
				DurationMs: ms(s), TraceID: tr.TraceID, SegmentID: s.ID})
		case s.Namespace == "aws" && s.Name == "EventBridge":
			out = append(out, Step{At: epoch(s.Start), Stage: "bus", Title: "EventBridge " + s.Operation, Detail: "onto the bus (archive, rules)",
				Status: status(s), DurationMs: ms(s), TraceID: tr.TraceID, SegmentID: s.ID})
		case s.Namespace == "aws" && s.Name == "SQS":
			out = append(out, Step{At: epoch(s.Start), Stage: "queue", Title: "SQS " + s.Operation, Detail: "into the chat queue, in the chat's message group",
				Status: status(s), DurationMs: ms(s), TraceID: tr.TraceID, SegmentID: s.ID})
		}
	}
	return out
}

// receiveSteps: one receive as the worker reported it, and from its trace
// the handler's record subsegment and the LINE calls under it.
func receiveSteps(id string, r Receive, tr xraycollector.Trace) []Step {
	st := "ok"
	switch r.Outcome {
	case "failed", "dead-lettered":
		st = "error"
	}
	detail := r.Outcome
	if r.Error != "" {
		detail += ": " + r.Error
	}
	if r.RetryInMs > 0 {
		detail += fmt.Sprintf("; next receive in %s", time.Duration(r.RetryInMs*float64(time.Millisecond)).Round(time.Millisecond))
	}
	began := r.At.Add(-time.Duration(r.DurationMs * float64(time.Millisecond)))
	where := r.Queue
	if where == "" {
		where = "its queue"
	}
	out := []Step{{At: began, Stage: "receive", Title: fmt.Sprintf("Received from %s (receive %d)", where, r.ReceiveCount),
		Detail: detail, Status: st, DurationMs: r.DurationMs, TraceID: r.TraceID}}
	if r.Outcome == "dead-lettered" {
		reason := r.DeadLetterReason
		if reason == "" {
			reason = "retries exhausted"
		}
		out = append(out, Step{At: r.At, Stage: "dead-letter", Title: "Dead-lettered", Detail: strings.ReplaceAll(reason, "-", " "), Status: "error", TraceID: r.TraceID})
	}
	var record xraycollector.Segment
	for _, s := range tr.Segments {
		if s.Name == "record" && s.Annotations["webhookEventId"] == id {
			record = s
		}
	}
	if record.ID == "" {
		return out
	}
	title := "Handler ran"
	if record.Fault || record.Error {
		title = "Handler failed"
		if len(record.Exceptions) > 0 {
			title += ": " + record.Exceptions[0]
		}
	}
	if epoch(record.Start).Before(out[0].At) {
		out[0].At = epoch(record.Start) // the receive is reported from its end: it began no later than its handler
	}
	out = append(out, Step{At: epoch(record.Start), Stage: "handler", Title: title, Status: status(record), DurationMs: ms(record),
		TraceID: tr.TraceID, SegmentID: record.ID})
	under := descendants(tr, record.ID)
	for _, s := range tr.Segments {
		if !under[s.ID] || s.Namespace != "remote" {
			continue
		}
		call := strings.TrimSpace(s.Method + " " + s.Path)
		if call == "" {
			call = s.Name
		}
		title := "LINE " + call
		if s.HTTPStatus != 0 {
			title += fmt.Sprintf(" → %d", s.HTTPStatus)
		}
		out = append(out, Step{At: epoch(s.Start), Stage: "line", Title: title, Detail: lineCall(s.Path), Status: status(s), DurationMs: ms(s),
			TraceID: tr.TraceID, SegmentID: s.ID})
	}
	return out
}

// descendants are the ids of every (sub)segment under root in tr.
func descendants(tr xraycollector.Trace, root string) map[string]bool {
	under := map[string]bool{}
	for grew := true; grew; {
		grew = false
		for _, s := range tr.Segments {
			if !under[s.ID] && (s.ParentID == root || under[s.ParentID]) {
				under[s.ID] = true
				grew = true
			}
		}
	}
	return under
}

// lineCall names a Messaging API path the way a bot author thinks of it.
func lineCall(path string) string {
	switch {
	case strings.HasSuffix(path, "/message/reply"):
		return "reply (free, with the event's reply token)"
	case strings.HasSuffix(path, "/message/push"):
		return "push (counts against the month's quota; X-Line-Retry-Key)"
	case strings.HasSuffix(path, "/chat/loading/start"):
		return "loading animation"
	case strings.HasPrefix(path, "/oauth2/"):
		return "channel access token"
	}
	return ""
}
