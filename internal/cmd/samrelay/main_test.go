package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer the test reads while run writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`samrelay: (127\.0\.0\.1:\d+) → `)

func TestRunRelaysUntilStopped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "linegate local, Host "+r.Host) }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--to", strings.TrimPrefix(srv.URL, "http://")}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	var addr string
	for addr == "" {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before listening: %v (%s)", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line within 30 s: %q", stdout.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/_local/events", nil)
	req.Host = "host.docker.internal:3000"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "linegate local, Host host.docker.internal:3000" {
		t.Fatalf("through samrelay: %q", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30 s of its context ending")
	}
}

func TestRunRefuses(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a busy address", []string{"--listen", busy.Addr().String()}, busy.Addr().String()},
		{"an argument", []string{"--listen", "127.0.0.1:0", "extra"}, `unexpected argument "extra"`},
		{"an unknown flag", []string{"--port-typo", "1"}, "flag provided but not defined"},
		{"an unreachable Docker", []string{"--docker-host", "unix:///nonexistent/docker.sock"}, "Docker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr lockedBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, tc.args, &stdout, &stderr)
			if err == nil {
				t.Fatalf("run %v succeeded: %s", tc.args, stdout.String())
			}
			if !strings.Contains(err.Error()+stderr.String(), tc.want) {
				t.Fatalf("run %v: %v (%s), want it to say %q", tc.args, err, stderr.String(), tc.want)
			}
			if tc.name == "an argument" && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("a usage error should wrap flag.ErrHelp: %v", err)
			}
		})
	}
}
