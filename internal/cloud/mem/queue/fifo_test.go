package queue_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmem"
)

// fifo is a Set with a FIFO "chat" queue redriving to a FIFO "chat-dlq"
// after two receives.
func fifo(t *testing.T, cfg queue.Config) (*queue.Set, *testclock.Clock) {
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := queue.New(clk.Now)
	s.Configure("chat-dlq", queue.Config{FIFO: true})
	cfg.FIFO, cfg.DeadLetter, cfg.MaxReceives = true, "chat-dlq", 2
	s.Configure("chat", cfg)
	return s, clk
}

func send(t *testing.T, s *queue.Set, group, id, body string) queue.Message {
	t.Helper()
	m, err := s.Send("chat", queue.Message{Body: body, GroupID: group, DedupID: id}, 0)
	if err != nil {
		t.Fatalf("Send(%s/%s): %v", group, id, err)
	}
	return m
}

func bodiesOf(r queue.Received) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Body)
	}
	return out
}

func receive(t *testing.T, s *queue.Set, max int) queue.Received {
	t.Helper()
	r, err := s.Receive("chat", max, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A group's messages come in send order, and none while one of the group is
// in flight; other groups are not held up.
func TestFIFOGroups(t *testing.T) {
	s, clk := fifo(t, queue.Config{})
	for i := range 3 {
		send(t, s, "A", fmt.Sprint("a", i), fmt.Sprint("a", i))
		send(t, s, "B", fmt.Sprint("b", i), fmt.Sprint("b", i))
	}
	first := receive(t, s, 2)
	if got := bodiesOf(first); !slices.Equal(got, []string{"a0", "b0"}) {
		t.Fatalf("first receive %v, want the head of each group", got)
	}
	if got := bodiesOf(receive(t, s, 10)); len(got) != 0 {
		t.Fatalf("received %v while each group's head is in flight", got)
	}
	// A's head done: A's next two come, in order; B stays blocked.
	if _, err := s.Delete("chat", first.Messages[0].Handle); err != nil {
		t.Fatal(err)
	}
	if got := bodiesOf(receive(t, s, 10)); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("after deleting a0: %v, want a1 a2", got)
	}
	// B's head becomes visible again (a failure): it comes back before b1.
	if err := s.ChangeVisibility("chat", first.Messages[1].Handle, 0); err != nil {
		t.Fatal(err)
	}
	r := receive(t, s, 1)
	if got := bodiesOf(r); !slices.Equal(got, []string{"b0"}) || r.Messages[0].Receives != 2 {
		t.Fatalf("after b0's failure: %v (receives %d), want b0 again", got, r.Messages[0].Receives)
	}
	// b0's second failure, then its third receive moves it to the DLQ and
	// b1 follows in the same receive.
	_ = s.ChangeVisibility("chat", r.Messages[0].Handle, 0)
	r = receive(t, s, 10)
	if got := bodiesOf(r); !slices.Equal(got, []string{"b1", "b2"}) || r.DeadLettered != 1 {
		t.Fatalf("past maxReceiveCount: %v, dead-lettered %d; want b1 b2 and b0 in the DLQ", got, r.DeadLettered)
	}
	d, _ := s.Receive("chat-dlq", 10, time.Second)
	if len(d.Messages) != 1 || d.Messages[0].GroupID != "B" || d.Messages[0].DedupID != "b0" {
		t.Fatalf("dead letter %+v, want b0 with its group and deduplication id", d.Messages)
	}
	_ = clk
}

// A message hidden by a visibility change holds its group, and a later
// message made visible at once still waits behind it.
func TestFIFOLaterVisibleWaitsBehindHidden(t *testing.T) {
	s, clk := fifo(t, queue.Config{})
	send(t, s, "A", "1", "a1")
	send(t, s, "A", "2", "a2")
	r := receive(t, s, 10)
	if len(r.Messages) != 2 {
		t.Fatalf("got %v", bodiesOf(r))
	}
	_ = s.ChangeVisibility("chat", r.Messages[0].Handle, 5*time.Second) // a1 failed: retry in 5 s
	_ = s.ChangeVisibility("chat", r.Messages[1].Handle, 0)             // a2 deferred: visible at once
	if got := receive(t, s, 10); len(got.Messages) != 0 || got.Next <= 0 {
		t.Fatalf("received %v while a1 is hidden (next %v)", bodiesOf(got), got.Next)
	}
	clk.Advance(5 * time.Second)
	if got := bodiesOf(receive(t, s, 10)); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("after a1's delay: %v, want a1 then a2", got)
	}
}

