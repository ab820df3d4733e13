package mem

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
	"github.com/linegate/linegate/internal/localstate"
)

// Journal is where a Cloud keeps its queues once Persist is called
// (*localstate.Store): changes are appended in order under the cloud lock
// and waited for after it.
type Journal = localstate.Journal

// The journal's buckets: every message by queue and ID, every remembered
// FIFO deduplication key by queue and key, and the sequence counter.
const (
	bucketMessages = "sqs.messages"
	bucketDedup    = "sqs.dedup"
	bucketMeta     = "sqs.meta"
	keyCounter     = "sequence"
)

// Persist makes the queues durable in j: it restores the messages j holds
// (with their visibility, receive counts, receipt handles, FIFO
// deduplication ids and sequence numbers) and from then on every SQS call
// that changes a queue — a send, a receive, a delete, a visibility change,
// a redrive, an EventBridge or SNS delivery — returns only once j has the
// change on disk. Call it right after New, before the queues are created:
// CreateQueue then finds its messages waiting. Queue attributes, topics and
// buses are not kept: provisioning from the template creates them again.
func (c *Cloud) Persist(j Journal) error {
	var st queue.State
	err := localstate.EachJSON(j, bucketMessages, func(_ string, m queue.Saved) { st.Messages = append(st.Messages, m) })
	if err == nil {
		err = localstate.EachJSON(j, bucketDedup, func(_ string, d queue.SavedDedup) { st.Dedups = append(st.Dedups, d) })
	}
	if err == nil {
		err = j.Each(bucketMeta, func(k, v []byte) error {
			if string(k) == keyCounter && len(v) == 8 {
				st.Counter = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("mem: restore queues: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	set := queue.New(c.now)
	set.Restore(st)
	set.Track()
	c.sqs = &durableQueues{Set: set, c: c}
	c.journal = j
	return nil
}

// refKey is a journal key: the queue's name, a NUL, and the message ID or
// deduplication key (queue names cannot hold a NUL).
func refKey(r queue.Ref) string { return r.Queue + "\x00" + r.ID }

// durableQueues is the queue driver of a persisted cloud: a tracked Set
// whose changes are appended to the journal after every call. Every call is
// made under the cloud lock, so the journal sees them in the Set's order.
type durableQueues struct {
	*queue.Set
	c *Cloud
}

// save appends what the last call changed and notes its ticket for locked
// to wait on.
func (d *durableQueues) save() {
	ch := d.Set.Changes()
	if ch.Empty() {
		return
	}
	out := make([]localstate.Change, 0, len(ch.Saved)+len(ch.Removed)+len(ch.Dedups)+len(ch.Forgotten)+1)
	for _, m := range ch.Saved {
		b, err := json.Marshal(m)
		if err != nil {
			d.c.log.Error("a message cannot be journaled", "queue", m.Queue, "error", err.Error())
			continue
		}
		out = append(out, localstate.Change{Bucket: bucketMessages, Key: refKey(queue.Ref{Queue: m.Queue, ID: m.ID}), Value: b})
	}
	for _, r := range ch.Removed {
		out = append(out, localstate.Change{Bucket: bucketMessages, Key: refKey(r)})
	}
	for _, x := range ch.Dedups {
		b, err := json.Marshal(x)
		if err != nil {
			continue
		}
		out = append(out, localstate.Change{Bucket: bucketDedup, Key: refKey(queue.Ref{Queue: x.Queue, ID: x.Key}), Value: b})
	}
	for _, r := range ch.Forgotten {
		out = append(out, localstate.Change{Bucket: bucketDedup, Key: refKey(r)})
	}
	if ch.Counter != 0 {
		out = append(out, localstate.Change{Bucket: bucketMeta, Key: keyCounter, Value: binary.BigEndian.AppendUint64(nil, ch.Counter)})
	}
	d.c.ticket = d.c.journal.Append(out...)
}

func (d *durableQueues) Send(name string, m queue.Message, delay time.Duration) (queue.Message, error) {
	defer d.save()
	return d.Set.Send(name, m, delay)
}

func (d *durableQueues) Receive(name string, max int, visibility time.Duration) (queue.Received, error) {
	defer d.save()
	return d.Set.Receive(name, max, visibility)
}

func (d *durableQueues) Delete(name, handle string) (bool, error) {
	defer d.save()
	return d.Set.Delete(name, handle)
}

func (d *durableQueues) ChangeVisibility(name, handle string, v time.Duration) error {
	defer d.save()
	return d.Set.ChangeVisibility(name, handle, v)
}

func (d *durableQueues) Purge(name string) error {
	defer d.save()
	return d.Set.Purge(name)
}

func (d *durableQueues) Stats(name string) (queue.Stats, error) {
	defer d.save() // expired messages are dropped
	return d.Set.Stats(name)
}

func (d *durableQueues) Move(src, dst string) (int, int, error) {
	defer d.save()
	return d.Set.Move(src, dst)
}

// durable waits, outside the cloud lock, until the changes of the call
// that took ticket are on disk.
func (c *Cloud) durable(ticket uint64) error {
	if ticket == 0 || c.journal == nil {
		return nil
	}
	if err := c.journal.Wait(context.Background(), ticket); err != nil {
		return fmt.Errorf("state not saved: %w", err)
	}
	return nil
}
