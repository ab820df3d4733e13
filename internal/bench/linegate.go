package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// alarmStateAlarm is CloudWatch's ALARM state as /_local/alarms reports it.
const alarmStateAlarm = "ALARM"

// timing is what the template says about retries, compressed by the time
// scale: how long a failed record waits before its next receive, how many
// receives it gets, and how often alarms are evaluated.
type timing struct {
	scale      float64
	visibility time.Duration // real time
	receives   int
	alarmEvery time.Duration // real time
}

// linegateTiming loads the template to pick the time scale: the requested
// one, lowered when it would make the work queues' visibility timeout
// shorter than 2×work+1 s. A record must never become visible again while
// its handler is still running: the time scale compresses the queue's
// timeout but not the handler's work, and re-receiving in-flight records
// would only measure the compression.
func linegateTiming(o Options) (timing, error) {
	top, err := template.Load(o.Template, local.TemplateParams(o.Params, nil))
	if err != nil {
		return timing{}, fmt.Errorf("load %s: %w", o.Template, err)
	}
	var vis time.Duration
	receives := 0
	for _, q := range top.Queues {
		if q.RedriveTarget != "" {
			vis = max(vis, q.VisibilityTimeout)
			receives = max(receives, q.MaxReceiveCount)
		}
	}
	period := time.Minute
	for _, a := range top.Alarms {
		if a.Period > 0 {
			period = min(period, a.Period)
		}
	}
	scale := o.TimeScale
	if need := 2*o.Work + time.Second; vis > 0 && time.Duration(float64(vis)/scale) < need {
		scale = max(1, float64(vis)/float64(need))
	}
	return timing{
		scale:      scale,
		visibility: time.Duration(float64(vis) / scale),
		receives:   receives,
		alarmEvery: max(time.Duration(float64(period)/scale), 50*time.Millisecond),
	}, nil
}

// runLinegate runs the traffic through the local linegate pipeline and
// accounts for every event.
func runLinegate(ctx context.Context, o Options, p plan, client *http.Client) (SystemResult, Accounting, float64, error) {
	tm, err := linegateTiming(o)
	if err != nil {
		return SystemResult{}, Accounting{}, 0, err
	}
	params := map[string]string{}
	for k, v := range o.Params {
		params[k] = v
	}
	// linegate polls with as many pollers as durable-direct (5 unless
	// Pollers says otherwise), not the template's 50: the comparison is of
	// designs at one size (`linegate bench --capacity` runs the template's).
	params["WorkerMaxConcurrency"] = strconv.Itoa(cmp.Or(o.Pollers, DefaultDirectPollers))
	fx := newSideEffects(len(p.kinds))
	rt, err := local.Start(ctx, local.Config{
		Template: o.Template, Params: params, Addr: "127.0.0.1:0", TimeScale: tm.scale,
		Getenv: func(string) string { return "" }, // never a real channel
		Logs:   o.Logs, Bot: func(config.Worker) *bot.Router { return newRouter(o.Work, fx) }, BusLatency: o.BusLatency,
		WorkerOptions: []worker.Option{worker.WithConcurrency(o.RecordConcurrency)},
		// The accounting reads every event and every send of the run.
		EventLogSize: 2*o.Events + 1000, LineRecords: 4*o.Events + 1000,
		StateDir: o.StateDir,
	})
	if err != nil {
		return SystemResult{}, Accounting{}, 0, fmt.Errorf("linegate: %w", err)
	}
	defer rt.Close()

	work, dlqs := workQueues(rt)
	var putFailures atomic.Int64
	webhookFailures := newChaosFailures(len(p.kinds))
	if o.Chaos {
		injectChaos(rt, o, p, &putFailures, webhookFailures)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watch := newAlarmWatch(rt, dlqAlarms(rt, dlqs), client)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); watch.run(wctx, max(tm.alarmEvery/2, 50*time.Millisecond)) }()

	t := target{
		name: SystemLinegate, webhookURL: rt.WebhookURL(), secret: []byte(local.DefaultSecret), line: rt.LINE(),
		crash: func(ctx context.Context) int {
			n := inFlight(rt, work)
			rt.CrashWorkers()
			return n
		},
		idle: func() bool { return messagesIn(rt, work) == 0 },
	}
	tr := drive(ctx, t, p, o, client)

	timeout := o.DrainTimeout
	if timeout <= 0 {
		timeout = time.Duration(tm.receives+1)*tm.visibility + 3*tm.alarmEvery + 2*o.Work + 10*time.Second
	}
	poison := p.poison()
	drained := drain(ctx, timeout, t.idle, func() bool {
		if !allEffects(rt.LINE(), p) {
			return false
		}
		if poison == 0 {
			return true
		}
		fired, notified := watch.result(rt.LINE())
		return messagesIn(rt, dlqs) == poison && len(fired) > 0 && len(notified) > 0
	})
	stopWatch()
	wg.Wait()

	recs := rt.LINE().Messages()
	res := measure(SystemLinegate, p, tr, recs, fx.counts(), o.LineTimeout, drained)
	acc := account(rt, p, tr, recs, dlqs, watch)
	acc.Injected = Injected{PutEventsFailures: int(putFailures.Load()), FlakyEvents: p.count(KindFlaky), WebhookFailures: webhookFailures.events()}
	for c, n := range rt.LINE().Calls() {
		if c.Path != linemock.PathReply && c.Path != linemock.PathPush {
			continue
		}
		switch c.Status {
		case http.StatusTooManyRequests:
			acc.Injected.Line429 += n
		case http.StatusInternalServerError:
			acc.Injected.Line500 += n
		}
	}
	return res, acc, tm.scale, nil
}

