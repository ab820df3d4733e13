package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/compose/quotafn"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/quota"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/internal/worker"
)

// newLINE builds the local Messaging API the way LINE behaves for this
// channel: it issues stateless tokens to the local channel ID and secret
// (15 minutes, compressed by the time scale, so the functions refresh
// them), still accepts the fixed local token (the CLI's), knows the
// webhook URL with "Use webhook" and redelivery on, and answers the test
// delivery by signing and posting a test webhook to this runtime.
func (r *Runtime) newLINE() *linemock.Server {
	secret := orDefault(r.cfg.Getenv("LINE_CHANNEL_SECRET"), DefaultSecret)
	token := DefaultToken
	if r.cfg.Token != "" {
		token = r.cfg.Token // bound beyond loopback: only the remote token
	}
	m := linemock.New(
		linemock.WithTokens(token),
		linemock.WithMaxRecords(r.cfg.LineRecords),
		linemock.WithOnLoading(func(c linemock.LoadingCall) {
			r.out.loading(c.ChatID, c.Seconds)
			r.console.store.Loading(c.ChatID, c.Seconds, c.At)
		}),
		linemock.WithOnRead(func(m linemock.ReadMark) {
			r.out.read(m.Chat)
			r.console.store.Read(m.Chat, m.MessageID, m.At)
		}),
		linemock.WithOnRecord(func(rec linemock.Record) {
			r.console.store.Sent(rec.To, string(rec.Via), rec.RetryKey, rec.RequestID, rec.Messages, rec.At)
		}),
		linemock.WithChannel(DefaultChannelID, secret),
		linemock.WithTokenTTL(max(scaled(linemock.StatelessTokenTTL, r.cfg.TimeScale), 5*time.Second)),
		linemock.WithWebhookTester(func(ctx context.Context, endpoint string) (int, string) {
			return testDelivery(ctx, endpoint, secret)
		}),
	)
	return m
}

