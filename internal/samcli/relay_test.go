package samcli

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoHost answers every request with its Host header and its body, and
// counts the connections it saw.
func echoHost(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, name+" "+r.Host+" "+string(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// post sends body through the relay as a container would: to the relay's
// address, with the Host header host.docker.internal:3000.
func post(t *testing.T, relay *Relay, body string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+relay.Addr().String()+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "host.docker.internal:3000"
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestRelayForwardsUnchangedAndFollowsItsTarget(t *testing.T) {
	a, b := echoHost(t, "a"), echoHost(t, "b")
	r, err := Listen("127.0.0.1:0", hostOf(a))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	big := strings.Repeat("x", 256<<10) // more than one read's worth
	got, err := post(t, r, big)
	if err != nil || got != "a host.docker.internal:3000 "+big {
		t.Fatalf("through the relay: %.60q, %v; want a's answer with the container's Host header and the whole body", got, err)
	}
	r.SetTarget(hostOf(b))
	if r.Target() != hostOf(b) {
		t.Fatalf("Target() = %s after SetTarget(%s)", r.Target(), hostOf(b))
	}
	if got, err := post(t, r, "again"); err != nil || got != "b host.docker.internal:3000 again" {
		t.Fatalf("after SetTarget: %q, %v; want b's answer", got, err)
	}
}

func TestRelayClosesAConnectionItsTargetRefuses(t *testing.T) {
	// A port nothing listens on: listen, note it, close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var mu sync.Mutex
	var reported []error
	r, err := Listen("127.0.0.1:0", dead, WithDialTimeout(5*time.Second), WithDialErrors(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := post(t, r, "x"); err == nil {
		t.Fatalf("a request through a relay whose target is down was answered: %q", got)
	}
	// The hook runs before the relay closes the connection the client saw
	// fail: it has run by now.
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.Is(reported[0], syscall.ECONNREFUSED) || !strings.Contains(reported[0].Error(), dead) {
		t.Fatalf("dial errors reported: %v; want one connection refused naming %s", reported, dead)
	}
}

func TestRelayListenOnABusyAddressSaysWhich(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Listen(l.Addr().String(), "127.0.0.1:1")
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("Listen on a busy %s: %v; want EADDRINUSE naming the address", l.Addr(), err)
	}
}

// Close ends connections still open (a keep-alive the function never
// closed) and returns once the relay's goroutines are done.
func TestRelayCloseEndsOpenConnections(t *testing.T) {
	a := echoHost(t, "a")
	r, err := Listen("127.0.0.1:0", hostOf(a))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: host.docker.internal:3000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "200 OK") {
		t.Fatalf("first answer: %q, %v", buf[:n], err)
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s with a keep-alive connection open")
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("the connection is still open after Close: read %q", buf[:n])
	}
	if _, err := net.Dial("tcp", r.Addr().String()); err == nil {
		t.Fatal("the relay still accepts after Close")
	}
}
