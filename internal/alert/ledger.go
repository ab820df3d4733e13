package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/crash"
)

// The paging ledger: what makes the operator hear of every failure once.
//
// SNS, SQS and the batching window give the notifier bursts; the ledger
// gives it memory across invocations, restarts and redeploys. Per ledger
// key (a crash's stack signature, a DLQ, an alarm) it keeps when the last
// card went out and what arrived since:
//   - the first report of a key in a window (DefaultWindow, 15 minutes)
//     pages at once;
//   - later reports of the window are held and counted; the notifier's
//     sweep (Notifier.Sweep, every minute) pages their digest, with the
//     count, once the window has passed;
//   - an alarm's first resolution (→ OK) in its window pages at once too;
//   - a dead-letter notice of an event whose crash is carded in the window
//     is folded into that card's count and sends nothing;
//   - a message redelivered (SQS and SNS deliver at least once) is counted
//     once: the ledger remembers the message IDs it handled lately.
//
// The ledger is one versioned value in the idempotency table (DynamoDB in
// Lambda, the state directory in `linegate local --state`), written with
// optimistic concurrency. When it cannot be read or written, the notifier
// pages as if it had none (fail open): a second card is better than none.
// docs/adr/0005-every-failure-pages.md has the reasoning.

// LedgerStore is where the ledger is kept: one versioned value under
// optimistic concurrency (the idempotency table's VersionedStore, adapted
// by internal/compose/notifierfn). Get returns the value and its version
// (0: none); Put writes value when the live version is still expected,
// kept for keepFor, and fails wrapping ErrLedgerConflict otherwise.
type LedgerStore interface {
	Get(ctx context.Context, key string) (value []byte, version int64, err error)
	Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error)
}

// ErrLedgerConflict is what a LedgerStore's Put wraps when someone else
// wrote the ledger since it was read.
var ErrLedgerConflict = errors.New("alert: the paging ledger was written since it was read")

// DefaultWindow is the coalescing window: one card per ledger key per
// window, the rest in a digest at its end.
const DefaultWindow = 15 * time.Minute

// ledgerItem is the ledger's key in the store.
const ledgerItem = "alerts#ledger"

// Bounds that keep the ledger a few hundred kilobytes at most (an item of
// the idempotency table holds idempotency.MaxValueBytes).
const (
	maxLedgerKeys = 64  // keys remembered; beyond, a new key pages unsuppressed
	maxSeen       = 500 // message IDs remembered against redelivery
	ledgerTries   = 5   // reads and writes of one update before it fails open
)

// ledgerState is the stored ledger.
type ledgerState struct {
	Keys map[string]*keyState `json:"keys,omitempty"`
	DLQs map[string]*dlqState `json:"dlqs,omitempty"`
	// Seen are the message IDs handled lately, oldest first.
	Seen []string `json:"seen,omitempty"`
}

// keyState is one ledger key's window.
type keyState struct {
	// LastCard is when the window's first card went out (zero: none yet).
	LastCard time.Time `json:"lastCard"`
	// Cards counts the cards of the window; State is the alarm state the
	// last one showed.
	Cards int    `json:"cards,omitempty"`
	State string `json:"state,omitempty"`
	// Held counts the reports held since the last card, by kind.
	Held        int `json:"held,omitempty"`
	Crashes     int `json:"crashes,omitempty"`
	DeadLetters int `json:"deadLetters,omitempty"`
	// Folded counts dead letters of carded crashes added since the card.
	Folded int `json:"folded,omitempty"`
	// Sample is the card's content for the digest: the first held report
	// (the newest, for an alarm).
	Sample  *sample   `json:"sample,omitempty"`
	FirstAt time.Time `json:"firstAt,omitzero"`
	LastAt  time.Time `json:"lastAt,omitzero"`
}

// dlqState is what the sweep knows of one DLQ: the dead letters it
// believes announced, since when its depth has been above that (and the
// depth it saw then), or below.
type dlqState struct {
	Expected     int       `json:"expected"`
	SurplusSince time.Time `json:"surplusSince,omitzero"`
	SurplusDepth int       `json:"surplusDepth,omitempty"`
	DeficitSince time.Time `json:"deficitSince,omitzero"`
}

// sample is an ops message kept for a digest, trimmed to what a card shows.
type sample struct {
	Kind     string    `json:"kind"`
	ID       string    `json:"id"`
	Body     []byte    `json:"body"`
	When     time.Time `json:"when"`
	Region   string    `json:"region,omitempty"`
	TopicReg string    `json:"topicRegion,omitempty"`
}

