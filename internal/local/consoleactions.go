package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/linegate/linegate/internal/busredrive"
	"github.com/linegate/linegate/internal/cloud/pattern"
	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/redrive"
)

// serveSend answers POST /_local/send: the event the page asks for, built
// by the local LINE platform as LINE builds it, signed with the channel
// secret and posted to the webhook, exactly the way LINE delivers one.
func (r *Runtime) serveSend(w http.ResponseWriter, req *http.Request) {
	q, err := console.ParseSend(req.Body)
	if err != nil {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if q.Channel != "" && !slices.Contains(r.cfg.Channels, q.Channel) {
		console.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%q is not a channel of this linegate local (--channel)", q.Channel)})
		return
	}
	p := lineplatform.New(r.ChannelWebhookURL(q.Channel), []byte(r.channelSecret(q.Channel)),
		lineplatform.WithDestination(r.botUserID(q.Channel)))
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
// (the replay rule sends a chat's event to the replay queue, which the
// webhook sends on to the chat queue under the chat's own message group).
// The worker's idempotency then decides: an event already handled is a
// duplicate, anything else runs again.
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
	name := fmt.Sprintf("console-%d", now.UnixMilli())
	detail := envelope.AppendDetail(nil, a.Destination, a.Channel, a.Chat, a.ReceivedAt, a.Event)
	body := envelope.Encode(envelope.Head{ID: uuid.NewString(), DetailType: a.Type, Source: source, Account: r.top.AccountID,
		Region: r.top.Region, Time: now}, detail)
	// EventBridge adds "replay-name" to every event a replay sends.
	quoted, _ := json.Marshal(name)
	body = append(append(append([]byte(`{"replay-name":`), quoted...), ','), body[1:]...)
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
			if q.FIFO { // a template whose rule targets a FIFO queue: its one fixed group, as EventBridge would
				if t.MessageGroupID == "" {
					return sent, fmt.Errorf("replay %s: rule %s targets FIFO queue %s without a message group", id, rule.LogicalID, q.Name)
				}
				in.MessageGroupId = aws.String(t.MessageGroupID)
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
