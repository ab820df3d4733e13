package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
	"github.com/linegate/linegate/internal/testclock"
)

// world is a Set with a "work" queue redriving to "dlq" after two
// receives, one message in work, and the clock that drives them.
type world struct {
	t   *testing.T
	s   *queue.Set
	clk *testclock.Clock
}

func newWorld(t *testing.T) world {
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := queue.New(clk.Now)
	s.Configure("dlq", queue.Config{Retention: time.Hour})
	s.Configure("work", queue.Config{Retention: time.Hour, DeadLetter: "dlq", MaxReceives: 2})
	if _, err := s.Send("work", queue.Message{Body: "m"}, 0); err != nil {
		t.Fatal(err)
	}
	return world{t: t, s: s, clk: clk}
}

func (w world) receive(name string) []queue.Message {
	w.t.Helper()
	r, err := w.s.Receive(name, 10, 10*time.Second)
	if err != nil {
		w.t.Fatalf("Receive(%s): %v", name, err)
	}
	return r.Messages
}

func (w world) stats(name string) queue.Stats {
	w.t.Helper()
	st, err := w.s.Stats(name)
	if err != nil {
		w.t.Fatalf("Stats(%s): %v", name, err)
	}
	return st
}

// Each case runs steps on a fresh world and checks the depth of work and
// dlq afterwards, as visible/in-flight counts.
func TestSemantics(t *testing.T) {
	tests := []struct {
		name        string
		steps       func(w world) error
		work, dlq   [2]int // visible, in flight
		wantErr     error
		wantDeleted bool
	}{
		{"a receive hides the message", func(w world) error { w.receive("work"); return nil }, [2]int{0, 1}, [2]int{}, nil, false},
		{"it reappears after the visibility timeout", func(w world) error {
			w.receive("work")
			w.clk.Advance(10 * time.Second)
			return nil
		}, [2]int{1, 0}, [2]int{}, nil, false},
		{"the latest handle deletes", func(w world) error {
			m := w.receive("work")[0]
			deleted, err := w.s.Delete("work", m.Handle)
			if !deleted {
				return errors.New("not deleted")
			}
			return err
		}, [2]int{}, [2]int{}, nil, true},
		{"a stale handle deletes nothing and succeeds", func(w world) error {
			old := w.receive("work")[0]
			if err := w.s.ChangeVisibility("work", old.Handle, 0); err != nil {
				return err
			}
			w.receive("work")
			if deleted, err := w.s.Delete("work", old.Handle); deleted || err != nil {
				return errors.New("stale handle deleted")
			}
			return nil
		}, [2]int{0, 1}, [2]int{}, nil, false},
		{"a stale handle cannot change visibility", func(w world) error {
			old := w.receive("work")[0]
			_ = w.s.ChangeVisibility("work", old.Handle, 0)
			w.receive("work")
			return w.s.ChangeVisibility("work", old.Handle, time.Second)
		}, [2]int{0, 1}, [2]int{}, queue.ErrStaleHandle, false},
		{"another queue's handle is invalid", func(w world) error {
			m := w.receive("work")[0]
			_, err := w.s.Delete("dlq", m.Handle)
			return err
		}, [2]int{0, 1}, [2]int{}, queue.ErrInvalidHandle, false},
		{"garbage is an invalid handle", func(w world) error {
			return w.s.ChangeVisibility("work", "not a handle", 0)
		}, [2]int{1, 0}, [2]int{}, queue.ErrInvalidHandle, false},
		{"a visible message is not in flight", func(w world) error {
			m := w.receive("work")[0]
			w.clk.Advance(11 * time.Second)
			return w.s.ChangeVisibility("work", m.Handle, time.Second)
		}, [2]int{1, 0}, [2]int{}, queue.ErrNotInFlight, false},
		{"the receive after MaxReceives dead-letters", func(w world) error {
			for range 2 {
				m := w.receive("work")[0]
				_ = w.s.ChangeVisibility("work", m.Handle, 0)
			}
			if got := w.receive("work"); len(got) != 0 {
				return errors.New("a third receive returned the message")
			}
			return nil
		}, [2]int{}, [2]int{1, 0}, nil, false},
		{"a move returns dead letters to their source, afresh", func(w world) error {
			for range 2 {
				m := w.receive("work")[0]
				_ = w.s.ChangeVisibility("work", m.Handle, 0)
			}
			w.receive("work")
			if moved, stuck, err := w.s.Move("dlq", ""); moved != 1 || stuck != 0 || err != nil {
				return errors.New("move failed")
			}
			if m := w.receive("work"); len(m) != 1 || m[0].Receives != 1 {
				return errors.New("moved message not received afresh")
			}
			return nil
		}, [2]int{0, 1}, [2]int{}, nil, false},
		{"a message sent to the DLQ has no source to return to", func(w world) error {
			_, _ = w.s.Send("dlq", queue.Message{Body: "orphan"}, 0)
			if moved, stuck, _ := w.s.Move("dlq", ""); moved != 0 || stuck != 1 {
				return errors.New("orphan moved")
			}
			return nil
		}, [2]int{1, 0}, [2]int{1, 0}, nil, false},
		{"retention drops old messages", func(w world) error { w.clk.Advance(time.Hour); return nil }, [2]int{}, [2]int{}, nil, false},
		{"purge empties the queue", func(w world) error { return w.s.Purge("work") }, [2]int{}, [2]int{}, nil, false},
		{"an unknown queue", func(w world) error { _, err := w.s.Receive("nope", 1, 0); return err }, [2]int{1, 0}, [2]int{}, queue.ErrNoQueue, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			if err := tt.steps(w); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			for name, want := range map[string][2]int{"work": tt.work, "dlq": tt.dlq} {
				if st := w.stats(name); st.Visible != want[0] || st.InFlight != want[1] {
					t.Errorf("%s: %d visible, %d in flight; want %d and %d", name, st.Visible, st.InFlight, want[0], want[1])
				}
			}
		})
	}
}

func TestDelayAndReceiveOrder(t *testing.T) {
	w := newWorld(t)
	if _, err := w.s.Send("work", queue.Message{Body: "later"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Send("work", queue.Message{Body: "second"}, 0); err != nil {
		t.Fatal(err)
	}
	r, err := w.s.Receive("work", 10, time.Minute)
	if err != nil || len(r.Messages) != 2 || r.Messages[0].Body != "m" || r.Messages[1].Body != "second" {
		t.Fatalf("Receive = %+v, %v; want m then second, the delayed one hidden", r, err)
	}
	if r.Next != 5*time.Second {
		t.Errorf("Next = %v, want the 5s until the delayed message shows", r.Next)
	}
	if st := w.stats("work"); st.Delayed != 1 || st.InFlight != 2 {
		t.Errorf("stats = %+v, want 1 delayed and 2 in flight", st)
	}
	w.clk.Advance(5 * time.Second)
	if got := w.receive("work"); len(got) != 1 || got[0].Body != "later" || got[0].Receives != 1 || !got[0].FirstReceive.Equal(w.clk.Now()) {
		t.Fatalf("after the delay received %+v", got)
	}
}
