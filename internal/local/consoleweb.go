package local

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/linegate/linegate/internal/busredrive"
	"github.com/linegate/linegate/internal/cloud/pattern"
	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/xraycollector"
	"github.com/linegate/linegate/pkg/envelope"
	"github.com/linegate/linegate/pkg/redrive"
	"github.com/linegate/linegate/pkg/worker"
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
	Functions []functionView   `json:"functions"`
	Rules     []ruleView       `json:"rules"`
	Queues    []queueInfo      `json:"queues"`
	Alarms    []alarmInfo      `json:"alarms"`
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
		Operators: strings.Split(orDefault(r.cfg.Getenv("OPERATOR_LINE_IDS"), DefaultOperator), ",")}
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

// serveSend answers POST /_local/send: the event the page asks for, built
// by the local LINE platform as LINE builds it, signed with the channel
// secret and posted to the webhook, exactly the way LINE delivers one.
func (r *Runtime) serveSend(w http.ResponseWriter, req *http.Request) {
	q, err := console.ParseSend(req.Body)
	if err != nil {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	secret := orDefault(r.cfg.Getenv("LINE_CHANNEL_SECRET"), DefaultSecret)
	p := lineplatform.New(r.WebhookURL(), []byte(secret),
		lineplatform.WithDestination(orDefault(r.cfg.Getenv("BOT_USER_ID"), linemock.DefaultBotInfo.UserID)))
	d, err := p.Deliver(req.Context(), q.Event(p))
	out := map[string]any{"webhookEventId": "", "status": 0}
	if len(d.WebhookEventIDs) > 0 {
		out["webhookEventId"] = d.WebhookEventIDs[0]
	}
	if n := len(d.Attempts); n > 0 {
		out["status"], out["latencyMs"] = d.Attempts[n-1].Status, float64(d.Attempts[n-1].Latency.Microseconds())/1e3
	}
	if err != nil {
		out["error"] = err.Error()
		console.WriteJSON(w, http.StatusBadGateway, out)
		return
	}
	console.WriteJSON(w, http.StatusOK, out)
}

// serveRedrive answers POST /_local/redrive {"queue": logical id or name}:
// a redrive-policy DLQ's messages are moved back to the queue that
// dead-letters into it (pkg/redrive: StartMessageMoveTask, waited for); a
// rule target's DLQ's events are put back on their rule's bus
// (internal/busredrive), as `linegate redrive` does.
func (r *Runtime) serveRedrive(w http.ResponseWriter, req *http.Request) {
	var in struct {
		Queue string `json:"queue"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"queue\": LOGICAL_ID}: " + err.Error()})
		return
	}
	q, ok := r.queue(in.Queue)
	if !ok {
		q, ok = r.queueByName(in.Queue)
	}
	if !ok || !r.isDLQ(q) {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%q is not a dead-letter queue of the template", in.Queue)})
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 15*time.Second)
	defer cancel()
	url := r.res.queueURL[q.LogicalID]
	defer r.console.hub.Notify(console.TopicQueues, console.TopicEvents)
	source := ""
	for _, o := range r.top.Queues {
		if o.RedriveTarget == q.LogicalID {
			source = r.res.queueURL[o.LogicalID]
		}
	}
	if source == "" {
		res, err := busredrive.Events(ctx, r.ports.queues, r.ports.events, url, busredrive.EventsOptions{})
		if err != nil {
			console.WriteJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		r.out.line("sqs       %s redriven onto the bus from the console: %d event(s)", q.Name, res.Put)
		console.WriteJSON(w, http.StatusOK, map[string]any{"queue": q.LogicalID, "moved": res.Put, "result": fmt.Sprintf("%d event(s) put back on the bus", res.Put)})
		return
	}
	res, err := redrive.Run(ctx, redrives{SQS: r.ports.queues, r: r}, url, redrive.Options{Destination: source, Wait: true, PollEvery: 50 * time.Millisecond})
	if err != nil {
		console.WriteJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	r.out.line("sqs       redrive of %s from the console: %d message(s) moved back", q.Name, res.Moved)
	console.WriteJSON(w, http.StatusOK, map[string]any{"queue": q.LogicalID, "moved": res.Moved, "status": res.Status,
		"result": fmt.Sprintf("%d message(s) moved back to their queue", res.Moved)})
}

// errNoRawEvent: the console no longer holds the event's JSON.
var errNoRawEvent = errors.New("the console no longer holds this event's JSON (it keeps the newest events)")

// serveReplay answers POST /_local/replay {"webhookEventId": ID}: the event
// goes through the bus's rules again the way an EventBridge archive replay
// sends it — the same envelope with a "replay-name" member and no trace
// header — to every queue target of every rule whose pattern matches it
// (the replay rule sends a chat's event to the chat queue under the message
// group "replay"). The worker's idempotency then decides: an event already
// handled is a duplicate, anything else runs again.
func (r *Runtime) serveReplay(w http.ResponseWriter, req *http.Request) {
	var in struct {
		WebhookEventID string `json:"webhookEventId"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil || in.WebhookEventID == "" {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"webhookEventId\": ID}"})
		return
	}
	targets, err := r.replay(req.Context(), in.WebhookEventID)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, errNoRawEvent) {
			status = http.StatusNotFound
		}
		console.WriteJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	r.console.hub.Notify(console.TopicQueues, console.TopicEvents)
	console.WriteJSON(w, http.StatusOK, map[string]any{"webhookEventId": in.WebhookEventID, "targets": targets})
}