// Deduplication: the same id within the window is accepted and dropped (the
// first send is returned), after it is enqueued again; content-based
// deduplication hashes the body; per-group scope separates groups.
func TestFIFODeduplication(t *testing.T) {
	t.Run("by id within the window", func(t *testing.T) {
		s, clk := fifo(t, queue.Config{DedupWindow: time.Minute})
		m1 := send(t, s, "A", "x", "one")
		m2 := send(t, s, "A", "x", "two")
		if !m2.Deduplicated || m2.ID != m1.ID || m2.Sequence != m1.Sequence || m1.Deduplicated {
			t.Fatalf("second send %+v, want the first one back, deduplicated", m2)
		}
		clk.Advance(time.Minute)
		if m3 := send(t, s, "A", "x", "three"); m3.Deduplicated {
			t.Fatal("deduplicated after the window")
		}
		if got := bodiesOf(receive(t, s, 10)); !slices.Equal(got, []string{"one", "three"}) {
			t.Fatalf("%v: want one and three, not two", got)
		}
	})
	t.Run("by content", func(t *testing.T) {
		s, _ := fifo(t, queue.Config{ContentDedup: true})
		a, _ := s.Send("chat", queue.Message{Body: "same", GroupID: "A"}, 0)
		b, _ := s.Send("chat", queue.Message{Body: "same", GroupID: "B"}, 0)
		c, _ := s.Send("chat", queue.Message{Body: "other", GroupID: "A"}, 0)
		if a.Deduplicated || !b.Deduplicated || c.Deduplicated || len(a.DedupID) != 64 {
			t.Fatalf("%+v %+v %+v", a, b, c)
		}
	})
	t.Run("scoped to the group", func(t *testing.T) {
		s, _ := fifo(t, queue.Config{DedupPerGroup: true})
		if send(t, s, "A", "x", "1").Deduplicated || send(t, s, "B", "x", "2").Deduplicated || !send(t, s, "A", "x", "3").Deduplicated {
			t.Fatal("per-group deduplication must separate groups only")
		}
	})
	t.Run("a group and an id are required", func(t *testing.T) {
		s, _ := fifo(t, queue.Config{})
		if _, err := s.Send("chat", queue.Message{Body: "b", DedupID: "x"}, 0); !errors.Is(err, queue.ErrNoGroup) {
			t.Fatalf("no group: %v", err)
		}
		if _, err := s.Send("chat", queue.Message{Body: "b", GroupID: "A"}, 0); !errors.Is(err, queue.ErrNoDedup) {
			t.Fatalf("no id, no content deduplication: %v", err)
		}
	})
}

// Sequence numbers only increase, across groups, and look like SQS's.
func TestFIFOSequence(t *testing.T) {
	s, _ := fifo(t, queue.Config{})
	var prev string
	for i := range 20 {
		m := send(t, s, fmt.Sprint("G", i%3), fmt.Sprint(i), "b")
		if len(m.Sequence) != 20 || strings.Trim(m.Sequence, "0123456789") != "" || m.Sequence <= prev {
			t.Fatalf("sequence %q after %q", m.Sequence, prev)
		}
		prev = m.Sequence
	}
}

// The deduplication window keeps what a deduplicated send returns (the
// first send's ID and sequence number), not the message: 2,000 messages of
// 4 KB sent, received and deleted within the window leave less than 1 KB
// each on the heap, and a repeat of one still gets its first send back.
func TestFIFODeduplicationWindowKeepsNoBodies(t *testing.T) {
	const n, size = 2_000, 4 << 10
	s, _ := fifo(t, queue.Config{})
	body := strings.Repeat("x", size)
	before := testmem.LiveHeap()
	var first queue.Message
	for i := range n {
		// A body of its own, as each send decodes one from its request.
		m := send(t, s, fmt.Sprint("G", i), fmt.Sprint("d", i), fmt.Sprint(i)+body[len(fmt.Sprint(i)):])
		if i == 0 {
			first = m
		}
	}
	for {
		r := receive(t, s, 10)
		if len(r.Messages) == 0 {
			break
		}
		for _, m := range r.Messages {
			if ok, err := s.Delete("chat", m.Handle); !ok || err != nil {
				t.Fatalf("delete %s: %v %v", m.ID, ok, err)
			}
		}
	}
	per := (float64(testmem.LiveHeap()) - float64(before)) / n
	t.Logf("%.0f bytes of live heap per deleted %d-byte message within the window", per, size)
	if per > 1<<10 {
		t.Errorf("%.0f bytes of heap per deleted message within the deduplication window, want under 1 KB: bodies kept", per)
	}
	if again := send(t, s, "G0", "d0", "again"); !again.Deduplicated || again.ID != first.ID || again.Sequence != first.Sequence {
		t.Fatalf("repeat within the window: %+v, want the first send (%s, %s) back", again, first.ID, first.Sequence)
	}
	runtime.KeepAlive(s)
}