// testDelivery posts LINE's test webhook (an empty events array, as the
// console's Verify sends) signed with secret, and reports the answer.
func testDelivery(ctx context.Context, endpoint, secret string) (int, string) {
	body := []byte(`{"destination":"` + linemock.DefaultBotInfo.UserID + `","events":[]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", lineplatform.UserAgent)
	req.Header.Set(signature.Header, signature.Sign([]byte(secret), body))
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, "no answer: " + err.Error()
	}
	_ = res.Body.Close()
	return res.StatusCode, http.StatusText(res.StatusCode)
}

// localLINEEnv points a function at the local channel: stateless tokens
// minted from the local channel ID and secret.
func (r *Runtime) localLINEEnv(env map[string]string) {
	// Beyond loopback every path but the webhook needs the printed token,
	// which the functions then use as a long-lived access token: a token
	// endpoint taking client credentials would be a way around the gate.
	if r.cfg.Getenv("LINE_TOKEN_MODE") == config.TokenLongLived || r.cfg.Token != "" {
		env["LINE_TOKEN_MODE"] = config.TokenLongLived
		return
	}
	env["LINE_TOKEN_MODE"] = config.TokenStateless
	env["LINE_CHANNEL_ID"] = DefaultChannelID
	env["LINE_ASSERTION_KEY_PARAM"] = ""
}

// localOpsEnv gives every function the runtime's ChatOps key (random per
// run: only this process knows it), the operators, and the local URLs of
// the template's queues.
func (r *Runtime) localOpsEnv(env map[string]string) {
	if r.chatOpsKey == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		r.chatOpsKey = hex.EncodeToString(b)
	}
	env["CHATOPS_KEY_PARAM"] = ""
	env["CHATOPS_KEY"] = r.chatOpsKey
	env["OPERATOR_LINE_IDS"] = orDefault(r.cfg.Getenv("OPERATOR_LINE_IDS"), DefaultOperator)
	for k, v := range env {
		for _, q := range r.top.Queues {
			if u := r.res.queueURL[q.LogicalID]; u != "" {
				v = replaceURL(v, q.URL, u)
			}
		}
		env[k] = v
	}
	scaledPagingEnv(env, r.cfg.TimeScale)
}

// replaceURL replaces old in v where it is the whole value, a whole item of
// a comma-separated list (ALERT_DLQS) or the URL of a name=URL item
// (ROUTE_QUEUES: "long=URL,reports=URL").
func replaceURL(v, old, new string) string {
	if !strings.Contains(v, old) {
		return v
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		if strings.TrimSpace(p) == old {
			parts[i] = new
		} else if name, url, ok := strings.Cut(p, "="); ok && url == old {
			parts[i] = name + "=" + new
		}
	}
	return strings.Join(parts, ",")
}

// startScheduled runs a function with Schedule events (the quota governor)
// at each event's rate, compressed by the time scale, and once at start.
func (r *Runtime) startScheduled(ctx, rctx context.Context, f template.Function, env config.Getenv) error {
	cfg, err := config.LoadQuota(env)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	c, m := r.common(f.Name)
	g, err := quotafn.New(ctx, cfg, r.ports.queues, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	run := func(ctx context.Context) {
		var st quota.Status
		err := r.invoke(ctx, f, m, func(ctx context.Context) (err error) {
			st, err = g.Run(ctx)
			return err
		})
		switch {
		case err != nil:
			r.out.line("quota     check failed: %v", err)
		case st.Level != "":
			r.out.line("quota     %.0f%% of the month's %d messages used (%s): card to %s (once a day)", st.Percent, st.Quota.Limit, st.Level, cfg.Operators[0])
		}
	}
	for _, ev := range f.ScheduleEvents {
		rate := ev.Every
		if rate <= 0 {
			rate = time.Hour // cron: not modelled locally, run hourly
		}
		period := max(scaled(rate, r.cfg.TimeScale), 100*time.Millisecond)
		r.wg.Add(1)
		go func() { defer r.wg.Done(); every(rctx, period, run) }()
	}
	return nil
}

// redriveAware tells the event log that a ChatOps redrive moved dead
// letters back to work, as the SQS shim does for `linegate redrive`.
type redriveAware struct {
	workerfn.Queues
	events *eventLog
	out    *printer
	scale  float64 // the in-memory cloud's time scale (1 on an endpoint: it does not compress delays)
}

// SendMessage delays a debounce flush (worker.AttrDebounce) in
// conversation time: the in-memory cloud divides every SQS delay by the time
// scale, and a chat's debounce window is the user's pause, which --time-scale
// must not shorten, so the delay is multiplied back (within SQS's 15
// minutes; the worker waits out whatever is left when the flush comes early).
func (q redriveAware) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if _, flush := in.MessageAttributes[worker.AttrDebounce]; flush && q.scale > 1 && in.DelaySeconds > 0 {
		c := *in
		c.DelaySeconds = int32(min(math.Ceil(float64(in.DelaySeconds)*q.scale), maxSQSDelay))
		in = &c
	}
	return q.Queues.SendMessage(ctx, in, optFns...)
}

// maxSQSDelay is SQS's longest DelaySeconds.
const maxSQSDelay = 900

func (q redriveAware) StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	out, err := q.Queues.StartMessageMoveTask(ctx, in, optFns...)
	if err == nil {
		q.events.redriven(queueNameOfARN(aws.ToString(in.SourceArn)))
		q.out.line("sqs       redrive started from %s (operator's tap)", aws.ToString(in.SourceArn))
	}
	return out, err
}

// Silence mutes an alarm's notifications until until, compressed by the
// time scale from now (the local side of ChatOps' Silence 1 h).
func (e *alarmEvaluator) Silence(_ context.Context, alarm string, until time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.alarms {
		if a.def.Name == alarm {
			a.silencedUntil = time.Now().Add(scaled(time.Until(until), e.r.cfg.TimeScale))
			e.r.out.line("alarm     %s silenced until %s", alarm, a.silencedUntil.Format("15:04:05"))
			return nil
		}
	}
	return fmt.Errorf("no alarm %q in this stack", alarm)
}

// silenced reports whether an alarm's actions are muted now.
func (e *alarmEvaluator) silenced(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.alarms {
		if a.def.Name == name {
			return time.Now().Before(a.silencedUntil)
		}
	}
	return false
}

// opsRoutes serves the local LINE channel's console: the quota and the
// webhook settings, and LINE's token endpoints.
func (r *Runtime) opsRoutes(mux *http.ServeMux) {
	mux.Handle("/_local/line/quota", r.line.QuotaHandler())
	mux.Handle("/_local/line/channel", r.line.ChannelHandler())
	mux.Handle("/oauth2/", r.line)
	mux.HandleFunc("GET /_local/topics", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, r.topics()) })
	r.line.SetChannel(linemock.Channel{Endpoint: r.WebhookURL(), Active: true, Redelivery: true})
}

// topicView is one topic and its subscribers, for /_local/topics (`linegate
// doctor` checks the ops and escalation topics'): a function's name, "sqs:"
// and the name of a queue the topic delivers to, or "email:" and an address
// (" (filtered)" when a filter policy limits what it gets).
type topicView struct {
	Name        string   `json:"name"`
	Subscribers []string `json:"subscribers"`
}

func (r *Runtime) topics() []topicView {
	out := []topicView{}
	for _, t := range r.top.Topics {
		v := topicView{Name: t.Name, Subscribers: []string{}}
		for _, f := range r.top.Functions {
			for _, s := range f.SNSEvents {
				if s.Topic == t.LogicalID {
					v.Subscribers = append(v.Subscribers, f.Name)
				}
			}
		}
		for _, s := range r.top.Subscriptions {
			if q, ok := r.queue(s.Queue); ok && s.Topic == t.LogicalID {
				v.Subscribers = append(v.Subscribers, "sqs:"+q.Name)
			}
			if s.Protocol == "email" && s.Topic == t.LogicalID {
				sub := "email:" + s.Endpoint
				if len(s.FilterPolicy) > 0 {
					sub += " (filtered)"
				}
				v.Subscribers = append(v.Subscribers, sub)
			}
		}
		out = append(out, v)
	}
	return out
}
