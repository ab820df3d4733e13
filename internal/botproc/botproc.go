// Package botproc runs a bot — the handlers a developer edits — in a process
// of its own, so `linegate local --watch` can rebuild and replace it while
// the local cloud (queues, DLQs, the idempotency table, the event log) keeps
// running in the parent process with all its state.
//
// The parent's worker runs its whole pipeline (trace, idempotency, crash
// reports, deadlines) as always; only the last step, the bot's Dispatch,
// crosses to the child over HTTP on a Unix socket: Forward is a bot.Handler
// for the parent, Serve runs the router in the child. What the handler
// asks of its event — a reply, a push, the loading animation, a bot.Once
// step, the chat's session — comes back to the parent over a second socket
// (the Client's), where the parent runs it on what its worker bound to the
// record (worker.BoundOf): the same LINE client with the record of its
// reply attempt, the held queue, the idempotency table. So the handler
// behaves exactly as in one process.
//
// Errors cross both ways with their class (wire.go): a bot.Permanent error
// is still permanent in the parent (dead-lettered at once), a deadline
// still a deadline, and every sentinel the worker and handlers branch on
// (bot.ErrEvent, bot.ErrStepInProgress, bot.ErrSessionConflict, the
// idempotency table's, LINE's) still matches with errors.Is. A handler's
// panic comes back with the child's stack; a handler's deadline is the
// parent's. While the child is down (rebuilt, or started again after it
// died) a dispatch waits for the next one, within the record's deadline,
// instead of failing.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/internal/botbridge"
	"github.com/linegate/linegate/internal/worker"
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

