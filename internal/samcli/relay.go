package samcli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Relay is a plain TCP forwarder: every connection accepted on its address is
// joined to a new connection to its target, bytes copied both ways unchanged
// (so an HTTP request keeps its Host header: host.docker.internal:3000, which
// linegate local's loopback guard accepts). It exists because a container's
// host.docker.internal is the Docker bridge's gateway on Linux while
// linegate local serves loopback only.
//
// A connection whose target refuses is closed at once (the function sees a
// reset, as with no server at all) and reported to the WithDialErrors hook.
type Relay struct {
	ln      net.Listener
	timeout time.Duration
	onError func(error)

	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	closed bool

	wg sync.WaitGroup
}

// RelayOption configures Listen.
type RelayOption func(*Relay)

// WithDialErrors calls f (from the relay's goroutines) with each failure to
// reach the target.
func WithDialErrors(f func(error)) RelayOption { return func(r *Relay) { r.onError = f } }

// WithDialTimeout bounds each connection to the target (default 5 s).
func WithDialTimeout(d time.Duration) RelayOption {
	return func(r *Relay) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// Listen starts a relay listening on addr (host:port) and forwarding to
// target (host:port). A busy or unavailable address is an error naming it.
func Listen(addr, target string, opts ...RelayOption) (*Relay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay: listen on %s: %w", addr, err)
	}
	r := &Relay{ln: ln, timeout: 5 * time.Second, target: target, conns: map[net.Conn]struct{}{}}
	for _, o := range opts {
		o(r)
	}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the address the relay listens on.
func (r *Relay) Addr() net.Addr { return r.ln.Addr() }

// Target is where new connections go.
func (r *Relay) Target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

// SetTarget sends new connections to target; connections already joined
// keep theirs.
func (r *Relay) SetTarget(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = target
}

// Close stops listening, closes every connection still open and waits for
// the relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (too many open files): try again
			// shortly rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go r.join(c)
	}
}

// track registers c so Close can end it; false once the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

// join dials the target for the accepted connection c and copies both ways
// until both directions are done.
func (r *Relay) join(c net.Conn) {
	defer r.wg.Done()
	defer r.untrack(c)
	defer c.Close()
	target := r.Target()
	u, err := net.DialTimeout("tcp", target, r.timeout)
	if err != nil {
		if r.onError != nil {
			r.onError(fmt.Errorf("relay: %s → %s: %w", c.RemoteAddr(), target, err))
		}
		return
	}
	if !r.track(u) {
		u.Close()
		return
	}
	defer r.untrack(u)
	defer u.Close()
	done := make(chan struct{}, 2)
	go pipe(u, c, done)
	go pipe(c, u, done)
	<-done
	<-done
}

// pipe copies src to dst, then half-closes dst's write side (the peer reads
// EOF as it would from a direct connection).
func pipe(dst, src net.Conn, done chan<- struct{}) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
	done <- struct{}{}
}
