package botproc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// A suspect runs alone: it waits for the dispatches in flight to end, and
// while it waits or runs no new dispatch starts; once cleared it runs with
// the others again. A suspect that gives up waiting lets the others on.
func TestGateRunsSuspectsAlone(t *testing.T) {
	g := newGate()
	ctx := context.Background()
	leaveA, err := g.enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	g.suspect("s")
	entered := make(chan func(), 1)
	go func() {
		leave, err := g.enter(ctx, "s")
		if err != nil {
			t.Error(err)
		}
		entered <- leave
	}()
	// "b" arrives after the suspect: held back while the suspect waits.
	bIn := make(chan func(), 1)
	waitUntil(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting == 1 })
	go func() {
		leave, err := g.enter(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		bIn <- leave
	}()
	select {
	case <-entered:
		t.Fatal("the suspect ran beside a dispatch in flight")
	case <-bIn:
		t.Fatal("a new dispatch started while a suspect waited")
	default:
	}
	leaveA()
	leaveS := <-entered
	select {
	case <-bIn:
		t.Fatal("a dispatch started beside the suspect")
	default:
	}
	leaveS()
	(<-bIn)()

	// Cleared, it runs with the others.
	g.clear("s")
	l1, _ := g.enter(ctx, "s")
	l2, err := g.enter(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	l1()
	l2()

	// A suspect whose context ends while it waits lets the others on.
	g.suspect("s")
	la, _ := g.enter(ctx, "a")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := g.enter(cctx, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a suspect past its deadline: %v", err)
	}
	lb, err := g.enter(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	la()
	lb()
}

// waitUntil polls cond until it holds, for at most 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
	}
}

// A bot process that dies during a dispatch fails it (transient: the
// handler may have done part of its work) and makes the event a suspect;
// the same event on a bot that lives is cleared.
func TestAChildThatDiesMakesItsEventsSuspects(t *testing.T) {
	cl := newClient(t)
	sock := filepath.Join(t.TempDir(), "dying.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var dying atomic.Bool
	dying.Store(true)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dying.Load() {
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close() // the process is gone mid-answer
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cl.Swap(Socket(sock), Hello{Protocol: Protocol})

	e := textEvent(t, "crash")
	err = cl.Forward(context.Background(), e)
	if !errors.Is(err, errChildDied) || bot.IsPermanent(err) {
		t.Fatalf("a child dying mid-dispatch: %v, want errChildDied, transient", err)
	}
	if !cl.gate.suspects[e.WebhookEventID] {
		t.Fatal("the event in flight is not a suspect")
	}
	dying.Store(false)
	if err := cl.Forward(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if cl.gate.suspects[e.WebhookEventID] {
		t.Fatal("a suspect that ran on a live child is still one")
	}
}