// replay sends one event through the matching rules' queue targets, as a
// replay; it returns the queues it went to.
func (r *Runtime) replay(ctx context.Context, id string) ([]string, error) {
	a, ok := r.console.store.Activity(id)
	if !ok || len(a.Event) == 0 {
		return nil, errNoRawEvent
	}
	source := "line.webhook"
	for _, f := range r.top.Functions {
		if len(f.APIEvents) > 0 && f.Env["EVENT_SOURCE"] != "" {
			source = f.Env["EVENT_SOURCE"]
		}
	}
	now := time.Now()
	name := "console-" + strconv.FormatInt(now.UnixMilli(), 10)
	detail := envelope.AppendDetail(nil, a.Destination, a.Chat, a.ReceivedAt, a.Event)
	body := envelope.Encode(envelope.Head{ID: uuid.NewString(), DetailType: a.Type, Source: source, Account: r.top.AccountID,
		Region: r.top.Region, Time: now}, detail)
	// EventBridge adds "replay-name" to every event a replay sends.
	body = append([]byte(`{"replay-name":`+strconv.Quote(name)+`,`), body[1:]...)
	var sent []string
	for _, rule := range r.top.Rules {
		if len(rule.Pattern) == 0 || (rule.State != "" && rule.State != "ENABLED") {
			continue
		}
		p, err := pattern.Compile(rule.Pattern)
		if err != nil || !p.Match(body) {
			continue
		}
		for _, t := range rule.Targets {
			q, ok := r.queue(t.QueueLogicalID)
			if !ok {
				continue
			}
			in := &sqs.SendMessageInput{QueueUrl: aws.String(r.res.queueURL[q.LogicalID]), MessageBody: aws.String(string(body))}
			if q.FIFO {
				in.MessageGroupId = aws.String(cmp.Or(t.MessageGroupID, "replay"))
				in.MessageDeduplicationId = aws.String(uuid.NewString())
			}
			if _, err := r.ports.queues.SendMessage(ctx, in); err != nil {
				return sent, fmt.Errorf("replay %s to %s: %w", id, q.Name, err)
			}
			sent = append(sent, q.LogicalID)
		}
	}
	if len(sent) == 0 {
		return nil, fmt.Errorf("no rule of the bus matches the replayed event %s", id)
	}
	r.out.line("bus       event %s replayed from the console (%s) to %s", id, name, strings.Join(sent, ", "))
	return sent, nil
}

// Faults the console can inject into the local LINE API.
var consoleFaults = map[string]func(path string) linemock.Fault{
	"429":  func(p string) linemock.Fault { return linemock.Fault{Path: p, Status: http.StatusTooManyRequests} },
	"500":  func(p string) linemock.Fault { return linemock.Fault{Path: p, Status: http.StatusInternalServerError} },
	"slow": func(p string) linemock.Fault { return linemock.Fault{Path: p, Delay: 3 * time.Second} },
}

// serveFault answers POST /_local/line/faults {"fault": "429" | "500" |
// "slow" | "expired-reply-token", "times": N}: the next N replies and pushes
// (or, for an expired reply token, the next N replies, which LINE then
// refuses with "Invalid reply token" so the bot pushes instead) get it.
func (r *Runtime) serveFault(w http.ResponseWriter, req *http.Request) {
	var in struct {
		Fault string `json:"fault"`
		Times int    `json:"times"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	times := min(max(in.Times, 1), 100)
	switch mk, ok := consoleFaults[in.Fault]; {
	case ok:
		r.line.Inject(withTimes(mk(linemock.PathReply), times))
		r.line.Inject(withTimes(mk(linemock.PathPush), times))
	case in.Fault == "expired-reply-token":
		r.line.Inject(linemock.Fault{Path: linemock.PathReply, Status: http.StatusBadRequest, Message: linemock.MsgInvalidReplyToken, Times: times})
	default:
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `fault must be "429", "500", "slow" or "expired-reply-token"`})
		return
	}
	r.out.line("line      fault %s injected for the next %d LINE call(s) (console)", in.Fault, times)
	r.console.hub.Notify(console.TopicPipeline)
	console.WriteJSON(w, http.StatusOK, map[string]any{"fault": in.Fault, "times": times})
}

func withTimes(f linemock.Fault, n int) linemock.Fault { f.Times = n; return f }
