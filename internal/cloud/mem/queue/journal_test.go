package queue_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
	"github.com/linegate/linegate/internal/testclock"
)

// disk is what a journal keeps of a tracked Set: each call's Changes
// applied in order, round-tripped through JSON as a store writes them.
type disk struct {
	msgs    map[queue.Ref][]byte
	dedups  map[queue.Ref][]byte
	counter uint64
}

func (d *disk) apply(t *testing.T, s *queue.Set) {
	t.Helper()
	c := s.Changes()
	for _, m := range c.Saved {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		d.msgs[queue.Ref{Queue: m.Queue, ID: m.ID}] = b
	}
	for _, r := range c.Removed {
		delete(d.msgs, r)
	}
	for _, x := range c.Dedups {
		b, _ := json.Marshal(x)
		d.dedups[queue.Ref{Queue: x.Queue, ID: x.Key}] = b
	}
	for _, r := range c.Forgotten {
		delete(d.dedups, r)
	}
	if c.Counter != 0 {
		d.counter = c.Counter
	}
}

func (d *disk) state(t *testing.T) queue.State {
	t.Helper()
	st := queue.State{Counter: d.counter}
	for _, b := range d.msgs {
		var m queue.Saved
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		st.Messages = append(st.Messages, m)
	}
	for _, b := range d.dedups {
		var x queue.SavedDedup
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		st.Dedups = append(st.Dedups, x)
	}
	return st
}

func configure(s *queue.Set) {
	s.Configure("chat-dlq", queue.Config{FIFO: true})
	s.Configure("chat", queue.Config{FIFO: true, DeadLetter: "chat-dlq", MaxReceives: 2})
	s.Configure("work", queue.Config{Retention: time.Hour})
}

// A Set restored from its journal carries on exactly where the original
// stopped: a FIFO group stays blocked behind its in-flight message, the
// handle issued before the restart still deletes it, receive counts and
// visibility deadlines hold, a deduplication id sent before is still
// dropped, sequence numbers keep increasing, delayed messages stay hidden,
// and a dead letter returns to the queue it came from.
func TestRestoredSetCarriesOn(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	a := queue.New(clk.Now)
	a.Track()
	configure(a)
	d := &disk{msgs: map[queue.Ref][]byte{}, dedups: map[queue.Ref][]byte{}}
	step := func() { d.apply(t, a) }

	var last queue.Message
	for _, m := range []struct{ group, id string }{{"g1", "a"}, {"g1", "b"}, {"g2", "c"}, {"g3", "p"}} {
		var err error
		if last, err = a.Send("chat", queue.Message{Body: m.id, GroupID: m.group, DedupID: m.id}, 0); err != nil {
			t.Fatal(err)
		}
		step()
	}
	if _, err := a.Send("work", queue.Message{Body: "later"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	step()
	// "p" fails twice, then moves to the DLQ on its third receive; g1's "a"
	// and "b" (one receive hands out a group's messages in order) are in
	// flight at the "crash".
	var inFlight, second queue.Message
	for range 2 {
		r, _ := a.Receive("chat", 10, 30*time.Second)
		step()
		for _, m := range r.Messages {
			switch m.Body {
			case "a":
				inFlight = m
			case "b":
				second = m
			case "c":
				_, _ = a.Delete("chat", m.Handle)
				step()
			case "p":
				_ = a.ChangeVisibility("chat", m.Handle, 0)
				step()
			}
		}
	}
	r, _ := a.Receive("chat", 10, 30*time.Second)
	step()
	if r.DeadLettered != 1 || len(r.Messages) != 0 {
		t.Fatalf("third receive: %+v, want p dead-lettered and nothing else (a in flight)", r)
	}
	if inFlight.ID == "" || second.ID == "" {
		t.Fatal("a and b were not received")
	}

	b := queue.New(clk.Now)
	b.Restore(d.state(t))
	configure(b)

	for _, q := range []string{"chat", "chat-dlq", "work"} {
		sa, _ := a.Stats(q)
		sb, _ := b.Stats(q)
		if sa != sb {
			t.Errorf("%s stats: restored %+v, original %+v", q, sb, sa)
		}
	}
	if r, _ := b.Receive("chat", 10, 30*time.Second); len(r.Messages) != 0 {
		t.Errorf("restored chat queue handed out %v while g1's a is in flight", bodiesOf(r))
	}
	if ok, err := b.Delete("chat", inFlight.Handle); !ok || err != nil {
		t.Errorf("the handle issued before the restart: deleted %v, %v", ok, err)
	}
	if err := b.ChangeVisibility("chat", second.Handle, 0); err != nil {
		t.Errorf("releasing b with the handle issued before the restart: %v", err)
	}
	r, _ = b.Receive("chat", 10, 30*time.Second)
	if got := bodiesOf(r); !slices.Equal(got, []string{"b"}) || r.Messages[0].Receives != 2 {
		t.Errorf("after deleting a and releasing b: %v (%+v), want b on its second receive", got, r.Messages)
	}
	dup, err := b.Send("chat", queue.Message{Body: "a", GroupID: "g1", DedupID: "a"}, 0)
	if err != nil || !dup.Deduplicated {
		t.Errorf("resending a's deduplication id after the restart: %+v, %v: want it dropped", dup, err)
	}
	next, err := b.Send("chat", queue.Message{Body: "n", GroupID: "g4", DedupID: "n"}, 0)
	if err != nil || next.Sequence <= last.Sequence {
		t.Errorf("sequence after the restart %s, before %s: want it larger", next.Sequence, last.Sequence)
	}
	if r, _ := b.Receive("work", 10, time.Second); len(r.Messages) != 0 {
		t.Errorf("the delayed message is visible at once after the restart")
	}
	clk.Advance(2 * time.Minute)
	if r, _ := b.Receive("work", 10, time.Second); !slices.Equal(bodiesOf(r), []string{"later"}) {
		t.Errorf("the delayed message after its delay: %v", bodiesOf(r))
	}
	if moved, stuck, err := b.Move("chat-dlq", ""); moved != 1 || stuck != 0 || err != nil {
		t.Errorf("redrive of the restored DLQ: moved %d, stuck %d, %v: want p back to its source", moved, stuck, err)
	}
}

// Without Track a Set records nothing.
func TestUntrackedSetHasNoChanges(t *testing.T) {
	s := queue.New(time.Now)
	configure(s)
	_, _ = s.Send("work", queue.Message{Body: "x"}, 0)
	if c := s.Changes(); !c.Empty() {
		t.Fatalf("changes without Track: %+v", c)
	}
}
