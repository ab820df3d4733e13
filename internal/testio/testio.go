// Package testio is test support for code that writes from several
// goroutines and serves connections: a buffer safe for concurrent writes (a
// console, captured logs) and a client that stalls a connection (a
// slowloris) and reports when the server closed it.
package testio

import (
	"io"
	"net"
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