// call is what the parent sends for one event: the event, and which of
// the record's services the child may call back for (under ID).
type call struct {
	Event       json.RawMessage `json:"event"`
	Destination string          `json:"destination"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	ID          string          `json:"id,omitempty"`
	Messenger   bool            `json:"messenger,omitempty"`
	Steps       bool            `json:"steps,omitempty"`
	Sessions    bool            `json:"sessions,omitempty"`
}

// answer is what the child answers: nothing, an error, or a panic.
type answer struct {
	Error *wireError `json:"error,omitempty"`
	Panic string     `json:"panic,omitempty"`
	Stack string     `json:"stack,omitempty"`
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
// parent reaches the parent's socket (Client.Socket, see Socket): each
// event's sends, steps and session go there.
func Serve(ctx context.Context, ln net.Listener, router *bot.Router, parent *http.Client, grace time.Duration) error {
	mux := http.NewServeMux()
	hi, err := json.Marshal(hello(router))
	if err != nil {
		return fmt.Errorf("botproc: hello: %w", err)
	}
	mux.HandleFunc("GET "+pathReady, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(hi)
	})
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
		_ = json.NewEncoder(w).Encode(dispatch(hctx, router, remote{client: parent, id: c.ID}, c))
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
// would: parse, bind what the parent's record has (through p), dispatch,
// recover a panic.
func dispatch(ctx context.Context, router *bot.Router, p remote, c call) (a answer) {
	defer func() {
		if v := recover(); v != nil {
			a = answer{Panic: fmt.Sprint(v), Stack: string(debug.Stack())}
		}
	}()
	ev, err := bot.Parse(c.Event, c.Destination, c.ReceivedAt, nil)
	if err != nil {
		return answer{Error: encodeError(err)}
	}
	if p.client != nil {
		if c.Messenger {
			ev.Bind(remoteMessenger{p})
		}
		if c.Steps {
			ev.BindSteps(remoteSteps{p})
		}
		if c.Sessions {
			ev.BindSessions(remoteSessions{p})
		}
	}
	if err := router.Dispatch(ctx, ev); err != nil {
		return answer{Error: encodeError(err)}
	}
	return answer{}
}

// ErrNoBot is returned by Forward while no child is running (and none came
// within the record's deadline).
var ErrNoBot = errors.New("botproc: no bot process is running (see the console: the last build may have failed)")

// Client forwards events to the current child process, and serves the
// child's calls back (sends, steps, sessions) on a socket of its own. Swap
// replaces the child; dispatches in flight finish on the one they started
// on, and dispatches made while there is none wait for the next.
type Client struct {
	mu      sync.Mutex
	cur     *http.Client
	changed chan struct{}     // closed and replaced by every Swap
	queues  map[string]string // SetQueues: the worker's queue table

	mirror atomic.Pointer[bot.Router] // the current child's routes (mirrorOf)
	first  chan struct{}              // closed by the first Swap with a child, or by Close
	once   sync.Once

	socket string
	srv    *http.Server
	served chan error
	seq    atomic.Uint64
	calls  sync.Map // call id -> *inFlight
	gate   *gate    // suspects run alone (gate.go)
}

// NewClient returns a Client whose children call back on the Unix socket
// at path (created here; give it to each child, see Serve).
func NewClient(path string) (*Client, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("botproc: listen for the bot's calls on %s: %w", path, err)
	}
	cl := &Client{changed: make(chan struct{}), first: make(chan struct{}), socket: path, served: make(chan error, 1), gate: newGate()}
	cl.srv = &http.Server{Handler: cl.services(), ReadHeaderTimeout: 5 * time.Second}
	go func() { cl.served <- cl.srv.Serve(ln) }()
	return cl, nil
}

// Socket is where the Client's children call back.
func (cl *Client) Socket() string { return cl.socket }

// Close stops serving the children's calls.
func (cl *Client) Close() error {
	cl.once.Do(func() { close(cl.first) })
	err := cl.srv.Close()
	<-cl.served
	return err
}

// Socket returns an HTTP client that reaches a process listening on the
// Unix socket at path (a child's, or the parent's).
func Socket(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 64,
	}}
}

// Swap makes c the client new dispatches go through (nil: none) and h the
// hello its child answered (Ready), whose routes the parent's router
// mirrors from then on (a nil c keeps the last routes), and wakes the
// dispatches waiting for one.
func (cl *Client) Swap(c *http.Client, h Hello) {
	if c != nil {
		cl.mirror.Store(cl.mirrorOf(h.Routes))
		defer cl.once.Do(func() { close(cl.first) })
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.cur = c
	close(cl.changed)
	cl.changed = make(chan struct{})
}

// current is the child dispatches go to now, and a channel closed when it
// changes.
func (cl *Client) current() (*http.Client, <-chan struct{}) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.cur, cl.changed
}

// Router returns the parent's router: it routes by the current child's
// routes (from its hello: the same prefixes, types, route queues and
// debounce, so the worker hands long work to its queue and buffers bursts
// as it would in one process), and every handler forwards the event to the
// child, whose router runs it. Until the first child has said hello,
// routing an event waits for it (or for Close). Standby events never leave
// the parent.
func (cl *Client) Router() *bot.Router {
	r := bot.NewRouter()
	r.Default(cl.Forward)
	botbridge.Delegate.(func(*bot.Router, func() *bot.Router))(r, cl.routes)
	return r
}

// routes is the router of the current child's routes, once the first one
// has said hello; nil after a Close without one (r's own Default then).
func (cl *Client) routes() *bot.Router {
	<-cl.first
	return cl.mirror.Load()
}

// Forward is a bot.Handler running e in the current child, with what the
// worker bound to the record in ctx (worker.BoundOf) serving the child's
// calls. A handler error comes back with its class; a handler panic is
// re-raised here as a Panic. While no child can be reached — none yet, or
// one rebuilt or dead and being started again — it waits for the next
// (Swap), up to ctx's end: the child never got the event, so sending it
// to the next one is safe. A child that dies during the call fails it (the
// handler may have done part of its work, as in a crashed Lambda) and
// makes the event a suspect, which runs alone until it runs on a child
// that lives (gate.go).
func (cl *Client) Forward(ctx context.Context, e *bot.Event) error {
	key := e.WebhookEventID
	if key == "" {
		key = string(e.Raw)
	}
	leave, err := cl.gate.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoBot, err)
	}
	defer leave()
	defer func() {
		if v := recover(); v != nil {
			cl.gate.clear(key) // its child lived to report the panic
			panic(v)
		}
	}()
	err = cl.forward(ctx, e)
	if errors.Is(err, errChildDied) {
		cl.gate.suspect(key)
	} else if !errors.Is(err, ErrNoBot) {
		cl.gate.clear(key)
	}
	return err
}

// errChildDied marks a dispatch the child did not live to answer.
var errChildDied = errors.New("botproc: the bot process failed during the dispatch (did it exit?)")

func (cl *Client) forward(ctx context.Context, e *bot.Event) error {
	c := call{Event: e.Raw, Destination: e.Destination, ReceivedAt: e.ReceivedAt}
	if b, ok := worker.BoundOf(ctx); ok {
		c.ID = strconv.FormatUint(cl.seq.Add(1), 10)
		c.Messenger, c.Steps, c.Sessions = b.Messenger != nil, b.Steps != nil, b.Sessions != nil
		cl.calls.Store(c.ID, &inFlight{ctx: ctx, bound: b})
		defer cl.calls.Delete(c.ID)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("botproc: %w", err)
	}
	for {
		child, changed := cl.current()
		if child == nil {
			if err := waitFor(ctx, changed); err != nil {
				return err
			}
			continue
		}
		err := cl.forwardTo(ctx, child, body)
		if !unreachable(err) {
			return err
		}
		if err := waitFor(ctx, changed); err != nil {
			return err
		}
	}
}

// waitFor waits until changed is closed or ctx ends (ErrNoBot then).
func waitFor(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNoBot, ctx.Err())
	}
}

// unreachable reports whether err is a failure to reach the child at all
// (no socket, nobody listening): the event never got to it.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// forwardTo makes one dispatch to child.
func (cl *Client) forwardTo(ctx context.Context, child *http.Client, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://bot"+pathDispatch, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("botproc: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(headerDeadline, strconv.FormatInt(dl.UnixNano(), 10))
	}
	resp, err := child.Do(req)
	if err != nil {
		if unreachable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("botproc: dispatch: %w", ctx.Err())
		}
		return fmt.Errorf("%w: %w", errChildDied, err)
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
	if a.Panic != "" {
		panic(Panic{Message: a.Panic, Stack: []byte(a.Stack)})
	}
	return a.Error.decode()
}
