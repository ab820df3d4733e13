package botproc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// fakeChild answers /ready with status and body, as a bot built with
// another linegate would.
func fakeChild(t *testing.T, status int, body string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// A bot process built with a linegate of another protocol version is
// refused at once with what to do, whether it speaks a newer version or
// predates versions (it answered 204).
func TestReadyRefusesAnotherProtocol(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"a newer protocol", http.StatusOK, `{"protocol":` + strconv.Itoa(Protocol+1) + `,"linegate":"v9.9.9","routes":[]}`, "built with linegate v9.9.9 (protocol " + strconv.Itoa(Protocol+1) + ")"},
		{"before versions", http.StatusNoContent, "", "before the protocol had versions"},
		{"not a hello", http.StatusOK, `<html>`, "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newClient(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cl.Ready(ctx, Socket(fakeChild(t, tt.status, tt.body)))
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want) || ctx.Err() != nil {
				t.Fatalf("err %v, want ErrProtocol saying %q at once", err, tt.want)
			}
		})
	}
}

// The parent's router routes as the current child's does: its route
// queues and debounce come from the child's hello, change when another
// child is swapped in, and are waited for until the first child answers.
func TestParentRoutesByTheChildsRoutes(t *testing.T) {
	nop := func(context.Context, *bot.Event, string) error { return nil }
	first := bot.NewRouter()
	first.OnText("", nop)
	first.OnText("draw", nop, bot.Queue("long"))
	first.OnText("ask", nop, bot.Debounce(2*time.Second, 5*time.Second))
	second := bot.NewRouter()
	second.OnText("", nop, bot.Queue("reports"))

	cl := newClient(t)
	parent := cl.Router()
	routed := make(chan string, 1)
	go func() { routed <- parent.Queue(textEvent(t, "draw a cat")) }()
	sock, _ := child(t, cl, first)
	select {
	case q := <-routed:
		t.Fatalf("routed to %q before any child said hello", q)
	default:
	}
	swap(t, cl, sock)
	select {
	case q := <-routed:
		if q != "long" {
			t.Fatalf("the routing that waited: queue %q, want long", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("routing still waits after the first child's hello")
	}
	if route, window, maxWait := parent.Debounced(textEvent(t, "ask me")); route != "text:ask" || window != 2*time.Second || maxWait != 5*time.Second {
		t.Fatalf("Debounced = %q %v %v", route, window, maxWait)
	}
	if q := parent.Queue(textEvent(t, "hello")); q != "" {
		t.Fatalf("an echo routed to %q", q)
	}
	sock2, _ := child(t, cl, second)
	swap(t, cl, sock2)
	if q := parent.Queue(textEvent(t, "draw a cat")); q != "reports" {
		t.Fatalf("after the swap: queue %q, want the new child's reports", q)
	}
	if err := parent.Dispatch(context.Background(), textEvent(t, "hello")); err != nil {
		t.Fatalf("a dispatch through the mirror: %v", err)
	}
}

// A child whose routes name a route queue the worker's table lacks is
// refused, with the names, as the worker refuses such a bot at start.
func TestReadyRefusesUnknownRouteQueues(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("report", func(context.Context, *bot.Event, string) error { return nil }, bot.Queue("reports"))
	r.OnText("ask", func(context.Context, *bot.Event, string) error { return nil }, bot.Debounce(time.Second, 0))
	cl := newClient(t)
	cl.SetQueues(map[string]string{"other": "http://x"})
	sock := filepath.Join(t.TempDir(), "bot.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, ln, r, Socket(cl.Socket()), time.Second) }()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	_, err = cl.Ready(rctx, Socket(sock))
	if err == nil || !strings.Contains(err.Error(), `"reports"`) || !strings.Contains(err.Error(), `"long"`) {
		t.Fatalf("err %v, want the missing reports and long named", err)
	}
	cl.SetQueues(map[string]string{"long": "http://l", "reports": "http://r"})
	if _, err := cl.Ready(rctx, Socket(sock)); err != nil {
		t.Fatalf("with every queue: %v", err)
	}
}

// A bot process refuses to serve a linegate local of another protocol
// version, or one that gives none; it is a child only outside Lambda.
func TestServeChildChecksTheParent(t *testing.T) {
	dir := t.TempDir()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	base := map[string]string{EnvSocket: filepath.Join(dir, "c.sock"), EnvParent: filepath.Join(dir, "p.sock")}
	tests := []struct {
		name     string
		protocol string
		want     string
	}{
		{"no protocol", "", "gave no " + EnvProtocol},
		{"another protocol", strconv.Itoa(Protocol - 1), "linegate local speaks protocol " + strconv.Itoa(Protocol-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{EnvProtocol: tt.protocol}
			for k, v := range base {
				m[k] = v
			}
			err := ServeChild(context.Background(), bot.NewRouter(), env(m))
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrProtocol saying %q", err, tt.want)
			}
		})
	}
	if err := ServeChild(context.Background(), bot.NewRouter(), env(map[string]string{EnvSocket: base[EnvSocket]})); err == nil || !strings.Contains(err.Error(), EnvParent) {
		t.Fatalf("without a parent socket: %v", err)
	}
	if !Child(env(base)) || Child(env(map[string]string{EnvSocket: "s", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"})) || Child(env(nil)) {
		t.Fatal("Child: a bot process is one with a socket, outside Lambda")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := map[string]string{EnvProtocol: strconv.Itoa(Protocol)}
	for k, v := range base {
		m[k] = v
	}
	done := make(chan error, 1)
	go func() { done <- ServeChild(ctx, bot.NewRouter(), env(m)) }()
	cl := newClient(t)
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	h, err := cl.Ready(rctx, Socket(base[EnvSocket]))
	if err != nil || h.Protocol != Protocol || h.Linegate == "" {
		t.Fatalf("hello %+v, %v", h, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeChild after its context ended: %v", err)
	}
}

// A child's context ends when its lifeline (its standard input, a pipe
// only the parent writes to) ends: the parent is gone.
func TestLifeline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := untilEOF(context.Background(), r)
	if ctx.Err() != nil {
		t.Fatal("ended while the parent holds the pipe")
	}
	_ = w.Close()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after its lifeline ended")
	}
}
