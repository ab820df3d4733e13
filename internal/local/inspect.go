package local

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/envelope"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/telemetry"
	"github.com/linegate/linegate/pkg/worker"
)

// EventOutcome is one webhook event that reached a worker, as
// /_local/events reports it.
type EventOutcome = eventView

// eventView is one webhook event that reached a worker, for /_local/events.
type eventView struct {
	WebhookEventID string `json:"webhookEventId"`
	Type           string `json:"type"`
	ReceiveCount   int    `json:"receiveCount"`
	Outcome        string `json:"outcome"`
	Error          string `json:"error,omitempty"`
	first          int
	ran            []time.Time // when each receive that ran it ended
}

// Outcome values of /_local/events beyond the worker's own.
const outcomeDeadLettered = "dead-lettered"

// eventLog keeps the latest outcome of every event by webhookEventId.
type eventLog struct {
	mu     sync.Mutex
	events map[string]*eventView
	seq    int
}

func newEventLog() *eventLog { return &eventLog{events: map[string]*eventView{}} }

func (l *eventLog) observe(res worker.Result) {
	id := res.WebhookEventID
	if id == "" {
		id = res.MessageID
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.viewLocked(id)
	if res.Type != "" {
		v.Type = res.Type
	}
	v.ReceiveCount = max(v.ReceiveCount, res.ReceiveCount)
	if res.Outcome != worker.OutcomeDeferred {
		v.ran = append(v.ran, time.Now())
	}
	// A duplicate of an event already handled does not hide that it was.
	if res.Outcome == worker.OutcomeDuplicate && v.Outcome == string(worker.OutcomeOK) {
		return
	}
	if v.Outcome == outcomeDeadLettered {
		return
	}
	v.Outcome = string(res.Outcome)
	v.Error = ""
	if res.Err != nil {
		v.Error = res.Err.Error()
	}
}

func (l *eventLog) deadLettered(id string, receives int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.viewLocked(id)
	v.ReceiveCount = max(v.ReceiveCount, receives)
	v.Outcome = outcomeDeadLettered
}

// viewLocked returns the event's entry, creating it in arrival order.
func (l *eventLog) viewLocked(id string) *eventView {
	v, ok := l.events[id]
	if !ok {
		l.seq++
		v = &eventView{WebhookEventID: id, first: l.seq}
		l.events[id] = v
	}
	return v
}

// redriven forgets the dead-letter mark of events moved back to work.
func (l *eventLog) redriven() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.events {
		if v.Outcome == outcomeDeadLettered {
			v.Outcome = string(worker.OutcomeFailed)
		}
	}
}

// attempts returns when each run of the event ended (tests).
func (l *eventLog) attempts(id string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.events[id]; ok {
		return append([]time.Time(nil), v.ran...)
	}
	return nil
}

func (l *eventLog) list() []eventView {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]eventView, 0, len(l.events))
	for _, v := range l.events {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
	return out
}

// counters feed the Lambda Errors and API Gateway 5XXError alarms.
type counters struct {
	mu  sync.Mutex
	cur counterSnapshot
}

type counterSnapshot struct {
	invoked  map[string]int
	errors   map[string]int
	apiCalls int
	api5xx   int
}

func newCounters() *counters { return &counters{cur: emptySnapshot()} }

func emptySnapshot() counterSnapshot {
	return counterSnapshot{invoked: map[string]int{}, errors: map[string]int{}}
}

func (c *counters) invoked(fn string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.invoked[fn]++
	if err != nil {
		c.cur.errors[fn]++
	}
}

func (c *counters) api(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.apiCalls++
	if status >= 500 {
		c.cur.api5xx++
	}
}

// take returns the counts since the last take (one alarm period).
func (c *counters) take() counterSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur
	c.cur = emptySnapshot()
	return s
}

// printer writes the human-readable console of `linegate local`: what
// happened, never message text or tokens.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (p *printer) webhook(status, events int, d time.Duration) {
	p.line("webhook   %d  %d event(s) acknowledged in %s", status, events, d.Round(10*time.Microsecond))
}

