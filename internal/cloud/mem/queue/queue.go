// Package queue is the semantics of SQS queues without the SDK: messages
// kept in send order, delays, visibility timeouts, receive counts and
// receipt handles, retention, the redrive to a dead-letter queue after
// maxReceiveCount, and the moves a redrive task makes; and for FIFO queues
// message groups (a group's next message is never returned while one of the
// group is in flight), deduplication within a window (by id or content, per
// queue or per group) and sequence numbers. The in-memory SQS in
// package mem is a thin adapter from the SDK's request and response shapes
// onto a Set; what is decided here is decided once for SendMessage and
// SendMessageBatch, for an EventBridge target and an SNS subscription.
//
// Durations are real time: the caller applies any time scale before it
// passes a delay, a visibility timeout or a retention period. A Set is not
// safe for concurrent use: the caller serialises every call (mem holds its
// cloud lock, so that a delivery from EventBridge or SNS enqueues atomically
// with its routing).
package queue

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
)

// Error is a Set call's failure; an adapter maps each to its service's
// error (errors.Is compares them).
type Error string

func (e Error) Error() string { return string(e) }

// The Set's errors.
const (
	ErrNoQueue       Error = "queue: no such queue"                              // no queue of that name was configured
	ErrInvalidHandle Error = "queue: receipt handle is not one of this queue's"  // the handle was not made by this queue
	ErrStaleHandle   Error = "queue: receipt handle is not the message's latest" // the message is gone, or was received again since
	ErrNotInFlight   Error = "queue: message is not in flight"                   // its visibility timeout has already ended
	ErrNoGroup       Error = "queue: a FIFO queue's message needs a group"       // FIFO: no MessageGroupId
	ErrNoDedup       Error = "queue: a FIFO queue's message needs a deduplication id or content-based deduplication"
)

// DefaultDedupWindow is SQS's deduplication interval: a FIFO message whose
// deduplication id was sent within it is accepted and dropped.
const DefaultDedupWindow = 5 * time.Minute

// Config is what a queue's attributes mean to its messages.
type Config struct {
	// Retention is how long a message is kept after it was sent (0: forever).
	Retention time.Duration
	// DeadLetter names the queue a message moves to when it is received
	// once more after MaxReceives receives; "" disables the redrive.
	DeadLetter  string
	MaxReceives int
	// FIFO makes the queue first-in-first-out per message group.
	FIFO bool
	// ContentDedup deduplicates messages without an id by the SHA-256 of
	// their body; DedupPerGroup scopes deduplication ids to their group
	// (DeduplicationScope messageGroup). DedupWindow is how long an id is
	// remembered (0: DefaultDedupWindow).
	ContentDedup  bool
	DedupPerGroup bool
	DedupWindow   time.Duration
}

// Message is a message as its queue keeps it. Send fills ID and Sent; a
// receive fills Receives, FirstReceive and Handle.
type Message struct {
	ID, Body, TraceHeader string
	Attributes            map[string]sqstypes.MessageAttributeValue
	Sent                  time.Time
	Receives              int
	FirstReceive          time.Time
	// Handle is the receipt handle of the latest receive: only it deletes
	// the message or changes its visibility.
	Handle string
	// GroupID and DedupID are a FIFO message's MessageGroupId and
	// MessageDeduplicationId (the content hash under content-based
	// deduplication); Sequence is the SequenceNumber Send gave it.
	GroupID, DedupID, Sequence string
	// Deduplicated is set by Send when the message repeats a deduplication
	// id sent within the window: it was accepted and not enqueued, and the
	// returned message is the identity of the one first sent (what SQS
	// answers: its ID and Sequence, with its group and deduplication id; not
	// its body, attributes or trace header, which the window does not keep).
	Deduplicated bool
}

