package queue

import (
	"cmp"
	"slices"
	"time"
)

// A Set's journal: with Track on, every call records what it changed, and
// Changes hands those changes over (as whole messages, not as operations),
// so a caller can write them to disk after each call and Restore them into
// a new Set after a restart. Everything SQS keeps survives that way: the
// messages in their order, their visibility deadlines, receive counts and
// latest receipt handles, where a dead letter came from, a FIFO queue's
// deduplication ids within their window and the sequence counter.

// Ref names one message of a queue, or (for deduplication ids) one key.
type Ref struct{ Queue, ID string }

// Saved is one message as a journal keeps it: enough to put it back in its
// queue, in its place, hidden or in flight as it was.
type Saved struct {
	Message
	Queue string
	// Pos orders the messages of a queue: Restore puts them back in Pos
	// order, which is the order they entered the queue.
	Pos       uint64
	VisibleAt time.Time
	InFlight  bool
	// ReceiveSeq is the receive that issued Handle: the handle stays valid
	// across a restart.
	ReceiveSeq int
	// Origin is the queue it was dead-lettered from, for a redrive without
	// a destination.
	Origin string `json:",omitempty"`
}

// SavedDedup is a FIFO queue's remembered deduplication key and the first
// message sent with it (its ID, group and sequence number: a deduplicated
// Send returns those, so the body is not kept).
type SavedDedup struct {
	Queue, Key string
	First      Message
	At         time.Time
}

// Changes is what changed since the previous call of Changes: the new state
// of every message added or changed, the messages gone, the deduplication
// keys remembered or forgotten, and the sequence counter when it moved.
type Changes struct {
	Saved     []Saved
	Removed   []Ref
	Dedups    []SavedDedup
	Forgotten []Ref // ID holds the deduplication key
	Counter   uint64
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Saved) == 0 && len(c.Removed) == 0 && len(c.Dedups) == 0 && len(c.Forgotten) == 0 && c.Counter == 0
}

// State is everything Restore needs: what a journal kept.
type State struct {
	Messages []Saved
	Dedups   []SavedDedup
	Counter  uint64
}

// Track makes the Set record its changes for Changes.
func (s *Set) Track() {
	s.track = true
	s.dirty, s.dirtyDedup = map[Ref]*entry{}, map[Ref]*sentOnce{}
}

// Changes returns what changed since the last call (nothing without Track)
// and forgets it.
func (s *Set) Changes() Changes {
	var c Changes
	if !s.track {
		return c
	}
	for ref, e := range s.dirty {
		if e == nil {
			c.Removed = append(c.Removed, ref)
			continue
		}
		c.Saved = append(c.Saved, saved(ref.Queue, e))
	}
	for ref, d := range s.dirtyDedup {
		if d == nil {
			c.Forgotten = append(c.Forgotten, ref)
			continue
		}
		c.Dedups = append(c.Dedups, SavedDedup{Queue: ref.Queue, Key: ref.ID, First: d.msg, At: d.at}) // an identity: Send keeps no more
	}
	if s.seqDirty {
		c.Counter = s.seq
	}
	clear(s.dirty)
	clear(s.dirtyDedup)
	s.seqDirty = false
	return c
}

func saved(queue string, e *entry) Saved {
	sv := Saved{Message: e.Message, Queue: queue, Pos: e.pos, VisibleAt: e.visibleAt, InFlight: e.inFlight, ReceiveSeq: e.seq}
	if e.origin != nil {
		sv.Origin = e.origin.name
	}
	return sv
}

// Restore puts a journal's state back: each message in its queue (created
// unconfigured when Configure has not named it yet) in Pos order, the
// deduplication keys, and the counters. Restore a new Set, before any
// other call.
func (s *Set) Restore(st State) {
	msgs := slices.Clone(st.Messages)
	slices.SortFunc(msgs, func(a, b Saved) int { return cmp.Compare(a.Pos, b.Pos) })
	boxOf := func(name string) *box {
		if b, ok := s.queues[name]; ok {
			return b
		}
		return s.newBox(name)
	}
	for _, m := range msgs {
		b := boxOf(m.Queue)
		e := &entry{Message: m.Message, visibleAt: m.VisibleAt, inFlight: m.InFlight, seq: m.ReceiveSeq, pos: m.Pos}
		if m.Origin != "" {
			e.origin = boxOf(m.Origin)
		}
		b.msgs = append(b.msgs, e)
		b.byID[e.ID] = e
		s.pos = max(s.pos, m.Pos)
	}
	for _, d := range st.Dedups {
		boxOf(d.Queue).dedup[d.Key] = sentOnce{msg: d.First, at: d.At}
	}
	s.seq = max(s.seq, st.Counter)
}

// note records that e, in b, changed.
func (b *box) note(e *entry) {
	if b.set.track {
		b.set.dirty[Ref{b.name, e.ID}] = e
	}
}

// noteGone records that e left b.
func (b *box) noteGone(e *entry) {
	if b.set.track {
		b.set.dirty[Ref{b.name, e.ID}] = nil
	}
}

// noteDedup records that b's deduplication key changed (remembered or
// forgotten).
func (b *box) noteDedup(key string) {
	if !b.set.track {
		return
	}
	if d, ok := b.dedup[key]; ok {
		b.set.dirtyDedup[Ref{b.name, key}] = &d
		return
	}
	b.set.dirtyDedup[Ref{b.name, key}] = nil
}
