// Package testio is test support for code that writes from several
// goroutines and serves connections: a buffer safe for concurrent writes (a
// console, captured logs), a client that stalls a connection (a slowloris)
// and reports when the server closed it, and a server that counts the
// connections a client's bursts need (keep-alive pools).
package testio

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects writes from any goroutine.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Stall connects to addr, writes payload (a request cut short) and sends
// nothing more. The channel gets how long after the connect the server
// closed the connection, or, after giveUp, giveUp itself with false.
func Stall(t testing.TB, addr, payload string, giveUp time.Duration) <-chan Closed {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	begin := time.Now()
	if _, err := io.WriteString(conn, payload); err != nil {
		t.Fatal(err)
	}
	out := make(chan Closed, 1)
	go func() {
		_ = conn.SetReadDeadline(begin.Add(giveUp))
		_, err := io.Copy(io.Discard, conn)
		ne, ok := err.(net.Error)
		out <- Closed{After: time.Since(begin), ByServer: !(ok && ne.Timeout())}
	}()
	return out
}

// Closed is how a stalled connection ended.
type Closed struct {
	After    time.Duration
	ByServer bool // false: still open when the client gave up
}

// Dials counts the connections a test server accepts and holds each
// request until n are in flight at once, so a client's burst of n
// concurrent requests really needs n connections.
type Dials struct {
	URL string

	mu      sync.Mutex
	dials   int
	waiting int
	release chan struct{}
	n       int
}

// NewDials starts a test server for bursts of n requests; it is closed
// when the test ends.
func NewDials(t testing.TB, n int) *Dials {
	t.Helper()
	d := &Dials{n: n, release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			d.mu.Lock()
			d.dials++
			d.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

func (d *Dials) serve(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	d.waiting++
	if d.waiting == d.n {
		close(d.release)
		d.release, d.waiting = make(chan struct{}), 0
		d.mu.Unlock()
	} else {
		ch := d.release
		d.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(5 * time.Second): // a client that cannot make n at once
		}
	}
	_, _ = io.WriteString(w, "ok")
}

// Burst sends n concurrent GETs with c (n as given to NewDials), reads
// every body, and returns how many new connections the server accepted
// for them.
func (d *Dials) Burst(t testing.TB, c *http.Client) int {
	t.Helper()
	d.mu.Lock()
	before := d.dials
	d.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, d.n)
	for range d.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(d.URL)
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials - before
}