// Received is the outcome of one receive.
type Received struct {
	Messages []Message
	// DeadLettered counts the messages moved to the dead-letter queue
	// instead of being returned.
	DeadLettered int
	// Next is how long until the earliest hidden message reappears (0 when
	// none is hidden): a long poll need not look again before then.
	Next time.Duration
}

// Stats is a queue's depth. OldestAge is the real age of the oldest message.
type Stats struct {
	Visible, InFlight, Delayed int
	OldestAge                  time.Duration
}

type entry struct {
	Message
	visibleAt time.Time // when it may next be received (delay or visibility)
	inFlight  bool
	seq       int    // receive sequence; the latest handle carries it
	origin    *box   // the queue it was dead-lettered from
	pos       uint64 // when it entered its queue: the order Restore puts it back in
}

type box struct {
	set   *Set
	name  string
	cfg   Config
	msgs  []*entry // in send order
	byID  map[string]*entry
	dedup map[string]sentOnce // FIFO: deduplication key -> first send
}

// sentOnce is the first send of a deduplication id: its identity only
// (identity), so the window of a busy FIFO queue — every message sent in
// the last five minutes — holds no bodies.
type sentOnce struct {
	msg Message
	at  time.Time
}

// identity is m without its content: what a deduplicated Send returns and
// the deduplication window keeps.
func identity(m Message) Message {
	m.Body, m.Attributes, m.TraceHeader = "", nil, ""
	return m
}

// Set holds named queues. Create it with New.
type Set struct {
	now    func() time.Time
	queues map[string]*box
	seq    uint64 // the last sequence number given
	pos    uint64 // the last position given to a message entering a queue

	// Tracking (Track): what changed since the last Changes.
	track      bool
	dirty      map[Ref]*entry    // nil: gone from that queue
	dirtyDedup map[Ref]*sentOnce // nil: forgotten
	seqDirty   bool
}

// New returns an empty Set whose "now" is the given clock.
func New(now func() time.Time) *Set {
	return &Set{now: now, queues: map[string]*box{}}
}

// Configure creates the named queue, or changes its configuration.
func (s *Set) Configure(name string, cfg Config) {
	b, ok := s.queues[name]
	if !ok {
		b = s.newBox(name)
	}
	if cfg.DedupWindow <= 0 {
		cfg.DedupWindow = DefaultDedupWindow
	}
	b.cfg = cfg
}

func (s *Set) newBox(name string) *box {
	b := &box{set: s, name: name, byID: map[string]*entry{}, dedup: map[string]sentOnce{}}
	s.queues[name] = b
	return b
}

func (s *Set) box(name string) (*box, error) {
	b, ok := s.queues[name]
	if !ok {
		return nil, ErrNoQueue
	}
	return b, nil
}

// Send appends m, hidden for delay, and returns it with its ID and Sent set.
// On a FIFO queue m needs a GroupID (ErrNoGroup) and a DedupID unless the
// queue deduplicates by content (ErrNoDedup); it gets the next Sequence. A
// FIFO message whose deduplication id was sent within the window is not
// enqueued: the first send is returned, marked Deduplicated.
func (s *Set) Send(name string, m Message, delay time.Duration) (Message, error) {
	b, err := s.box(name)
	if err != nil {
		return Message{}, err
	}
	now := s.now()
	m.ID, m.Sent, m.Receives, m.FirstReceive, m.Handle, m.Deduplicated = uuid.NewString(), now, 0, time.Time{}, "", false
	if b.cfg.FIFO {
		key, err := b.dedupKey(&m)
		if err != nil {
			return Message{}, err
		}
		if first, ok := b.dedup[key]; ok && now.Sub(first.at) < b.cfg.DedupWindow {
			first.msg.Deduplicated = true
			return first.msg, nil
		}
		s.seq++
		s.seqDirty = s.track
		m.Sequence = fmt.Sprintf("%020d", sequenceBase+s.seq)
		b.dedup[key] = sentOnce{msg: identity(m), at: now}
		b.noteDedup(key)
		b.forgetDedup(now)
	}
	b.push(&entry{Message: m, visibleAt: now.Add(delay)})
	return m, nil
}

