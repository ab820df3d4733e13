package local

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/internal/xraycollector"
)

// consoleState is what the browser console (internal/console) keeps in the
// runtime: the stream of change notifications, the chat transcript and
// per-event activity, and the log ring the functions' JSON logs are teed to.
type consoleState struct {
	hub   *console.Hub
	store *console.Store
	logs  *console.LogRing
}

func newConsoleState(events int) consoleState {
	hub := console.NewHub()
	return consoleState{hub: hub, store: console.NewStore(0, min(max(events, 1), console.DefaultActivity), hub.Notify),
		logs: console.NewLogRing(0, hub.Notify)}
}

// consoleRoutes serves the console at "/" and the endpoints it reads and
// acts through under /_local/. Reads are GETs; every action is a JSON POST
// from the page's own origin (console.Action).
func (r *Runtime) consoleRoutes(mux *http.ServeMux) {
	assets := console.Assets()
	mux.Handle("GET /{$}", assets)
	mux.Handle("GET "+console.AssetPrefix, assets)
	mux.Handle("GET /_local/stream", r.console.hub)
	mux.Handle("GET /_local/chats", r.console.store.ChatsHandler())
	mux.Handle("GET /_local/chat", r.console.store.TranscriptHandler())
	mux.Handle("GET /_local/logs", r.console.logs.Handler())
	mux.HandleFunc("GET /_local/pipeline", func(w http.ResponseWriter, _ *http.Request) { console.WriteJSON(w, 200, r.pipeline()) })
	mux.HandleFunc("GET /_local/activity", r.serveActivity)
	mux.HandleFunc("GET /_local/activity/{id}", r.serveActivityDetail)
	mux.Handle("/_local/send", console.Action(http.HandlerFunc(r.serveSend)))
	mux.Handle("/_local/redrive", console.Action(http.HandlerFunc(r.serveRedrive)))
	mux.Handle("/_local/replay", console.Action(http.HandlerFunc(r.serveReplay)))
	mux.Handle("/_local/workers/crash", console.Action(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.CrashWorkers()
		r.console.hub.Notify(console.TopicPipeline, console.TopicQueues)
		console.WriteJSON(w, 200, map[string]string{"result": "workers crashed: in-flight batches abandoned, pollers restarted"})
	})))
	if r.line != nil {
		mux.Handle("/_local/line/faults", console.Action(http.HandlerFunc(r.serveFault)))
	}

	r.console.hub.Watch(console.TopicQueues, func() string {
		qs, err := r.queueViews(r.rctx)
		if err != nil {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(qs)
		return string(b)
	})
	r.console.hub.Watch(console.TopicAlarms, func() string {
		b, _ := json.Marshal(r.alarms.views())
		return string(b)
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.rctx.Done():
				return
			case <-r.collector.Changed():
				r.console.hub.Notify(console.TopicTraces)
			}
		}
	}()
}

// observeReceive books one worker receive in the console's activity.
func (r *Runtime) observeReceive(res worker.Result) {
	rc := console.Receive{At: time.Now(), ReceiveCount: res.ReceiveCount, Outcome: string(res.Outcome), Queue: res.Queue, Long: res.Long,
		DurationMs: float64(res.Duration.Microseconds()) / 1e3, RetryInMs: float64(res.RetryIn.Milliseconds()), Panicked: res.Panicked,
		DeadLetterReason: res.DeadLetterReason, TraceID: res.TraceID}
	if res.Err != nil {
		rc.Error = res.Err.Error()
	}
	r.console.store.Observe(cmp.Or(res.WebhookEventID, res.MessageID), rc)
}

// pipelineView is the template's topology as the console draws it, with
// what the page needs to know about this run.
type pipelineView struct {
	Bus       string           `json:"bus"`
	TimeScale float64          `json:"timeScale"`
	Operators []string         `json:"operators"`
	RealLINE  bool             `json:"realLine"`
	Bot       linemock.BotInfo `json:"bot"`
	// Channels are the named channels beside the default one: the
	// console's chat phone can chat with either.
	Channels  []string       `json:"channels"`
	Functions []functionView `json:"functions"`
	Rules     []ruleView     `json:"rules"`
	Queues    []queueInfo    `json:"queues"`
	Alarms    []alarmInfo    `json:"alarms"`
}

