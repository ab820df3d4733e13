package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/pkg/bot"
)

// stuckTransport never answers: the request is in the kernel's hands when
// the process dies. It signals every request it swallows on seen.
type stuckTransport struct{ seen chan string }

func (s stuckTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	s.seen <- r.URL.Path
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// runner is one "process" of the worker over a shared store: a Processor
// whose LINE client goes through transport (nil: straight to LINE).
// With ledger false it keeps no state store, so no reply is recorded.
func runner(t *testing.T, f *fixture, store *idempotency.Memory, router *bot.Router, transport http.RoundTripper, ledger bool) *Processor {
	t.Helper()
	hc := &http.Client{Transport: transport}
	if transport == nil {
		hc = http.DefaultClient
	}
	opts := []Option{WithMessenger(func() bot.Messenger {
		return lineapi.New(token, lineapi.WithBaseURL(f.srv.URL), lineapi.WithHTTPClient(hc),
			lineapi.WithSleep(func(context.Context, time.Duration) error { return nil }))
	})}
	if ledger {
		opts = append(opts, WithStateStore(store))
	}
	p, err := New(router, store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dieDuring runs msg through p in a batch that is abandoned once the handler
// is stuck (at, a signal the handler or its transport gives): the process
// dies there. Its claim stays in progress, as a SIGKILL leaves it; the next
// process's start releases it (linegate local) or it expires (Lambda).
func dieDuring(t *testing.T, p *Processor, msg events.SQSMessage, at <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}) }()
	select {
	case <-at:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never got to the point of the crash")
	}
	cancel()
	<-done
}

// A reply that may have reached LINE is never followed by a push of the
// same answer, across a crash: the worker records the reply's attempt in
// the idempotency table before the reply, and the retry of the event takes
// LINE's "Invalid reply token" for an attempted reply as delivered. The
// other side of that bet: an attempt recorded whose request never reached
// LINE is made again while the token lives, so the answer still arrives,
// once. Without the record (no state store) the first case answers twice:
// the control that shows the test can tell.
func TestCrashAfterReplyIsNotAnsweredTwice(t *testing.T) {
	const user = "Uuser0001"
	tests := []struct {
		name string
		// replyLeaves: the killed process's reply reached LINE.
		replyLeaves bool
		noLedger    bool
		wantVia     []linemock.Via
	}{
		{name: "replied, then killed: the retry sends nothing", replyLeaves: true, wantVia: []linemock.Via{linemock.ViaReply}},
		{name: "killed before the reply left: the retry replies", replyLeaves: false, wantVia: []linemock.Via{linemock.ViaReply}},
		{name: "without the record the retry pushes the answer again", replyLeaves: true, noLedger: true, wantVia: []linemock.Via{linemock.ViaReply, linemock.ViaPush}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, echoRouter())
			store := idempotency.NewMemory()
			id := "01EVCRASH" + string(rune('A'+i))
			replied := make(chan string, 1)
			var blockAfterReply atomic.Bool
			blockAfterReply.Store(true)
			r := bot.NewRouter()
			r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
				if err := e.ReplyText(ctx, "echo: "+text); err != nil {
					return err
				}
				if blockAfterReply.Load() {
					replied <- "replied"
					<-ctx.Done() // the process dies before the completion
					return ctx.Err()
				}
				return nil
			})
			f.line.IssueReplyTokenTo("rt-crash", user, time.Now())
			msg := message("m1", 1, textEvent(id, "once", time.Now(), "rt-crash"))

			var first *Processor
			var at <-chan string = replied
			if tt.replyLeaves {
				first = runner(t, f, store, r, nil, !tt.noLedger)
			} else {
				stuck := stuckTransport{seen: make(chan string, 4)}
				first = runner(t, f, store, r, stuck, !tt.noLedger)
				at = stuck.seen
			}
			dieDuring(t, first, msg, at)
			// The restart: the dead process's claim is released (as
			// linegate local's start does), and the event comes again.
			if err := store.Release(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			blockAfterReply.Store(false)
			second := runner(t, f, store, r, nil, !tt.noLedger)
			resp, _ := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 2, textEvent(id, "once", time.Now(), "rt-crash"))}})
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("the retry failed: %+v", resp)
			}
			var via []linemock.Via
			for _, m := range f.line.Messages() {
				if !strings.Contains(string(m.Messages[0]), "echo: once") {
					t.Fatalf("unexpected message %s", m.Messages[0])
				}
				via = append(via, m.Via)
			}
			if len(via) != len(tt.wantVia) || via[0] != tt.wantVia[0] || (len(via) > 1 && via[1] != tt.wantVia[1]) {
				t.Fatalf("LINE recorded %v, want %v", via, tt.wantVia)
			}
			if err := store.Claim(context.Background(), id, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
				t.Fatalf("claim after the retry: %v, want ErrCompleted", err)
			}
		})
	}
}

// ctxStore records the value of completionKey in the context of each
// Complete.
type ctxStore struct {
	idempotency.Store
	completedWith []string
}

type completionKey struct{}

func (s *ctxStore) Complete(ctx context.Context, key string, d time.Duration) error {
	v, _ := ctx.Value(completionKey{}).(string)
	s.completedWith = append(s.completedWith, v)
	return s.Store.Complete(ctx, key, d)
}

// WithCompletionContext's function runs once per handled record, right
// before the claim's completion, told the outcome the record will be
// reported with; the completion is written with the context it returns.
// Failures and duplicates complete nothing and call nothing.
func TestCompletionContext(t *testing.T) {
	tests := []struct {
		name     string
		handler  func(ctx context.Context) error
		before   func(*idempotency.Memory)
		want     Outcome // what the function is told; "" for not called
		complete bool
	}{
		{name: "handled", handler: func(context.Context) error { return nil }, want: OutcomeOK, complete: true},
		{name: "held", handler: func(ctx context.Context) error { MarkHeld(ctx); return nil }, want: OutcomeHeld, complete: true},
		{name: "failed", handler: func(context.Context) error { return errors.New("transient") }},
		{name: "duplicate", handler: func(context.Context) error { return nil }, before: completed("01CC")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := idempotency.NewMemory()
			if tt.before != nil {
				tt.before(mem)
			}
			store := &ctxStore{Store: mem}
			r := bot.NewRouter()
			r.OnText("", func(ctx context.Context, _ *bot.Event, _ string) error { return tt.handler(ctx) })
			var told []Outcome
			p, err := New(r, store, WithCompletionContext(func(ctx context.Context, res Result) context.Context {
				if res.WebhookEventID != "01CC" {
					t.Errorf("told about %q", res.WebhookEventID)
				}
				told = append(told, res.Outcome)
				return context.WithValue(ctx, completionKey{}, "from the hook")
			}))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", 1, textEvent("01CC", "x", time.Now(), ""))}})
			switch {
			case tt.want == "" && len(told) != 0:
				t.Fatalf("the function was told %v, want no call", told)
			case tt.want != "" && (len(told) != 1 || told[0] != tt.want):
				t.Fatalf("the function was told %v, want [%s]", told, tt.want)
			}
			if tt.complete != (len(store.completedWith) == 1) || (tt.complete && store.completedWith[0] != "from the hook") {
				t.Fatalf("completions written with %q, want one with the hook's context: %v", store.completedWith, tt.complete)
			}
		})
	}
}
