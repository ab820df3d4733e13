// Package botproc runs a bot — the handlers a developer edits — in a process
// of its own, so `linegate local --watch` can rebuild and replace it while
// the local cloud (queues, DLQs, the idempotency table, the event log) keeps
// running in the parent process with all its state.
//
// The parent's worker runs its whole pipeline (trace, idempotency, crash
// reports, deadlines) as always; only the last step, the bot's Dispatch,
// crosses to the child over HTTP on a Unix socket: Forward is a bot.Handler
// for the parent, Serve runs the router in the child. The child parses the
// event as the worker would and binds its own LINE client (the same
// lineapi.Client, pointed at the same LINE API), so replies, pushes, retry
// keys and the loading animation behave exactly as in one process. A
// handler's panic comes back with the child's stack; a handler's deadline
// is the parent's.
package botproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// Paths the child serves.
const (
	pathDispatch = "/dispatch"
	pathReady    = "/ready"
)

// headerDeadline carries the handler's deadline (Unix nanoseconds).
const headerDeadline = "X-Linegate-Deadline"

// maxCall bounds a dispatch request or answer: an event and a stack trace.
const maxCall = 4 << 20

// call is what the parent sends for one event.
type call struct {
	Event       json.RawMessage `json:"event"`
	Destination string          `json:"destination"`
	ReceivedAt  time.Time       `json:"receivedAt"`
}

// answer is what the child answers: nothing, an error, or a panic.
type answer struct {
	Error string `json:"error,omitempty"`
	// Kind names a context error the handler returned ("deadline",
	// "canceled"), so the parent reports it as such.
	Kind  string `json:"kind,omitempty"`
	Panic string `json:"panic,omitempty"`
	Stack string `json:"stack,omitempty"`
}

// Panic is a handler panic in the child, re-raised in the parent: its
// String is the panic's message and PanicStack the child's stack, which the
// worker's crash report uses instead of the parent's.
type Panic struct {
	Message string
	Stack   []byte
}

// String is the child's panic message.
func (p Panic) String() string { return p.Message }

// PanicStack is the stack the handler panicked on, in the child.
func (p Panic) PanicStack() []byte { return p.Stack }

// Serve answers the parent's dispatches on ln with router until ctx ends,
// then lets the dispatches in flight finish (up to grace) and returns.
// newMessenger gives each event its LINE client.
func Serve(ctx context.Context, ln net.Listener, router *bot.Router, newMessenger func() bot.Messenger, grace time.Duration) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathReady, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST "+pathDispatch, func(w http.ResponseWriter, r *http.Request) {
		var c call
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCall)).Decode(&c); err != nil {
			http.Error(w, "bad dispatch: "+err.Error(), http.StatusBadRequest)
			return
		}
		hctx := r.Context()
		if ns, err := strconv.ParseInt(r.Header.Get(headerDeadline), 10, 64); err == nil {
			var cancel context.CancelFunc
			hctx, cancel = context.WithDeadline(hctx, time.Unix(0, ns))
			defer cancel()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(dispatch(hctx, router, newMessenger, c))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("botproc: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("botproc: shutdown: %w", err)
	}
	return nil
}

// dispatch runs one event through the router, as the worker's last steps
// would: parse, bind a LINE client, dispatch, recover a panic.
func dispatch(ctx context.Context, router *bot.Router, newMessenger func() bot.Messenger, c call) (a answer) {
	defer func() {
		if v := recover(); v != nil {
			a = answer{Panic: fmt.Sprint(v), Stack: string(debug.Stack())}
		}
	}()
	ev, err := bot.Parse(c.Event, c.Destination, c.ReceivedAt, nil)
	if err != nil {
		return answer{Error: err.Error()}
	}
	if newMessenger != nil {
		ev.Bind(newMessenger())
	}
	if err := router.Dispatch(ctx, ev); err != nil {
		a = answer{Error: err.Error()}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			a.Kind = "deadline"
		case errors.Is(err, context.Canceled):
			a.Kind = "canceled"
		}
	}
	return a
}

// ErrNoBot is returned by Forward while no child is running.
var ErrNoBot = errors.New("botproc: no bot process is running (see the console: the last build may have failed)")

// Client forwards events to the current child process. Swap replaces the
// child; dispatches in flight finish on the one they started on.
type Client struct {
	cur atomic.Pointer[http.Client]
}

// Socket returns an HTTP client that reaches a child on the Unix socket at
// path.
func Socket(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 64,
	}}
}

// Swap makes c the client new dispatches go through.
func (cl *Client) Swap(c *http.Client) { cl.cur.Store(c) }

// Ready waits until the child behind c answers, or ctx ends.
func Ready(ctx context.Context, c *http.Client) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://bot"+pathReady, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("botproc: the bot process never answered: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Router returns the parent's router: every event goes to the child. (The
// child's router does the routing; standby events never leave the parent.)
func (cl *Client) Router() *bot.Router {
	r := bot.NewRouter()
	r.Default(cl.Forward)
	return r
}

// Forward is a bot.Handler running e in the current child. A handler error
// comes back as an error (wrapping the context's error for a deadline); a
// handler panic is re-raised here as a Panic.
func (cl *Client) Forward(ctx context.Context, e *bot.Event) error {
	c := cl.cur.Load()
	if c == nil {
		return ErrNoBot
	}
	body, err := json.Marshal(call{Event: e.Raw, Destination: e.Destination, ReceivedAt: e.ReceivedAt})
	if err != nil {
		return fmt.Errorf("botproc: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://bot"+pathDispatch, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("botproc: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(headerDeadline, strconv.FormatInt(dl.UnixNano(), 10))
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("botproc: dispatch: %w", ctx.Err())
		}
		return fmt.Errorf("botproc: dispatch to the bot process: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("botproc: the bot process answered %d: %s", resp.StatusCode, b)
	}
	var a answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCall)).Decode(&a); err != nil {
		return fmt.Errorf("botproc: the bot process's answer: %w", err)
	}
	switch {
	case a.Panic != "":
		panic(Panic{Message: a.Panic, Stack: []byte(a.Stack)})
	case a.Kind == "deadline":
		return fmt.Errorf("%s: %w", a.Error, context.DeadlineExceeded)
	case a.Kind == "canceled":
		return fmt.Errorf("%s: %w", a.Error, context.Canceled)
	case a.Error != "":
		return errors.New(a.Error)
	}
	return nil
}
