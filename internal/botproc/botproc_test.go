package botproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// newClient is a parent's Client on a socket in a fresh directory.
func newClient(t *testing.T) *Client {
	t.Helper()
	cl, err := NewClient(filepath.Join(t.TempDir(), "parent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// child runs router as a bot process would, in this process, behind a Unix
// socket, calling back on cl's socket; stop ends it.
func child(t *testing.T, cl *Client, router *bot.Router) (sock string, stop func()) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "bot.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, router, Socket(cl.Socket()), time.Second) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if _, err := cl.Ready(rctx, Socket(sock)); err != nil {
		t.Fatal(err)
	}
	return sock, stop
}

// swap makes the child on sock the one cl dispatches to, with its hello.
func swap(t *testing.T, cl *Client, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := cl.Ready(ctx, Socket(sock))
	if err != nil {
		t.Fatal(err)
	}
	cl.Swap(Socket(sock), h)
}

// served starts a child running router and swaps it in.
func served(t *testing.T, router *bot.Router) *Client {
	t.Helper()
	cl := newClient(t)
	sock, _ := child(t, cl, router)
	swap(t, cl, sock)
	return cl
}

func rawText(id, text string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{
		"type": "message", "mode": "active", "timestamp": time.Now().UnixMilli(), "webhookEventId": id,
		"replyToken": "rt-" + id, "source": map[string]any{"type": "user", "userId": "U1"}, "deliveryContext": map[string]any{"isRedelivery": false},
		"message": map[string]any{"type": "text", "id": "1", "text": text, "quoteToken": "q"},
	})
	return raw
}

func textEvent(t *testing.T, text string) *bot.Event {
	t.Helper()
	ev, err := bot.Parse(rawText("01JBOTPROC00000000000000000", text), "Ubot", time.Now(), nil)
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
	if err := parent.Dispatch(context.Background(), textEvent(t, "fail")); err == nil || err.Error() != "planted failure" || bot.IsPermanent(err) {
		t.Fatalf("fail: %v, want the handler's error, transient", err)
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

// The classes of a handler's error cross the process boundary: a
// bot.Permanent error is permanent in the parent (the worker dead-letters
// it at once), and each sentinel the worker or a handler branches on still
// matches with errors.Is, wrapped or not; the text stays the handler's.
func TestErrorClassesCross(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		permanent bool
		is        []error
	}{
		{"plain", errors.New("db down"), false, nil},
		{"permanent", bot.Permanent(errors.New("user gone")), true, nil},
		{"wrapped permanent", fmt.Errorf("charge: %w", bot.Permanent(errors.New("card refused"))), true, nil},
		{"malformed event", fmt.Errorf("decode: %w", bot.ErrEvent), false, []error{bot.ErrEvent}},
		{"step in progress", fmt.Errorf("once %q: %w: %w", "charge", bot.ErrStepInProgress, idempotency.ErrInProgress), false,
			[]error{bot.ErrStepInProgress, idempotency.ErrInProgress}},
		{"session conflict", fmt.Errorf("session: save: %w: %w", bot.ErrSessionConflict, idempotency.ErrConflict), false,
			[]error{bot.ErrSessionConflict, idempotency.ErrConflict}},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), false, []error{context.DeadlineExceeded}},
		{"canceled", context.Canceled, false, []error{context.Canceled}},
		{"LINE refused for good", fmt.Errorf("reply: %w", lineapi.ErrInvalidRequest), true, []error{lineapi.ErrInvalidRequest}},
		{"LINE's monthly limit", fmt.Errorf("push: %w", errors.Join(lineapi.ErrRateLimited, lineapi.ErrMonthlyLimit)), false,
			[]error{lineapi.ErrRateLimited, lineapi.ErrMonthlyLimit}},
	}
	r := bot.NewRouter()
	var mu sync.Mutex
	var next error
	r.OnText("", func(context.Context, *bot.Event, string) error { mu.Lock(); defer mu.Unlock(); return next })
	parent := served(t, r).Router()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			next = tt.err
			mu.Unlock()
			err := parent.Dispatch(context.Background(), textEvent(t, "x"))
			if err == nil || err.Error() != tt.err.Error() {
				t.Fatalf("got %v, want %q", err, tt.err.Error())
			}
			if bot.IsPermanent(err) != tt.permanent {
				t.Fatalf("permanent %v, want %v", bot.IsPermanent(err), tt.permanent)
			}
			for _, s := range tt.is {
				if !errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = false across the boundary", err, s)
				}
			}
			for _, c := range classes {
				if !errors.Is(tt.err, c.err) && errors.Is(err, c.err) {
					t.Errorf("%v matches %v only after crossing", err, c.err)
				}
			}
		})
	}
}

