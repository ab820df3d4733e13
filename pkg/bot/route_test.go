package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/testmessenger"
)

func textEvent(t *testing.T, text, mode string) *Event {
	return mustParse(t, `{"type":"message","mode":"`+mode+`","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"1","type":"text","text":"`+text+`"}}`, nil)
}

// A route queue is a property of the route an event takes: the longest
// matching text prefix, the event type, or the default.
func TestRouteQueues(t *testing.T) {
	nop := func(context.Context, *Event, string) error { return nil }
	r := NewRouter()
	r.OnText("", nop)
	r.OnText("draw", nop, Queue("long"))
	r.OnText("draw quick", nop)
	r.OnText("report", nop, Queue("reports"))
	r.OnPostback(func(context.Context, *Event, string) error { return nil }, Queue("long"))
	r.Default(func(context.Context, *Event) error { return nil }, Queue("long"))
	postback := mustParse(t, `{"type":"postback","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"postback":{"data":"x"}}`, nil)
	follow := mustParse(t, `{"type":"follow","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, nil)
	tests := []struct {
		name string
		ev   *Event
		want string
	}{
		{"text without a queued route", textEvent(t, "hello", "active"), ""},
		{"a text route on the long queue", textEvent(t, "draw a cat", "active"), "long"},
		{"a longer quick prefix wins", textEvent(t, "draw quick cat", "active"), ""},
		{"a route on a queue of its own", textEvent(t, "report sales", "active"), "reports"},
		{"standby is never queued: nothing runs", textEvent(t, "draw a cat", "standby"), ""},
		{"a queued postback route", postback, "long"},
		{"a queued default", follow, "long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Queue(tt.ev); got != tt.want {
				t.Fatalf("Queue = %q, want %q", got, tt.want)
			}
		})
	}
	if got := NewRouter().Queue(follow); got != "" {
		t.Fatalf("an event no route takes is queued on %q", got)
	}
	if got := r.Queues(); !slices.Equal(got, []string{"long", "reports"}) {
		t.Fatalf("Queues = %q, want [long reports]", got)
	}
	d := NewRouter()
	d.OnText("ask", nop, Debounce(time.Second, 0))
	if got := d.Queues(); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("a debounced route's Queues = %q, want [long]: flushes wait on it", got)
	}
	if got := NewRouter().Queues(); len(got) != 0 {
		t.Fatalf("an empty router's Queues = %q", got)
	}
}

type finalErr struct{ final bool }

func (f finalErr) Error() string   { return fmt.Sprint("final=", f.final) }
func (f finalErr) Permanent() bool { return f.final }

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", base, false},
		{"Permanent", Permanent(base), true},
		{"wrapped Permanent", fmt.Errorf("handler: %w", Permanent(base)), true},
		{"joined with a Permanent", errors.Join(base, Permanent(base)), true},
		{"another package's final error", fmt.Errorf("line: %w", finalErr{true}), true},
		{"another package's error that is not final", finalErr{false}, false},
		{"a final error under one that is not", fmt.Errorf("%w: %w", finalErr{false}, finalErr{true}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.want {
				t.Fatalf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) must be nil")
	}
	p := Permanent(base)
	if !errors.Is(p, base) || p.Error() != base.Error() {
		t.Fatalf("Permanent must unwrap to and read like its error: %v", p)
	}
}

func TestAnswered(t *testing.T) {
	m := &testmessenger.Messenger{}
	ev := mustParse(t, `{"type":"message","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"replyToken":"rt","message":{"id":"1","type":"text","text":"x"}}`, m)
	if ev.Answered() {
		t.Fatal("answered before any send")
	}
	_ = ev.ShowLoading(context.Background(), 5)
	if ev.Answered() {
		t.Fatal("the loading animation is not an answer")
	}
	if err := ev.ReplyText(context.Background(), "hi"); err != nil || !ev.Answered() {
		t.Fatalf("after a reply: answered %v (%v)", ev.Answered(), err)
	}
}

// Debounced reports the debounce of the route an event takes, under the
// route's name (what the worker keeps a chat's burst under); options out of
// range are clamped; standby events and events no debounced route takes
// are not debounced.
func TestDebouncedRoutes(t *testing.T) {
	nop := func(context.Context, *Event, string) error { return nil }
	r := NewRouter()
	r.OnText("", nop)
	r.OnText("ask", nop, Debounce(2*time.Second, 10*time.Second))
	r.OnText("ask now", nop)
	r.OnText("wait", nop, Debounce(time.Hour, time.Second))
	r.OnText("off", nop, Debounce(0, time.Minute))
	r.OnPostback(func(context.Context, *Event, string) error { return nil }, Debounce(time.Second, 0), Queue("long"))
	postback := mustParse(t, `{"type":"postback","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"postback":{"data":"x"}}`, nil)
	tests := []struct {
		name            string
		ev              *Event
		route           string
		window, maxWait time.Duration
	}{
		{"not debounced", textEvent(t, "hello", "active"), "", 0, 0},
		{"a debounced text route", textEvent(t, "ask me", "active"), "text:ask", 2 * time.Second, 10 * time.Second},
		{"a longer prefix without it", textEvent(t, "ask now please", "active"), "", 0, 0},
		{"clamped to maxDebounce", textEvent(t, "wait", "active"), "text:wait", maxDebounce, maxDebounce},
		{"a window of 0 is off", textEvent(t, "off", "active"), "", 0, 0},
		{"maxWait under window is window", postback, "type:postback", time.Second, time.Second},
		{"standby never is", textEvent(t, "ask me", "standby"), "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route, window, maxWait := r.Debounced(tt.ev)
			if route != tt.route || window != tt.window || maxWait != tt.maxWait {
				t.Fatalf("Debounced = %q %v %v, want %q %v %v", route, window, maxWait, tt.route, tt.window, tt.maxWait)
			}
		})
	}
	if r.Queue(postback) != "long" {
		t.Fatal("Debounce dropped the route's other options")
	}
}

// An event's Batch is itself unless the worker bound a burst to it; the
// batch returned is a copy.
func TestBatch(t *testing.T) {
	a, b := textEvent(t, "ask a", "active"), textEvent(t, "ask b", "active")
	if got := b.Batch(); len(got) != 1 || got[0] != b {
		t.Fatalf("unbound batch %v", got)
	}
	b.BindBatch([]*Event{a, b})
	got := b.Batch()
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("bound batch %v", got)
	}
	got[0] = nil
	if b.Batch()[0] != a {
		t.Fatal("Batch shares its slice")
	}
	b.BindBatch(nil)
	if len(b.Batch()) != 1 {
		t.Fatal("BindBatch(nil) did not unbind")
	}
}