// sequenceBase makes sequence numbers look like SQS's: large, and only
// increasing.
const sequenceBase = 18_000_000_000_000_000_000

// dedupKey checks a FIFO message's group and deduplication id (filling it
// from the body under content-based deduplication) and returns the key it
// is deduplicated under.
func (b *box) dedupKey(m *Message) (string, error) {
	if m.GroupID == "" {
		return "", ErrNoGroup
	}
	if m.DedupID == "" {
		if !b.cfg.ContentDedup {
			return "", ErrNoDedup
		}
		sum := sha256.Sum256([]byte(m.Body))
		m.DedupID = hex.EncodeToString(sum[:])
	}
	if b.cfg.DedupPerGroup {
		return m.GroupID + "\x00" + m.DedupID, nil
	}
	return m.DedupID, nil
}

// forgetDedup drops deduplication ids older than the window.
func (b *box) forgetDedup(now time.Time) {
	for k, v := range b.dedup {
		if now.Sub(v.at) >= b.cfg.DedupWindow {
			delete(b.dedup, k)
			b.noteDedup(k)
		}
	}
}

// Receive hides up to max visible messages for visibility and returns
// them, oldest first. A message already received MaxReceives times moves to
// the dead-letter queue instead, visible there at once. On a FIFO queue a
// group's messages come in send order and stop at its first message that is
// not visible: while one of a group is in flight (or hidden), none after it
// is returned.
func (s *Set) Receive(name string, max int, visibility time.Duration) (Received, error) {
	b, err := s.box(name)
	if err != nil {
		return Received{}, err
	}
	now := s.now()
	b.expire(now)
	dlq := s.queues[b.cfg.DeadLetter]
	var r Received
	blocked := map[string]bool{} // FIFO: groups with a message not visible
	for _, e := range append([]*entry(nil), b.msgs...) {
		if b.cfg.FIFO && blocked[e.GroupID] {
			continue
		}
		if now.Before(e.visibleAt) {
			if d := e.visibleAt.Sub(now); r.Next == 0 || d < r.Next {
				r.Next = d
			}
			if b.cfg.FIFO {
				blocked[e.GroupID] = true
			}
			continue
		}
		if len(r.Messages) == max {
			break
		}
		if dlq != nil && e.Receives >= b.cfg.MaxReceives {
			b.remove(e)
			e.inFlight, e.visibleAt, e.origin = false, now, b
			dlq.push(e)
			r.DeadLettered++
			continue
		}
		e.Receives++
		e.seq++
		if e.FirstReceive.IsZero() {
			e.FirstReceive = now
		}
		e.inFlight, e.visibleAt = true, now.Add(visibility)
		e.Handle = encodeHandle(b.name, e.ID, e.seq)
		b.note(e)
		r.Messages = append(r.Messages, e.Message)
	}
	return r, nil
}

// Delete removes the message whose latest receive issued handle, and
// reports whether it did. As on AWS, a stale handle (the message is gone,
// or was received again since) succeeds without deleting anything.
func (s *Set) Delete(name, handle string) (bool, error) {
	b, e, err := s.handle(name, handle)
	if errors.Is(err, ErrStaleHandle) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	b.remove(e)
	return true, nil
}

// ChangeVisibility hides an in-flight message for d from now; 0 makes it
// visible at once.
func (s *Set) ChangeVisibility(name, handle string, d time.Duration) error {
	b, e, err := s.handle(name, handle)
	if err != nil {
		return err
	}
	now := s.now()
	if !e.inFlight || !now.Before(e.visibleAt) {
		return ErrNotInFlight
	}
	e.visibleAt = now.Add(d)
	if d == 0 {
		e.inFlight = false
	}
	b.note(e)
	return nil
}