// record prints one record's outcome, with its chat's lane (the hashed
// message group: each chat is one lane, handled one event at a time) or
// "long" for the long-work queue.
func (p *printer) record(res worker.Result) {
	why := ""
	switch {
	case res.Outcome == worker.OutcomeDeadLettered:
		why = ": dead-lettered by the worker (" + res.DeadLetterReason + ")"
	case res.Outcome == worker.OutcomeDeferred:
		why = ": an earlier event of its chat failed; it follows that one"
	case res.Outcome == worker.OutcomeForwarded:
		why = ": long work, handed to the long-work queue"
	case res.Outcome != worker.OutcomeFailed:
	case res.Panicked:
		why = ": handler panicked, crash report sent on the first receive"
	case errors.Is(res.Err, idempotency.ErrInProgress):
		why = ": still in progress in another invocation; retried after the visibility timeout"
	case errors.Is(res.Err, context.DeadlineExceeded):
		why = ": handler ran out of time"
	case errors.Is(res.Err, envelope.ErrMalformed) || errors.Is(res.Err, bot.ErrEvent):
		why = ": malformed record, will end in the DLQ"
	default:
		why = ": handler returned an error"
	}
	if res.RetryIn > 0 {
		why += fmt.Sprintf(", next receive in %s", res.RetryIn)
	}
	lane := "-"
	switch {
	case res.Long:
		lane = "long"
	case res.Group != "":
		lane = telemetry.HashUserID(res.Group)
	}
	p.line("worker    %-14s %-9s %s  %s (receive %d)%s", "lane "+lane, res.Type, cmp.Or(res.WebhookEventID, res.MessageID), res.Outcome, res.ReceiveCount, why)
}

func (p *printer) deadLettered(id, dlq string) {
	p.line("sqs       %s failed its last receive: moving to %s", id, dlq)
}

func (p *printer) alarm(name, from, to string) {
	p.line("alarm     %s  %s → %s", name, from, to)
}

func (p *printer) notified(records int, operators []string, err error) {
	if err != nil {
		p.line("notifier  %d alert(s): push failed: %v", records, err)
		return
	}
	p.line("notifier  %d alert(s) pushed to %s", records, strings.Join(operators, ", "))
}

// queueView is one queue for /_local/queues.
type queueView struct {
	Name       string `json:"name"`
	Visible    int    `json:"visible"`
	InFlight   int    `json:"inFlight"`
	DeadLetter bool   `json:"deadLetter"`
	OldestAgeS int    `json:"oldestAgeSeconds"`
}

func (r *Runtime) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_local/events", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.events.list()) })
	mux.HandleFunc("GET /_local/alarms", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.alarms.views()) })
	mux.HandleFunc("GET /_local/queues", func(w http.ResponseWriter, req *http.Request) {
		out := []queueView{}
		for _, q := range r.sortedQueues() {
			st, err := r.back.stats(req.Context(), r.res.queueURL[q.LogicalID])
			if err != nil {
				writeJSON(w, 502, map[string]string{"error": err.Error()})
				return
			}
			out = append(out, queueView{Name: q.Name, Visible: st.Visible, InFlight: st.InFlight, DeadLetter: r.isDLQ(q), OldestAgeS: int(st.OldestAge.Seconds())})
		}
		writeJSON(w, 200, out)
	})
	mux.Handle("GET /_local/traces", r.collector.Handler())
	if r.line != nil {
		mux.Handle("GET /_local/line/messages", r.line.MessagesHandler())
		mux.Handle("/v2/bot/", r.line)
	} else {
		mux.HandleFunc("GET /_local/line/messages", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, []any{}) })
	}
	mux.Handle("POST /{$}", r.sqsShim(r.ports.queues))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// eventHead reads the fields of a raw LINE event the runtime reports.
func eventHead(raw json.RawMessage) struct{ Type, WebhookEventID string } {
	var h struct {
		Type           string `json:"type"`
		WebhookEventID string `json:"webhookEventId"`
	}
	_ = json.Unmarshal(raw, &h)
	return struct{ Type, WebhookEventID string }{h.Type, h.WebhookEventID}
}
