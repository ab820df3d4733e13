package local

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// counters feed the Lambda Errors and API Gateway 4xx/5xx alarms.
type counters struct {
	mu  sync.Mutex
	cur counterSnapshot
}

type counterSnapshot struct {
	invoked  map[string]int
	errors   map[string]int
	apiCalls int
	api4xx   int
	api5xx   int
}

func newCounters() *counters { return &counters{cur: emptySnapshot()} }

func emptySnapshot() counterSnapshot {
	return counterSnapshot{invoked: map[string]int{}, errors: map[string]int{}}
}

func (c *counters) invoked(fn string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.invoked[fn]++
	if err != nil {
		c.cur.errors[fn]++
	}
}

func (c *counters) api(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.apiCalls++
	switch {
	case status >= 500:
		c.cur.api5xx++
	case status >= 400:
		c.cur.api4xx++
	}
}

// take returns the counts since the last take (one alarm period).
func (c *counters) take() counterSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur
	c.cur = emptySnapshot()
	return s
}

// queueView is one queue for /_local/queues.
type queueView struct {
	LogicalID  string `json:"logicalId"`
	Name       string `json:"name"`
	Visible    int    `json:"visible"`
	InFlight   int    `json:"inFlight"`
	DeadLetter bool   `json:"deadLetter"`
	OldestAgeS int    `json:"oldestAgeSeconds"`
}

func (r *Runtime) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_local/events", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.events.list()) })
	mux.HandleFunc("GET /_local/alarms", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.alarms.views()) })
	mux.HandleFunc("GET /_local/email", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.emails.list()) })
	mux.HandleFunc("GET /_local/alerts", r.serveAlerts)
	mux.HandleFunc("POST /_local/metrics", r.serveMetrics)
	mux.HandleFunc("GET /_local/queues", func(w http.ResponseWriter, req *http.Request) {
		out, err := r.queueViews(req.Context())
		if err != nil {
			writeJSON(w, 502, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, 200, out)
	})
	mux.Handle("GET /_local/traces", r.collector.Handler())
	if r.line != nil {
		mux.Handle("GET /_local/line/messages", r.line.MessagesHandler())
		mux.Handle("GET /_local/line/loading", r.line.LoadingHandler())
		mux.Handle("GET /_local/line/reads", r.line.ReadsHandler())
		var line http.Handler = r.line
		if r.model != nil {
			line = r.model.lineAPI(line)
		}
		mux.Handle("/v2/bot/", line)
		r.opsRoutes(mux)
	} else {
		none := func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, []any{}) }
		mux.HandleFunc("GET /_local/line/messages", none)
		mux.HandleFunc("GET /_local/line/loading", none)
		mux.HandleFunc("GET /_local/line/reads", none)
	}
	mux.Handle("POST /{$}", r.awsAPI())
	r.consoleRoutes(mux)
}

// queueViews is every queue of the template with its depth, by name.
func (r *Runtime) queueViews(ctx context.Context) ([]queueView, error) {
	out := []queueView{}
	for _, q := range r.sortedQueues() {
		st, err := r.back.stats(ctx, r.res.queueURL[q.LogicalID])
		if err != nil {
			return nil, err
		}
		out = append(out, queueView{LogicalID: q.LogicalID, Name: q.Name, Visible: st.Visible, InFlight: st.InFlight, DeadLetter: r.isDLQ(q),
			OldestAgeS: int(st.OldestAge.Seconds())})
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// eventHead reads the fields of a raw LINE event the runtime reports.
func eventHead(raw json.RawMessage) struct{ Type, WebhookEventID string } {
	var h struct {
		Type           string `json:"type"`
		WebhookEventID string `json:"webhookEventId"`
	}
	_ = json.Unmarshal(raw, &h)
	return struct{ Type, WebhookEventID string }{h.Type, h.WebhookEventID}
}