// sampleOf keeps m for a digest: a crash report with only the frames a card
// shows, a notice or alarm as it came.
func sampleOf(m opsMessage) *sample {
	s := &sample{Kind: m.kind(), ID: m.id, When: m.when, Region: m.region, TopicReg: m.topicReg}
	var v any
	switch {
	case m.alarm != nil:
		a := *m.alarm
		a.NewStateReason = truncateUTF16(a.NewStateReason, maxReason)
		a.AlarmDescription = truncateUTF16(a.AlarmDescription, maxDescription)
		v = a
	case m.crash != nil:
		r := *m.crash
		r.Stack = compactStack(r.Stack)
		r.Error = truncateUTF16(r.Error, maxError)
		v = r
	case m.deadLetter != nil:
		v = m.deadLetter
	case m.unannounced != nil:
		v = m.unannounced
	case m.held != nil:
		v = m.held.text
	}
	s.Body, _ = json.Marshal(v)
	return s
}

// compactStack keeps the frames a card shows, as a stack crash.TopFrames
// reads back the same.
func compactStack(stack string) string {
	frames := crash.TopFrames(stack, maxFrames)
	if len(frames) == 0 {
		return truncateUTF16(stack, 1000)
	}
	var b []byte
	for _, f := range frames {
		b = append(b, f.Func+"\n\t"+f.Loc+"\n"...)
	}
	return string(b)
}

// message turns a sample back into the ops message it was.
func (s *sample) message() (opsMessage, error) {
	m := opsMessage{id: s.ID, when: s.When, region: s.Region, topicReg: s.TopicReg}
	var err error
	switch s.Kind {
	case "alarm":
		var a events.CloudWatchAlarmSNSPayload
		err = json.Unmarshal(s.Body, &a)
		m.alarm = &a
	case "crash":
		var r crash.Report
		err = json.Unmarshal(s.Body, &r)
		m.crash = &r
	case "dead-letter":
		var d crash.DeadLetter
		err = json.Unmarshal(s.Body, &d)
		m.deadLetter = &d
	case "unannounced":
		var u unannounced
		err = json.Unmarshal(s.Body, &u)
		m.unannounced = &u
	case "held":
		var text string
		err = json.Unmarshal(s.Body, &text)
		m.held = &heldNotice{text: text}
	default:
		err = fmt.Errorf("unknown kind %q", s.Kind)
	}
	if err != nil {
		return opsMessage{}, fmt.Errorf("alert: ledger sample: %w", err)
	}
	return m, nil
}

// ledger reads and writes the ledger for one notifier.
type ledger struct {
	store  LedgerStore
	window time.Duration
	now    func() time.Time
}

// errLedgerBusy is returned when the ledger kept changing under an update.
var errLedgerBusy = errors.New("alert: the paging ledger kept changing")

// update reads the ledger, applies change and writes it back, again from
// a fresh read when someone else wrote in between. change must only
// depend on the state it is given.
func (l *ledger) update(ctx context.Context, change func(st *ledgerState) error) error {
	for range ledgerTries {
		value, version, err := l.store.Get(ctx, ledgerItem)
		if err != nil {
			return fmt.Errorf("alert: read the paging ledger: %w", err)
		}
		st := &ledgerState{}
		if len(value) > 0 {
			if err := json.Unmarshal(value, st); err != nil {
				st = &ledgerState{} // unreadable: start over rather than never page again
			}
		}
		if st.Keys == nil {
			st.Keys = map[string]*keyState{}
		}
		if st.DLQs == nil {
			st.DLQs = map[string]*dlqState{}
		}
		if err := change(st); err != nil {
			return err
		}
		b, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("alert: encode the paging ledger: %w", err)
		}
		// Kept a day past any window: the ledger outlives a quiet night.
		_, err = l.store.Put(ctx, ledgerItem, b, version, max(24*time.Hour, 4*l.window))
		if errors.Is(err, ErrLedgerConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("alert: write the paging ledger: %w", err)
		}
		return nil
	}
	return errLedgerBusy
}

// seen reports whether the ledger handled message id lately.
func (st *ledgerState) seen(id string) bool { return slices.Contains(st.Seen, id) }

// remember records ids as handled, forgetting the oldest beyond maxSeen.
func (st *ledgerState) remember(ids ...string) {
	st.Seen = append(st.Seen, ids...)
	if len(st.Seen) > maxSeen {
		st.Seen = slices.Clone(st.Seen[len(st.Seen)-maxSeen:])
	}
}

// forget removes ids from the handled ones (their card failed: the retry
// must be handled again).
func (st *ledgerState) forget(ids ...string) {
	st.Seen = slices.DeleteFunc(st.Seen, func(id string) bool { return slices.Contains(ids, id) })
}

// prune drops the keys whose window has passed with nothing held: the
// next report of such a key pages at once anyway.
func (st *ledgerState) prune(now time.Time, window time.Duration) {
	maps.DeleteFunc(st.Keys, func(_ string, k *keyState) bool {
		return k.Held == 0 && now.Sub(k.LastCard) >= window
	})
}

