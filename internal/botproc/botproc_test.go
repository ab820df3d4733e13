package botproc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// served runs router behind a Unix socket and returns a client bound to it.
func served(t *testing.T, router *bot.Router) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "bot.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, router, nil, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c := &Client{}
	c.Swap(Socket(sock))
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := Ready(rctx, Socket(sock)); err != nil {
		t.Fatal(err)
	}
	return c
}

func textEvent(t *testing.T, text string) *bot.Event {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{
		"type": "message", "mode": "active", "timestamp": time.Now().UnixMilli(), "webhookEventId": "01JBOTPROC00000000000000000",
		"replyToken": "r", "source": map[string]any{"type": "user", "userId": "U1"}, "deliveryContext": map[string]any{"isRedelivery": false},
		"message": map[string]any{"type": "text", "id": "1", "text": text, "quoteToken": "q"},
	})
	ev, err := bot.Parse(raw, "Ubot", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// What a handler does in the bot process comes back to the parent as it
// would have in one process: nil, its error (a deadline still a deadline),
// or its panic with the child's stack.
func TestForward(t *testing.T) {
	got := make(chan string, 10)
	r := bot.NewRouter()
	r.OnText("", func(_ context.Context, e *bot.Event, text string) error {
		got <- e.WebhookEventID + " " + text
		return nil
	})
	r.OnText("fail", func(context.Context, *bot.Event, string) error { return errors.New("planted failure") })
	r.OnText("panic", func(context.Context, *bot.Event, string) error { panic("planted panic") })
	r.OnText("slow", func(ctx context.Context, _ *bot.Event, _ string) error { <-ctx.Done(); return ctx.Err() })
	c := served(t, r)
	parent := c.Router()

	if err := parent.Dispatch(context.Background(), textEvent(t, "hi")); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if s := <-got; s != "01JBOTPROC00000000000000000 hi" {
		t.Fatalf("the child saw %q", s)
	}
	if err := parent.Dispatch(context.Background(), textEvent(t, "fail")); err == nil || err.Error() != "planted failure" {
		t.Fatalf("fail: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := parent.Dispatch(ctx, textEvent(t, "slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: %v, want the deadline", err)
	}
	func() {
		defer func() {
			v := recover()
			p, ok := v.(Panic)
			if !ok || p.String() != "planted panic" || !strings.Contains(string(p.PanicStack()), "botproc.TestForward") {
				t.Fatalf("recovered %#v, want a Panic carrying the child's stack", v)
			}
		}()
		_ = parent.Dispatch(context.Background(), textEvent(t, "panic"))
	}()
}

// With no bot process, dispatches fail (the record is retried later).
func TestForwardWithoutABot(t *testing.T) {
	if err := (&Client{}).Forward(context.Background(), textEvent(t, "hi")); !errors.Is(err, ErrNoBot) {
		t.Fatalf("err %v, want ErrNoBot", err)
	}
}