// Every class round-trips through the wire on its own.
func TestEveryClassCrosses(t *testing.T) {
	want := []error{context.DeadlineExceeded, context.Canceled, bot.ErrEvent, envelope.ErrMalformed, bot.ErrStandby,
		bot.ErrNoMessenger, bot.ErrNoSteps, bot.ErrStepInProgress, bot.ErrStepResult, bot.ErrNoSessions, bot.ErrNoChat,
		bot.ErrSessionConflict, idempotency.ErrInProgress, idempotency.ErrCompleted, idempotency.ErrNotClaimed,
		idempotency.ErrConflict, idempotency.ErrTooLarge, idempotency.ErrAttempted, lineapi.ErrInvalidReplyToken,
		lineapi.ErrRateLimited, lineapi.ErrMonthlyLimit, lineapi.ErrUnauthorized, lineapi.ErrInvalidRequest, ErrNoBot}
	if len(want) != len(classes) {
		t.Fatalf("%d classes, %d listed here: keep both lists in step", len(classes), len(want))
	}
	for _, s := range want {
		back := encodeError(fmt.Errorf("wrapped: %w", s)).decode()
		if !errors.Is(back, s) || back.Error() != "wrapped: "+s.Error() {
			t.Errorf("%v came back as %v", s, back)
		}
	}
	if encodeError(nil).decode() != nil {
		t.Error("nil did not come back nil")
	}
}

// envelopeOf wraps a raw event as EventBridge delivers it to SQS.
func envelopeOf(msgID string, receive int, raw json.RawMessage) events.SQSMessage {
	body, _ := json.Marshal(map[string]any{
		"version": "0", "id": "eb-" + msgID, "detail-type": "message", "source": "line.webhook",
		"account": "000000000000", "time": "2026-11-29T08:00:00Z", "region": "us-east-1", "resources": []string{},
		"detail": map[string]any{"destination": "Ubot", "receivedAt": time.Now().UTC().Format(time.RFC3339Nano), "event": raw},
	})
	return events.SQSMessage{MessageId: msgID, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(receive)}}
}

// A handler in the bot process uses what the parent's worker bound to the
// record: its reply goes through the worker's LINE client (so the reply's
// attempt is recorded in the idempotency table), bot.Once's steps and the
// chat's session live in the parent's table. A step that ran before a
// failure is not run again on the retry; the session carries from one
// event to the next.
func TestHandlersInTheBotProcessUseTheWorkersServices(t *testing.T) {
	line := linemock.New(linemock.WithTokens("tok"))
	srv := httptest.NewServer(line)
	defer srv.Close()
	store := idempotency.NewMemory()
	var steps, failOnce atomic.Int32
	failOnce.Store(1)
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		ran, err := bot.Once(ctx, e, "side effect", func(context.Context) (int32, error) { return steps.Add(1), nil })
		if err != nil {
			return err
		}
		var st struct{ N int }
		s, err := e.Session(ctx, &st)
		if err != nil {
			return err
		}
		st.N++
		if err := s.Save(ctx, st); err != nil {
			return err
		}
		if failOnce.Add(-1) == 0 {
			return errors.New("fails once after its step and its save")
		}
		return e.ReplyText(ctx, fmt.Sprintf("%s: step %d, session %d", text, ran, st.N))
	})
	cl := served(t, r)
	p, err := worker.New(cl.Router(), store, worker.WithStateStore(store), worker.WithMessenger(func() bot.Messenger {
		return lineapi.New("tok", lineapi.WithBaseURL(srv.URL))
	}))
	if err != nil {
		t.Fatal(err)
	}
	handle := func(msg events.SQSMessage) {
		t.Helper()
		if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			t.Fatal(err)
		}
	}
	line.IssueReplyTokenTo("rt-01JBP1", "U1", time.Now())
	line.IssueReplyTokenTo("rt-01JBP2", "U1", time.Now())
	first := rawText("01JBP1", "first")
	handle(envelopeOf("m1", 1, first)) // fails after its step and its session save
	handle(envelopeOf("m1", 2, first))
	handle(envelopeOf("m2", 1, rawText("01JBP2", "second")))

	var got []string
	for _, m := range line.Messages() {
		var msg struct{ Text string }
		_ = json.Unmarshal(m.Messages[0], &msg)
		got = append(got, string(m.Via)+" "+msg.Text)
	}
	want := []string{"reply first: step 1, session 1", "reply second: step 2, session 2"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("LINE got %q, want %q (the retry reuses the step and the session as it was)", got, want)
	}
	if err := idempotency.NewAttempts(store, time.Hour).Begin(context.Background(), idempotency.ReplyKey("01JBP1")); !errors.Is(err, idempotency.ErrAttempted) {
		t.Fatalf("the reply's attempt is not in the parent's table: %v", err)
	}
}