type functionView struct {
	LogicalID string `json:"logicalId"`
	Name      string `json:"name"`
	// Trigger is "api", "sqs", "sns" or "schedule"; Role what the runtime
	// runs it as ("webhook", "worker", "notifier", "scheduled"); Reads the
	// queues it polls; Sends the queues its environment names (the
	// webhook's chat queue, the worker's long-work queue).
	Trigger string   `json:"trigger"`
	Role    string   `json:"role"`
	Reads   []string `json:"reads,omitempty"`
	Sends   []string `json:"sends,omitempty"`
}

type ruleView struct {
	Name    string          `json:"name"`
	Pattern json.RawMessage `json:"pattern,omitempty"`
	Targets []targetView    `json:"targets"`
}

type targetView struct {
	Queue          string `json:"queue,omitempty"` // logical id
	DLQ            string `json:"dlq,omitempty"`
	MessageGroupID string `json:"messageGroupId,omitempty"`
}

type queueInfo struct {
	LogicalID       string  `json:"logicalId"`
	Name            string  `json:"name"`
	FIFO            bool    `json:"fifo"`
	DeadLetter      bool    `json:"deadLetter"`
	DLQ             string  `json:"dlq,omitempty"`
	Source          string  `json:"source,omitempty"` // for a DLQ: the queue that redrives to it
	MaxReceiveCount int     `json:"maxReceiveCount,omitempty"`
	VisibilityS     float64 `json:"visibilityTimeoutSeconds"`
}

type alarmInfo struct {
	Name   string `json:"name"`
	Metric string `json:"metric"`
	Queue  string `json:"queue,omitempty"` // logical id of the queue it watches
}

func (r *Runtime) pipeline() pipelineView {
	v := pipelineView{Bus: DefaultBus, TimeScale: r.cfg.TimeScale, RealLINE: r.realLINE, Bot: linemock.DefaultBotInfo,
		Operators: strings.Split(orDefault(r.cfg.Getenv("OPERATOR_LINE_IDS"), DefaultOperator), ","), Channels: r.Channels()}
	if v.Channels == nil {
		v.Channels = []string{}
	}
	if len(r.top.Buses) > 0 {
		v.Bus = r.top.Buses[0].Name
	}
	byURL := map[string]string{}
	for _, q := range r.top.Queues {
		byURL[q.URL] = q.LogicalID
	}
	for _, f := range r.top.Functions {
		fv := functionView{LogicalID: f.LogicalID, Name: f.Name}
		switch {
		case len(f.APIEvents) > 0:
			fv.Trigger, fv.Role = "api", "webhook"
		case len(f.SQSEvents) > 0 && r.readsTopic(f):
			fv.Trigger, fv.Role = "sqs", "notifier"
		case len(f.SQSEvents) > 0:
			fv.Trigger, fv.Role = "sqs", "worker"
		case len(f.SNSEvents) > 0:
			fv.Trigger, fv.Role = "sns", "notifier"
		case len(f.ScheduleEvents) > 0:
			fv.Trigger, fv.Role = "schedule", "scheduled"
		}
		for _, m := range f.SQSEvents {
			fv.Reads = append(fv.Reads, m.Queue)
		}
		for _, val := range f.Env {
			if id, ok := byURL[val]; ok && !slices.Contains(fv.Reads, id) && !slices.Contains(fv.Sends, id) {
				fv.Sends = append(fv.Sends, id)
			}
		}
		slices.Sort(fv.Sends)
		v.Functions = append(v.Functions, fv)
	}
	for _, rule := range r.top.Rules {
		rv := ruleView{Name: rule.Name, Pattern: rule.Pattern, Targets: []targetView{}}
		for _, t := range rule.Targets {
			rv.Targets = append(rv.Targets, targetView{Queue: t.QueueLogicalID, DLQ: t.DLQLogicalID, MessageGroupID: t.MessageGroupID})
		}
		v.Rules = append(v.Rules, rv)
	}
	for _, q := range r.sortedQueues() {
		qi := queueInfo{LogicalID: q.LogicalID, Name: q.Name, FIFO: q.FIFO, DeadLetter: r.isDLQ(q), DLQ: q.RedriveTarget,
			MaxReceiveCount: q.MaxReceiveCount, VisibilityS: q.VisibilityTimeout.Seconds()}
		for _, o := range r.top.Queues {
			if o.RedriveTarget == q.LogicalID {
				qi.Source = o.LogicalID
			}
		}
		v.Queues = append(v.Queues, qi)
	}
	for _, a := range r.top.Alarms {
		ai := alarmInfo{Name: a.Name, Metric: a.Namespace + " " + a.MetricName}
		if q, ok := r.queueByName(a.Dimensions["QueueName"]); ok {
			ai.Queue = q.LogicalID
		}
		v.Alarms = append(v.Alarms, ai)
	}
	return v
}

