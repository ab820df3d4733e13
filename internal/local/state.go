package local

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/worker"
)

// The state directory (`linegate local --state DIR`): the in-memory cloud's
// queues (internal/cloud/mem), the DynamoDB tables (internal/awswire) and
// the event log are journaled to one localstate.Store and restored from it
// at start. The queues and tables make every change durable before the
// call that made it returns; the event log's entries are appended in order
// and, for the webhook, made durable before it answers.

// bucketEvents holds the event log: one entry per webhookEventId.
const bucketEvents = "local.events"

// bucketOutcomes holds the final outcome (ok, held) of an event log entry,
// written in the same transaction as the completion of the event's
// idempotency claim (localstate.WithChanges, through the worker's
// WithCompletionContext). The entry itself is journaled as it changes
// without waiting; a crash between the completion and that write would
// otherwise leave the entry queued on disk, and the event's next receive,
// a duplicate, would show it as "duplicate" for good. At restore an
// entry's recorded final outcome wins over a non-final one.
const bucketOutcomes = "local.outcomes"

// savedEvent is an event log entry as the journal keeps it: N is its
// first-seen order, which the ring is rebuilt in.
type savedEvent struct {
	N     uint64    `json:"n"`
	Event eventView `json:"event"`
}

// journaledStore is the event log's ring with every change journaled.
type journaledStore struct {
	*ringStore
	j     localstate.Journal
	n     uint64            // the last first-seen order given
	order map[string]uint64 // each entry's first-seen order
}

// newJournaledStore restores the newest size entries j holds, in the order
// they were first seen, with the final outcomes recorded at their
// completion.
func newJournaledStore(size int, j localstate.Journal) (*journaledStore, error) {
	s := &journaledStore{ringStore: newRingStore(size), j: j, order: map[string]uint64{}}
	var saved []savedEvent
	if err := localstate.EachJSON(j, bucketEvents, func(_ string, e savedEvent) { saved = append(saved, e) }); err != nil {
		return nil, fmt.Errorf("restore the event log: %w", err)
	}
	outcomes := map[string]string{}
	if err := j.Each(bucketOutcomes, func(k, v []byte) error { outcomes[string(k)] = string(v); return nil }); err != nil {
		return nil, fmt.Errorf("restore the event log's outcomes: %w", err)
	}
	slices.SortFunc(saved, func(a, b savedEvent) int { return cmp.Compare(a.N, b.N) })
	for _, e := range saved {
		if o, ok := outcomes[e.Event.WebhookEventID]; ok && final(o) && !final(e.Event.Outcome) {
			e.Event.Outcome, e.Event.Error, e.Event.DeadLetterQueue = o, "", ""
		}
		s.order[e.Event.WebhookEventID] = e.N
		s.n = max(s.n, e.N)
		if _, evicted, ok := s.insert(e.Event); ok {
			delete(s.order, evicted)
			s.j.Append(forget(evicted)...) // a smaller ring than before
		}
	}
	for id := range outcomes {
		if _, ok := s.byID[id]; !ok {
			s.j.Append(localstate.Change{Bucket: bucketOutcomes, Key: id}) // its entry is gone
		}
	}
	return s, nil
}

// forget is the journal's changes that drop id's entry and outcome.
func forget(id string) []localstate.Change {
	return []localstate.Change{{Bucket: bucketEvents, Key: id}, {Bucket: bucketOutcomes, Key: id}}
}

func (s *journaledStore) put(v eventView) {
	added, evicted, ok := s.insert(v)
	if added {
		s.n++
		s.order[v.WebhookEventID] = s.n
	}
	b, err := json.Marshal(savedEvent{N: s.order[v.WebhookEventID], Event: v})
	if err != nil {
		return
	}
	changes := []localstate.Change{{Bucket: bucketEvents, Key: v.WebhookEventID, Value: b}}
	if ok {
		delete(s.order, evicted)
		changes = append(changes, forget(evicted)...)
	}
	s.j.Append(changes...)
}

// completionContext is the worker's WithCompletionContext under --state:
// an event handled for good (ok, held) whose entry the log holds gets its
// final outcome written with the completion of its claim, in one commit.
func (r *Runtime) completionContext(ctx context.Context, res worker.Result) context.Context {
	id := cmp.Or(res.WebhookEventID, res.MessageID)
	if r.state == nil || !final(string(res.Outcome)) || !r.events.has(id) {
		return ctx
	}
	return localstate.WithChanges(ctx, localstate.Change{Bucket: bucketOutcomes, Key: id, Value: []byte(res.Outcome)})
}

// openState opens the state directory of Config.StateDir.
func openState(dir string, opts ...localstate.Option) (*localstate.Store, error) {
	st, err := localstate.Open(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("--state %s: %w", dir, err)
	}
	return st, nil
}

// syncState waits until everything journaled so far is durable (nothing
// without --state): the webhook's answer waits for its event log entries.
func (r *Runtime) syncState(ctx context.Context) error {
	if r.state == nil {
		return nil
	}
	return r.state.Sync(ctx)
}

// releaseClaims deletes the idempotency claims (pkg/idempotency's items in
// progress) that the previous process on the state directory left in the
// template's tables; completed markers, step results and sessions stay. It
// runs at start, before any worker: a claim in the directory then belongs
// to a handler that died with that process (a SIGKILL, a crash), which
// would otherwise block its event for the function's timeout in real time
// (the claim is not scaled by --time-scale, the queues' visibility
// timeouts are), long enough at --time-scale 30 for every receive to find
// it held and dead-letter the event. Released, the event runs again at its
// next receive, as it would once the claim expired.
func (r *Runtime) releaseClaims(ctx context.Context, tables *awswire.Tables) error {
	released := 0
	for _, t := range r.top.Tables {
		n, err := tables.DeleteWhere(ctx, t.Name, idempotency.AttrStatus, idempotency.StatusInProgress)
		if err != nil {
			return fmt.Errorf("--state: release the claims left in %s: %w", t.Name, err)
		}
		released += n
	}
	if released > 0 {
		r.out.line("state     released %d claim(s) left in progress by the previous run: their events run again at their next receive", released)
	}
	return nil
}
