package local

import (
	"sync"
	"time"

	"github.com/linegate/linegate/internal/ring"
	"github.com/linegate/linegate/internal/worker"
)

// DefaultEventLogSize is how many events /_local/events keeps: the most
// recently first-seen ones. Older entries are forgotten, so a dev server left
// running all day holds a bounded log.
const DefaultEventLogSize = 10_000

// Outcomes /_local/events reports besides the worker's own (ok, failed,
// duplicate).
const (
	// outcomeQueued: the bus accepted the event and no worker has finished
	// a receive of it yet (also: redriven out of a DLQ, waiting again).
	outcomeQueued = "queued"
	// outcomeDeadLettered: it failed its last allowed receive and is (or is
	// about to be) in a dead-letter queue.
	outcomeDeadLettered = "dead-lettered"
)

// EventOutcome is one webhook event, as /_local/events reports it.
type EventOutcome = eventView

// eventView is one webhook event in /_local/events: exactly one entry per
// webhookEventId, from the moment the bus accepted it.
type eventView struct {
	WebhookEventID string `json:"webhookEventId"`
	Type           string `json:"type"`
	// Outcome is the event's final state so far: queued, ok, failed,
	// duplicate (every receive found it already handled) or dead-lettered.
	// ok is final: a later duplicate or failed receive never replaces it.
	Outcome string `json:"outcome"`
	// Deliveries counts the webhook requests that carried it and reached
	// the bus (a LINE redelivery adds one).
	Deliveries int `json:"deliveries"`
	// ReceiveCount counts every time a worker received it, duplicates and
	// retries included.
	ReceiveCount int `json:"receiveCount"`
	// Duplicates counts the receives skipped because it had already been
	// handled.
	Duplicates int `json:"duplicates"`
	// TraceID is the X-Ray trace of the webhook invocation that first
	// accepted it; RecordTraceID the worker trace of its latest receive
	// (linked to TraceID). Both open in /_local/traces?traceId=….
	TraceID       string `json:"traceId,omitempty"`
	RecordTraceID string `json:"recordTraceId,omitempty"`
	// DeadLetterQueue names the DLQ it went to, while it is there.
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
	Error           string `json:"error,omitempty"`
	// ran is when each receive that ran it (not deferred behind its chat)
	// ended: the spacing of a transient failure's retries.
	ran []time.Time
}

// eventStore keeps the event log's entries. The in-memory ring is the only
// one today; a persistent store (`--state`) implements the same calls, and
// the event log's rules stay in eventLog.
type eventStore interface {
	// get returns the entry of id.
	get(id string) (eventView, bool)
	// put inserts or replaces v's entry; inserting may forget the oldest.
	put(v eventView)
	// list returns every entry, oldest first-seen first.
	list() []eventView
}

// ringStore keeps the newest first-seen entries, at most a ring's capacity.
type ringStore struct {
	byID  map[string]eventView
	order *ring.Buffer[string]
}

func newRingStore(size int) *ringStore {
	if size <= 0 {
		size = DefaultEventLogSize
	}
	return &ringStore{byID: map[string]eventView{}, order: ring.New[string](size)}
}

func (s *ringStore) get(id string) (eventView, bool) { v, ok := s.byID[id]; return v, ok }

func (s *ringStore) put(v eventView) { s.insert(v) }

// insert is put, reporting whether v's entry is new and which one it
// pushed out of the ring.
func (s *ringStore) insert(v eventView) (added bool, evicted string, ok bool) {
	if _, known := s.byID[v.WebhookEventID]; !known {
		added = true
		if evicted, ok = s.order.Push(v.WebhookEventID); ok {
			delete(s.byID, evicted)
		}
	}
	s.byID[v.WebhookEventID] = v
	return added, evicted, ok
}

func (s *ringStore) list() []eventView {
	ids := s.order.All()
	out := make([]eventView, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.byID[id])
	}
	return out
}

// eventLog is the bookkeeping behind /_local/events: what the bus accepted,
// what every worker receive did, and what was dead-lettered or redriven,
// merged into one entry per event under the rules documented on eventView.
type eventLog struct {
	mu    sync.Mutex
	store eventStore
}

// attempts returns when each run of the event ended (tests).
func (l *eventLog) attempts(id string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, _ := l.store.get(id)
	return append([]time.Time(nil), v.ran...)
}

func newEventLog(size int) *eventLog { return &eventLog{store: newRingStore(size)} }

// has reports whether the log holds an entry for id.
func (l *eventLog) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.store.get(id)
	return ok
}

// update applies f to id's entry (a new one when absent) and stores it.
func (l *eventLog) update(id string, f func(v *eventView)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.store.get(id)
	if !ok {
		v = eventView{WebhookEventID: id, Outcome: outcomeQueued}
	}
	f(&v)
	l.store.put(v)
}

// accepted records that the bus took the event from a webhook invocation
// traced as traceID.
func (l *eventLog) accepted(id, typ, traceID string) {
	l.update(id, func(v *eventView) {
		v.Deliveries++
		if v.Type == "" {
			v.Type = typ
		}
		if v.TraceID == "" {
			v.TraceID = traceID
		}
	})
}

// observe records one worker receive.
func (l *eventLog) observe(res worker.Result) {
	id := res.WebhookEventID
	if id == "" {
		id = res.MessageID // undecodable: the message is all there is
	}
	l.update(id, func(v *eventView) {
		v.ReceiveCount++
		if res.Outcome != worker.OutcomeDeferred {
			v.ran = append(v.ran, time.Now())
		}
		if res.Type != "" {
			v.Type = res.Type
		}
		if res.TraceID != "" {
			v.RecordTraceID = res.TraceID
		}
		switch {
		case res.Outcome == worker.OutcomeDuplicate:
			v.Duplicates++
			if v.Outcome == outcomeQueued {
				v.Outcome = string(worker.OutcomeDuplicate)
			}
		case final(v.Outcome):
			// Handled once already (sent, or held for quota): that stays.
		default:
			v.Outcome, v.Error, v.DeadLetterQueue = string(res.Outcome), "", ""
			if res.Err != nil {
				v.Error = res.Err.Error()
			}
		}
	})
}

// deadLettered records that the event failed its last allowed receive and
// goes to dlq.
func (l *eventLog) deadLettered(id, dlq string) {
	l.update(id, func(v *eventView) {
		if !final(v.Outcome) {
			v.Outcome, v.DeadLetterQueue = outcomeDeadLettered, dlq
		}
	})
}

// redriven puts the events dead-lettered in dlq back to queued: a redrive
// moved them back to work.
func (l *eventLog) redriven(dlq string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.store.list() {
		if v.Outcome == outcomeDeadLettered && v.DeadLetterQueue == dlq {
			v.Outcome, v.DeadLetterQueue = outcomeQueued, ""
			l.store.put(v)
		}
	}
}

func (l *eventLog) list() []eventView {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.store.list()
}

// final reports whether an outcome is the end of an event's story: handled
// (ok), handled with its result held for LINE's monthly quota (held), or
// an edit dropped for a newer one (stale).
func final(outcome string) bool {
	return outcome == string(worker.OutcomeOK) || outcome == string(worker.OutcomeHeld) || outcome == string(worker.OutcomeStale)
}
