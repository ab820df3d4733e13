package bot

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/linegate/linegate/internal/testmessenger"
)

func textEvent(t *testing.T, text, mode string) *Event {
	return mustParse(t, `{"type":"message","mode":"`+mode+`","timestamp":1,"source":{"type":"user","userId":"U1"},"message":{"id":"1","type":"text","text":"`+text+`"}}`, nil)
}

// Long is a property of the route an event takes: the longest matching
// text prefix, the event type, or the default.
func TestLongRoutes(t *testing.T) {
	nop := func(context.Context, *Event, string) error { return nil }
	r := NewRouter()
	r.OnText("", nop)
	r.OnText("draw", nop, Long())
	r.OnText("draw quick", nop)
	r.OnPostback(func(context.Context, *Event, string) error { return nil }, Long())
	r.Default(func(context.Context, *Event) error { return nil }, Long())
	postback := mustParse(t, `{"type":"postback","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"},"postback":{"data":"x"}}`, nil)
	follow := mustParse(t, `{"type":"follow","mode":"active","timestamp":1,"source":{"type":"user","userId":"U1"}}`, nil)
	tests := []struct {
		name string
		ev   *Event
		want bool
	}{
		{"text without a long route", textEvent(t, "hello", "active"), false},
		{"long text route", textEvent(t, "draw a cat", "active"), true},
		{"a longer quick prefix wins", textEvent(t, "draw quick cat", "active"), false},
		{"standby is never long: nothing runs", textEvent(t, "draw a cat", "standby"), false},
		{"long postback route", postback, true},
		{"long default", follow, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Long(tt.ev); got != tt.want {
				t.Fatalf("Long = %v, want %v", got, tt.want)
			}
		})
	}
	if NewRouter().Long(follow) {
		t.Fatal("an event no route takes is not long")
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