// While no bot process can be reached — none yet, or one that died and
// is being started again — a dispatch waits for the next one rather than
// failing; without one by its deadline it fails with ErrNoBot.
func TestForwardWaitsForTheNextBot(t *testing.T) {
	ran := make(chan string, 4)
	r := bot.NewRouter()
	r.OnText("", func(_ context.Context, _ *bot.Event, text string) error { ran <- text; return nil })
	cl := newClient(t)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := cl.Forward(ctx, textEvent(t, "nobody")); !errors.Is(err, ErrNoBot) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with no bot by the deadline: %v, want ErrNoBot", err)
	}

	done := make(chan error, 1)
	go func() { done <- cl.Forward(context.Background(), textEvent(t, "waited")) }()
	sock, stop := child(t, cl, r)
	swap(t, cl, sock)
	if err := <-done; err != nil {
		t.Fatalf("the dispatch that waited: %v", err)
	}
	if got := <-ran; got != "waited" {
		t.Fatalf("ran %q", got)
	}

	// The bot dies (its socket gone): the next dispatch waits for its
	// successor instead of failing.
	stop()
	go func() { done <- cl.Forward(context.Background(), textEvent(t, "after the restart")) }()
	sock, _ = child(t, cl, r)
	swap(t, cl, sock)
	if err := <-done; err != nil {
		t.Fatalf("the dispatch across the restart: %v", err)
	}
	if got := <-ran; got != "after the restart" {
		t.Fatalf("ran %q", got)
	}
}

// The failures of the calls back reach the handler with their class, and
// none hangs: an event dispatched outside a worker's record has no
// messenger, steps or sessions (bot.ErrNoMessenger, ErrNoSteps,
// ErrNoSessions, as in one process); a call back for a dispatch that is
// over is refused; a parent that is gone fails the call at once.
func TestCallBackFailures(t *testing.T) {
	got := make(chan error, 8)
	r := bot.NewRouter()
	r.OnText("outside", func(ctx context.Context, e *bot.Event, _ string) error {
		got <- e.ReplyText(ctx, "x")
		_, err := bot.Once(ctx, e, "s", func(context.Context) (int, error) { return 1, nil })
		got <- err
		_, err = e.Session(ctx, &struct{}{})
		got <- err
		return nil
	})
	parent := served(t, r).Router()
	if err := parent.Dispatch(context.Background(), textEvent(t, "outside")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []error{bot.ErrNoMessenger, bot.ErrNoSteps, bot.ErrNoSessions} {
		if err := <-got; !errors.Is(err, want) {
			t.Errorf("outside a worker's record: %v, want %v", err, want)
		}
	}

	cl := newClient(t)
	over := remote{client: Socket(cl.Socket()), id: "no-such-dispatch"}
	if _, err := over.do(context.Background(), opLoad, request{ChatID: "U1"}); err == nil || !strings.Contains(err.Error(), errCallOver.Error()) {
		t.Fatalf("a call back for a dispatch that is over: %v, want it refused", err)
	}
	gone := remote{client: Socket(filepath.Join(t.TempDir(), "no-parent.sock")), id: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := (remoteMessenger{gone}).Send(ctx, lineapi.Target{ReplyToken: "r"}, messaging_api.TextMessage{Text: "x"}); err == nil ||
		!strings.Contains(err.Error(), "the parent process") || ctx.Err() != nil {
		t.Fatalf("a call back with the parent gone: %v (context %v), want a prompt error naming the parent", err, ctx.Err())
	}
}