// room makes room for a new key, dropping the oldest key that holds
// nothing; it reports false when every key holds reports.
func (st *ledgerState) room() bool {
	if len(st.Keys) < maxLedgerKeys {
		return true
	}
	oldest := ""
	for k, v := range st.Keys {
		if v.Held == 0 && (oldest == "" || v.LastCard.Before(st.Keys[oldest].LastCard)) {
			oldest = k
		}
	}
	if oldest == "" {
		return false
	}
	delete(st.Keys, oldest)
	return true
}

// verdict is what the ledger decided for one group.
type verdict int

const (
	pageNow verdict = iota // a card now (carrying what was held)
	hold                   // counted for the digest
	fold                   // added to the crash card's count
)

// admitted is a group the ledger let through, and what to undo when its
// push fails.
type admitted struct {
	g    *group
	prev *keyState // the key's state before (nil: none)
	ok   bool      // a resolution card (an alarm's → OK) within the window
	now  time.Time
}

// decide applies the window to g at now and changes st accordingly.
func (l *ledger) decide(st *ledgerState, g *group, now time.Time) (verdict, *admitted) {
	k := st.Keys[g.key]
	fresh := k == nil || now.Sub(k.LastCard) >= l.window
	switch {
	case fresh && g.foldOnly() && k != nil && k.LastCard.IsZero():
		// Nothing carded yet for this crash (its reports are held): count
		// the dead letters with them.
		k.Held += g.count
		k.DeadLetters += g.deadLetters
		return hold, nil
	case fresh:
		if k == nil && !st.room() {
			return pageNow, &admitted{g: g, now: now} // unremembered: pages, suppresses nothing
		}
		var prev *keyState
		if k != nil {
			cp := *k
			prev = &cp
			g.carry(k)
			if g.crashes > 0 && g.msg.crash == nil && k.Sample != nil && k.Sample.Kind == "crash" {
				// Dead letters carrying crashes held in the window: the
				// card is the crash's, with both counts.
				if m, err := k.Sample.message(); err == nil {
					g.msg = m
				}
			}
		}
		st.Keys[g.key] = &keyState{LastCard: now, Cards: 1, State: alarmState(g.msg)}
		return pageNow, &admitted{g: g, prev: prev, now: now}
	case g.foldOnly():
		k.Folded += g.deadLetters
		return fold, nil
	case g.msg.alarm != nil && k.Cards < 2 && alarmState(g.msg) == StateOK && k.State != StateOK:
		cp := *k
		k.Cards++
		k.State = StateOK
		return pageNow, &admitted{g: g, prev: &cp, ok: true, now: now}
	}
	k.Held += g.count
	k.Crashes += g.crashes
	k.DeadLetters += g.deadLetters
	if k.Sample == nil || g.msg.alarm != nil {
		k.Sample = sampleOf(g.msg)
	}
	if k.FirstAt.IsZero() || (!g.first.IsZero() && g.first.Before(k.FirstAt)) {
		k.FirstAt = g.first
	}
	if g.last.After(k.LastAt) {
		k.LastAt = g.last
	}
	return hold, nil
}

// carry puts what a key held since its last card on g's card.
func (g *group) carry(k *keyState) {
	if k.Held == 0 && k.Folded == 0 {
		return
	}
	g.count += k.Held
	g.crashes += k.Crashes
	g.deadLetters += k.DeadLetters + k.Folded
	if !k.LastCard.IsZero() {
		g.since = k.LastCard
	}
	g.span(k.FirstAt, k.LastAt)
}

// undo takes back a page that did not reach the operator: the key's state
// before it, with what was held since added back, so the retry pages
// again and nothing is lost.
func (st *ledgerState) undo(a *admitted) {
	cur := st.Keys[a.g.key]
	if cur == nil || (!a.ok && !cur.LastCard.Equal(a.now)) {
		return // someone paged since: the retry is held in their window
	}
	if a.ok {
		cur.Cards, cur.State = a.prev.Cards, a.prev.State
		return
	}
	restored := &keyState{}
	if a.prev != nil {
		*restored = *a.prev
	}
	restored.Held += cur.Held
	restored.Crashes += cur.Crashes
	restored.DeadLetters += cur.DeadLetters
	restored.Folded += cur.Folded
	if restored.Sample == nil {
		restored.Sample = cur.Sample
	}
	st.Keys[a.g.key] = restored
}

// alarmState is an alarm message's new state ("" for other messages).
func alarmState(m opsMessage) string {
	if m.alarm == nil {
		return ""
	}
	return normalizedState(m.alarm.NewStateValue)
}

// CloudWatch alarm states, as the ledger compares them.
const (
	StateOK    = "OK"
	StateAlarm = "ALARM"
)

// normalizedState is an alarm state as CloudWatch spells it.
func normalizedState(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

// dlq returns the sweep's state of a DLQ, created on first use.
func (st *ledgerState) dlq(name string) *dlqState {
	d := st.DLQs[name]
	if d == nil {
		d = &dlqState{}
		st.DLQs[name] = d
	}
	return d
}
