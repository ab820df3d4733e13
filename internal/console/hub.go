package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Topics the page refreshes when the Hub says they changed.
const (
	TopicChat     = "chat"     // the transcript: a user event, a bot send, a loading animation
	TopicEvents   = "events"   // the event log and per-event activity
	TopicQueues   = "queues"   // queue depths (watched: polled while a page listens)
	TopicAlarms   = "alarms"   // alarm states and history
	TopicLogs     = "logs"     // the log ring
	TopicTraces   = "traces"   // X-Ray segments arrived
	TopicPipeline = "pipeline" // faults injected, workers crashed
)

// Hub fans out change notifications to the pages listening on the
// server-sent event stream: "event: change" with the topics that changed
// ({"topics":["chat","events"]}); the page then fetches those endpoints.
// Notifications are coalesced (at most one message per Coalesce per page),
// so a burst of a thousand events costs a page a few fetches. Topics without
// a natural hook (queue depths) are watched: their fingerprint is polled
// every Poll while at least one page listens, and a change is notified.
//
// The zero value is not usable: build it with NewHub.
type Hub struct {
	coalesce, poll, keepAlive time.Duration

	mu      sync.Mutex
	subs    map[chan struct{}]*pending
	watches []watch
	closed  bool
	done    chan struct{}
}

type pending struct{ topics map[string]bool }

type watch struct {
	topic       string
	fingerprint func() string
}

// NewHub returns a Hub with the default timings: 100 ms coalescing, 500 ms
// polling of watched topics, a keep-alive comment every 15 s.
func NewHub() *Hub {
	return &Hub{coalesce: 100 * time.Millisecond, poll: 500 * time.Millisecond, keepAlive: 15 * time.Second,
		subs: map[chan struct{}]*pending{}, done: make(chan struct{})}
}

// Notify marks topics changed for every listening page. It never blocks.
func (h *Hub) Notify(topics ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for wake, p := range h.subs {
		for _, t := range topics {
			p.topics[t] = true
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// Watch polls fingerprint while a page listens and notifies topic whenever
// the fingerprint differs from the last one seen. Call it before serving.
func (h *Hub) Watch(topic string, fingerprint func() string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watches = append(h.watches, watch{topic: topic, fingerprint: fingerprint})
}

// Close ends every stream (http.Server.RegisterOnShutdown: a stream never
// goes idle, so Shutdown alone would wait for it) and refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

func (h *Hub) subscribe() (chan struct{}, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	wake := make(chan struct{}, 1)
	h.subs[wake] = &pending{topics: map[string]bool{}}
	return wake, true
}

func (h *Hub) unsubscribe(wake chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, wake)
}

// take returns and clears the topics pending for one page, sorted.
func (h *Hub) take(wake chan struct{}) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.subs[wake]
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.topics))
	for t := range p.topics {
		out = append(out, t)
	}
	clear(p.topics)
	slices.Sort(out)
	return out
}

// ServeHTTP streams notifications to one page until it goes away or the
// Hub closes. The stream starts with "event: hello" so the page knows it is
// live (and fetches everything once).
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	wake, ok := h.subscribe()
	if !ok {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.unsubscribe(wake)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(s string) bool {
		// The server's WriteTimeout would cut a stream after a minute: each
		// write gets its own deadline instead.
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 1000\nevent: hello\ndata: {}\n\n") {
		return
	}
	h.mu.Lock()
	watches := slices.Clone(h.watches)
	h.mu.Unlock()
	last := make([]string, len(watches))
	for i, wt := range watches {
		last[i] = wt.fingerprint()
	}
	poll := time.NewTicker(h.poll)
	defer poll.Stop()
	alive := time.NewTicker(h.keepAlive)
	defer alive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-alive.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-poll.C:
			var changed []string
			for i, wt := range watches {
				if fp := wt.fingerprint(); fp != last[i] {
					last[i] = fp
					changed = append(changed, wt.topic)
				}
			}
			if len(changed) > 0 {
				h.Notify(changed...)
			}
		case <-wake:
			// Let a burst gather before telling the page.
			select {
			case <-time.After(h.coalesce):
			case <-r.Context().Done():
				return
			case <-h.done:
				return
			}
			topics := h.take(wake)
			if len(topics) == 0 {
				continue
			}
			b, _ := json.Marshal(map[string][]string{"topics": topics})
			if !write("event: change\ndata: " + string(b) + "\n\n") {
				return
			}
		}
	}
}
