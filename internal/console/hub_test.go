package console

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sse reads one stream's events.
type sse struct {
	events chan [2]string // event name, data
}

func listen(t *testing.T, ctx context.Context, url string) *sse {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	s := &sse{events: make(chan [2]string, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && name != "":
				s.events <- [2]string{name, data}
				name, data = "", ""
			}
		}
	}()
	return s
}

// next waits for the next event, failing after the deadline with what it
// was waiting for.
func (s *sse) next(t *testing.T, what string) [2]string {
	t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			t.Fatalf("stream ended while waiting for %s", what)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("no event within 5 s while waiting for %s", what)
	}
	return [2]string{}
}

func TestHubCoalescesWatchesAndCloses(t *testing.T) {
	h := NewHub()
	h.coalesce, h.poll = 50*time.Millisecond, 20*time.Millisecond
	var mu sync.Mutex
	depth := 0
	h.Watch(TopicQueues, func() string { mu.Lock(); defer mu.Unlock(); return strconv.Itoa(depth) })
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := listen(t, ctx, srv.URL)
	if e := s.next(t, "hello"); e[0] != "hello" {
		t.Fatalf("first event %v, want hello", e)
	}
	// A burst is one message naming every topic.
	h.Notify(TopicChat)
	h.Notify(TopicEvents, TopicChat)
	if e := s.next(t, "the burst"); e[0] != "change" || e[1] != `{"topics":["chat","events"]}` {
		t.Fatalf("burst gave %v, want one change for chat and events", e)
	}
	// A watched fingerprint that changes is a change of its topic.
	mu.Lock()
	depth = 3
	mu.Unlock()
	if e := s.next(t, "the watched change"); e[1] != `{"topics":["queues"]}` {
		t.Fatalf("watch gave %v", e)
	}
	// Close ends the stream (the server's shutdown hook) and refuses new ones.
	h.Close()
	select {
	case _, ok := <-s.events:
		if ok {
			t.Fatal("an event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end at Close")
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream after Close: %d, want 503", resp.StatusCode)
	}
}
