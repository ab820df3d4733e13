package bot

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/botbridge"
)

// RoutesOf lists every registration with its options; a router rebuilt
// from the list with the public API routes as the original does, and
// Delegate makes a router route by whichever router its function returns.
func TestBridgeRoutesAndDelegate(t *testing.T) {
	nop := func(context.Context, *Event, string) error { return nil }
	r := NewRouter()
	r.OnText("", nop)
	r.OnText("draw", nop, Queue("long"))
	r.OnText("ask", nop, Debounce(2*time.Second, 10*time.Second))
	r.OnFollow(func(context.Context, *Event) error { return nil })
	r.OnPostback(func(context.Context, *Event, string) error { return nil }, Queue("reports"))
	r.Default(func(context.Context, *Event) error { return nil })
	got := botbridge.RoutesOf.(func(*Router) []botbridge.Route)(r)
	want := []botbridge.Route{
		{Kind: "text"}, {Kind: "text", Key: "draw", Queue: "long"},
		{Kind: "text", Key: "ask", Window: 2 * time.Second, MaxWait: 10 * time.Second},
		{Kind: "type", Key: "follow"}, {Kind: "type", Key: "postback", Queue: "reports"}, {Kind: "default"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("routes\n%+v\nwant\n%+v", got, want)
	}
	if got := botbridge.RoutesOf.(func(*Router) []botbridge.Route)(NewRouter()); len(got) != 0 {
		t.Fatalf("an empty router's routes %+v", got)
	}

	var calls []string
	mirror := NewRouter()
	mirror.Use(func(next Handler) Handler {
		return func(ctx context.Context, e *Event) error { calls = append(calls, "mw"); return next(ctx, e) }
	})
	mirror.OnText("draw", func(context.Context, *Event, string) error { calls = append(calls, "draw"); return nil }, Queue("long"))
	var cur *Router
	parent := NewRouter()
	parent.Default(func(context.Context, *Event) error { calls = append(calls, "own"); return nil })
	botbridge.Delegate.(func(*Router, func() *Router))(parent, func() *Router { return cur })
	draw := textEvent(t, "draw a cat", "active")
	if parent.Queue(draw) != "" || parent.Dispatch(context.Background(), draw) != nil || !reflect.DeepEqual(calls, []string{"own"}) {
		t.Fatalf("without a delegate: queue %q, calls %v", parent.Queue(draw), calls)
	}
	cur, calls = mirror, nil
	if parent.Queue(draw) != "long" || parent.Dispatch(context.Background(), draw) != nil || !reflect.DeepEqual(calls, []string{"mw", "draw"}) {
		t.Fatalf("with a delegate: queue %q, calls %v", parent.Queue(draw), calls)
	}
	if q := parent.Queues(); len(q) != 0 {
		t.Fatalf("Queues lists a router's own registrations, not its delegate's: %v", q)
	}
}