// workQueues returns the URLs of the queues workers poll and of their DLQs.
func workQueues(rt *local.Runtime) (work, dlqs []string) {
	polled := map[string]bool{}
	for _, f := range rt.Topology().Functions {
		for _, m := range f.SQSEvents {
			polled[m.Queue] = true
		}
	}
	names := map[string]bool{}
	for _, q := range rt.Topology().Queues {
		if polled[q.LogicalID] {
			names[q.Name] = true
		}
	}
	for _, q := range rt.Cloud().Queues() {
		switch {
		case q.DLQ:
			dlqs = append(dlqs, q.URL)
		case names[q.Name]:
			work = append(work, q.URL)
		}
	}
	return work, dlqs
}

// messagesIn counts the messages the queues hold: visible, in flight or delayed.
func messagesIn(rt *local.Runtime, urls []string) int {
	n := 0
	for _, u := range urls {
		s := rt.Cloud().QueueStats(u)
		n += s.Visible + s.InFlight + s.Delayed
	}
	return n
}

func inFlight(rt *local.Runtime, urls []string) int {
	n := 0
	for _, u := range urls {
		n += rt.Cloud().QueueStats(u).InFlight
	}
	return n
}

// dlqAlarms names the template's alarms on the depth of a work queue's DLQ.
func dlqAlarms(rt *local.Runtime, dlqURLs []string) []string {
	urls := map[string]bool{}
	for _, u := range dlqURLs {
		urls[u] = true
	}
	dlqNames := map[string]bool{}
	for _, q := range rt.Cloud().Queues() {
		if urls[q.URL] {
			dlqNames[q.Name] = true
		}
	}
	var out []string
	for _, a := range rt.Topology().Alarms {
		if a.MetricName == "ApproximateNumberOfMessagesVisible" && dlqNames[a.Dimensions["QueueName"]] {
			out = append(out, a.Name)
		}
	}
	return out
}

// injectChaos makes PutEvents entries fail with InternalFailure (at
// PutFailRate, each entry on its own: the webhook's retries inside the
// request usually get it through), the first delivery of the plan's
// failFirst events fail at the bus for good (every attempt of the
// request: the webhook answers 500 and LINE redelivers; the redelivery
// goes through), and LINE answer 429 or 500 at the configured rates.
func injectChaos(rt *local.Runtime, o Options, p plan, putFailures *atomic.Int64, webhook *chaosFailures) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05))
	if o.PutFailRate > 0 || o.WebhookFailRate > 0 {
		rt.Cloud().FailPutEvents(func(e ebtypes.PutEventsRequestEntry) (string, bool) {
			if n, first := firstDelivery(e); n >= 0 && n < len(p.failFirst) && p.failFirst[n] && first {
				webhook.add(n)
				return "InternalFailure", true
			}
			mu.Lock()
			defer mu.Unlock()
			if o.PutFailRate > 0 && rng.Float64() < o.PutFailRate {
				putFailures.Add(1)
				return "InternalFailure", true
			}
			return "", false
		})
	}
	if o.Line429Rate > 0 || o.Line500Rate > 0 {
		// Faults are queued per path: a random sequence long enough for
		// every call the run makes, with runs of normal answers between.
		for _, path := range []string{linemock.PathReply, linemock.PathPush} {
			for _, f := range faultSequence(rng, 3*len(p.kinds), o.Line429Rate, o.Line500Rate) {
				f.Path = path
				rt.LINE().Inject(f)
			}
		}
	}
}