// handle resolves a receipt handle to its queue and message.
func (s *Set) handle(name, h string) (*box, *entry, error) {
	b, err := s.box(name)
	if err != nil {
		return nil, nil, err
	}
	qn, id, seq, ok := decodeHandle(h)
	if !ok || qn != name {
		return nil, nil, ErrInvalidHandle
	}
	e := b.byID[id]
	if e == nil || seq != e.seq {
		return nil, nil, ErrStaleHandle
	}
	return b, e, nil
}

// Purge deletes every message of the queue.
func (s *Set) Purge(name string) error {
	b, err := s.box(name)
	if err != nil {
		return err
	}
	for _, e := range b.msgs {
		b.noteGone(e)
	}
	b.msgs, b.byID = nil, map[string]*entry{}
	return nil
}

// Stats reports the queue's depth, after dropping expired messages.
func (s *Set) Stats(name string) (Stats, error) {
	b, err := s.box(name)
	if err != nil {
		return Stats{}, err
	}
	now := s.now()
	b.expire(now)
	var st Stats
	for _, e := range b.msgs {
		switch {
		case e.inFlight && now.Before(e.visibleAt):
			st.InFlight++
		case !e.inFlight && now.Before(e.visibleAt):
			st.Delayed++
		default:
			st.Visible++
		}
		st.OldestAge = max(st.OldestAge, now.Sub(e.Sent))
	}
	return st, nil
}

// Move empties src into dst, or, when dst is "", each message back into
// the queue it was dead-lettered from. A moved message starts afresh:
// visible at once, never received. Messages with nowhere to go stay in
// src; stuck counts them.
func (s *Set) Move(src, dst string) (moved, stuck int, err error) {
	from, err := s.box(src)
	if err != nil {
		return 0, 0, err
	}
	var to *box
	if dst != "" {
		if to, err = s.box(dst); err != nil {
			return 0, 0, err
		}
	}
	now := s.now()
	var left []*entry
	for _, e := range from.msgs {
		target := to
		if target == nil {
			target = e.origin
		}
		if target == nil {
			left = append(left, e)
			continue
		}
		delete(from.byID, e.ID)
		from.noteGone(e)
		m := e.Message
		*e = entry{Message: Message{ID: m.ID, Body: m.Body, TraceHeader: m.TraceHeader, Attributes: m.Attributes, Sent: m.Sent,
			GroupID: m.GroupID, DedupID: m.DedupID, Sequence: m.Sequence}, visibleAt: now}
		target.push(e)
		moved++
	}
	from.msgs = left
	return moved, len(left), nil
}

func (b *box) push(e *entry) {
	b.set.pos++
	e.pos = b.set.pos
	b.msgs = append(b.msgs, e)
	b.byID[e.ID] = e
	b.note(e)
}

func (b *box) remove(e *entry) {
	delete(b.byID, e.ID)
	b.noteGone(e)
	for i, x := range b.msgs {
		if x == e {
			b.msgs = append(b.msgs[:i], b.msgs[i+1:]...)
			return
		}
	}
}

// expire drops messages older than the retention period.
func (b *box) expire(now time.Time) {
	if b.cfg.Retention <= 0 {
		return
	}
	keep := b.msgs[:0]
	for _, e := range b.msgs {
		if now.Sub(e.Sent) >= b.cfg.Retention {
			delete(b.byID, e.ID)
			b.noteGone(e)
			continue
		}
		keep = append(keep, e)
	}
	clear(b.msgs[len(keep):])
	b.msgs = keep
}

// Receipt handles are opaque to callers; inside they name the queue, the
// message and which receive produced them.
func encodeHandle(queue, id string, seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(queue + "\x00" + id + "\x00" + strconv.Itoa(seq)))
}

func decodeHandle(h string) (queue, id string, seq int, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", "", 0, false
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 {
		return "", "", 0, false
	}
	seq, err = strconv.Atoi(parts[2])
	if err != nil {
		return "", "", 0, false
	}
	return parts[0], parts[1], seq, true
}