// activityRow is one webhook event in the console's Events table: the
// event log's entry with the chat it came from and its latency.
type activityRow struct {
	EventOutcome
	Chat       string    `json:"chat,omitempty"`
	SourceType string    `json:"sourceType,omitempty"`
	ReceivedAt time.Time `json:"receivedAt,omitzero"`
	// LatencyMs is from the webhook's receipt to the end of the receive
	// that handled it (0 while it is not handled).
	LatencyMs float64 `json:"latencyMs,omitempty"`
}

func (r *Runtime) row(e EventOutcome) activityRow {
	row := activityRow{EventOutcome: e}
	if a, ok := r.console.store.Activity(e.WebhookEventID); ok {
		row.Chat, row.SourceType, row.ReceivedAt = a.Chat, a.SourceType, a.ReceivedAt
		if !a.HandledAt.IsZero() {
			row.LatencyMs = float64(a.HandledAt.Sub(a.ReceivedAt).Microseconds()) / 1e3
		}
	}
	return row
}

// serveActivity answers GET /_local/activity[?limit=N] (default 200): the
// newest events first.
func (r *Runtime) serveActivity(w http.ResponseWriter, req *http.Request) {
	limit := 200
	if n, err := strconv.Atoi(req.URL.Query().Get("limit")); err == nil && n > 0 {
		limit = n
	}
	all := r.events.list()
	out := []activityRow{}
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, r.row(all[i]))
	}
	console.WriteJSON(w, http.StatusOK, out)
}

// activityDetail is one event opened in the console: its row, what the
// console recorded of it (raw event, receives), its timeline, and the
// X-Ray traces it went through: the webhook's and each receive's, linked.
type activityDetail struct {
	Row      activityRow           `json:"row"`
	Activity console.Activity      `json:"activity"`
	Steps    []console.Step        `json:"steps"`
	Traces   []xraycollector.Trace `json:"traces"`
}

// serveActivityDetail answers GET /_local/activity/{id}.
func (r *Runtime) serveActivityDetail(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	var ev EventOutcome
	found := false
	for _, e := range r.events.list() {
		if e.WebhookEventID == id {
			ev, found = e, true
		}
	}
	a, known := r.console.store.Activity(id)
	if !found && !known {
		console.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no such webhookEventId in the event log"})
		return
	}
	if !found {
		ev = EventOutcome{WebhookEventID: id, Type: a.Type, Outcome: outcomeQueued}
	}
	traces := map[string]xraycollector.Trace{}
	var ordered []xraycollector.Trace
	want := []string{ev.TraceID}
	for _, rc := range a.Receives {
		want = append(want, rc.TraceID)
	}
	for _, t := range want {
		if _, seen := traces[t]; t == "" || seen {
			continue
		}
		if tr, ok := r.collector.Trace(t); ok {
			traces[t] = tr
			ordered = append(ordered, tr)
		}
	}
	if a.Receives == nil {
		a.Receives = []console.Receive{}
	}
	console.WriteJSON(w, http.StatusOK, activityDetail{Row: r.row(ev), Activity: a, Steps: console.Timeline(a, ev.TraceID, traces),
		Traces: append([]xraycollector.Trace{}, ordered...)})
}