// firstDelivery reads a bus entry's event: its index in the run (from its
// text, -1 when it is not bench traffic) and whether it comes from LINE's
// first delivery (not a redelivery).
func firstDelivery(e ebtypes.PutEventsRequestEntry) (int, bool) {
	var d struct {
		Event struct {
			DeliveryContext struct {
				IsRedelivery bool `json:"isRedelivery"`
			} `json:"deliveryContext"`
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
		} `json:"event"`
	}
	if e.Detail == nil || json.Unmarshal([]byte(*e.Detail), &d) != nil {
		return -1, false
	}
	_, n, ok := parseText(d.Event.Message.Text)
	if !ok {
		return -1, false
	}
	return n, !d.Event.DeliveryContext.IsRedelivery
}

// chaosFailures marks, by event index, the events whose first delivery
// was made to fail.
type chaosFailures struct{ failed []atomic.Bool }

func newChaosFailures(events int) *chaosFailures {
	return &chaosFailures{failed: make([]atomic.Bool, events)}
}

func (c *chaosFailures) add(i int) { c.failed[i].Store(true) }

func (c *chaosFailures) events() int {
	n := 0
	for i := range c.failed {
		if c.failed[i].Load() {
			n++
		}
	}
	return n
}

// faultSequence draws calls answers: 429 at r429, 500 at r500, otherwise a
// normal answer (consecutive normal answers are one Fault with Times).
func faultSequence(rng *rand.Rand, calls int, r429, r500 float64) []linemock.Fault {
	var out []linemock.Fault
	normal := 0
	flush := func() {
		if normal > 0 {
			out = append(out, linemock.Fault{Times: normal})
			normal = 0
		}
	}
	for range calls {
		switch x := rng.Float64(); {
		case x < r429:
			flush()
			out = append(out, linemock.Fault{Status: http.StatusTooManyRequests})
		case x < r429+r500:
			flush()
			out = append(out, linemock.Fault{Status: http.StatusInternalServerError})
		default:
			normal++
		}
	}
	flush()
	return out
}

// alarmWatch polls /_local/alarms and remembers which DLQ alarms were ever
// in ALARM (they may return to OK before the run ends).
type alarmWatch struct {
	url    string
	client *http.Client
	watch  map[string]bool
	mu     sync.Mutex
	fired  map[string]bool
}

func newAlarmWatch(rt *local.Runtime, names []string, client *http.Client) *alarmWatch {
	w := &alarmWatch{url: rt.URL() + "/_local/alarms", client: client, watch: map[string]bool{}, fired: map[string]bool{}}
	for _, n := range names {
		w.watch[n] = true
	}
	return w
}

func (w *alarmWatch) run(ctx context.Context, every time.Duration) {
	for {
		w.poll(ctx)
		if backoff.Sleep(ctx, every) != nil {
			return
		}
	}
}

func (w *alarmWatch) poll(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	if err != nil {
		return
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var views []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	if json.NewDecoder(resp.Body).Decode(&views) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range views {
		if w.watch[v.Name] && v.State == alarmStateAlarm {
			w.fired[v.Name] = true
		}
	}
}

// result returns the alarms that fired and those the operator was pushed a
// message about (a push to local.DefaultOperator naming the alarm).
func (w *alarmWatch) result(line *linemock.Server) (fired, notified []string) {
	w.mu.Lock()
	for n := range w.fired {
		fired = append(fired, n)
	}
	w.mu.Unlock()
	slices.Sort(fired)
	for _, n := range fired {
		for _, r := range line.Messages() {
			if r.To == local.DefaultOperator && r.Via == linemock.ViaPush && mentions(r.Messages, n) {
				notified = append(notified, n)
				break
			}
		}
	}
	return fired, notified
}

func mentions(msgs []json.RawMessage, s string) bool {
	for _, m := range msgs {
		if strings.Contains(string(m), s) {
			return true
		}
	}
	return false
}

// account gathers the evidence the invariants are checked against.
func account(rt *local.Runtime, p plan, tr traffic, recs []linemock.Record, dlqs []string, w *alarmWatch) Accounting {
	count, _ := effects(recs, len(p.kinds))
	dead := map[string]bool{}
	for _, e := range rt.Events() {
		if e.Outcome == "dead-lettered" {
			dead[e.WebhookEventID] = true
		}
	}
	a := Accounting{DLQVisible: messagesIn(rt, dlqs)}
	for i, k := range p.kinds {
		id := ""
		if ids := tr.deliveries[i].WebhookEventIDs; len(ids) > 0 {
			id = ids[0]
		}
		a.Events = append(a.Events, EventAccount{Index: i, WebhookEventID: id, Poison: k == KindPoison,
			Effects: count[i], DeadLettered: id != "" && dead[id]})
	}
	a.AlarmsFired, a.OperatorNotified = w.result(rt.LINE())
	return a
}
