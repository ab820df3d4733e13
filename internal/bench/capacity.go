package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/pkg/bot"
)

// The capacity bench (`linegate bench --capacity`) runs `linegate local` at
// the template's settings inside local.Capacity's model of the deployed
// stack, drives a rising load of one-event webhooks from many chats, and
// reports the highest rate it sustained: every webhook accepted, the chat
// queue's backlog not growing, no message older than the target. See
// docs/capacity.md for the model, its sources and what it leaves out.

// Defaults of CapacityOptions.
const (
	DefaultCapacityRegion   = "ap-northeast-1" // samconfig.toml's
	DefaultCapacityDilation = 10
	DefaultCapacityFrom     = 500
	DefaultCapacityStepRate = 250
	DefaultCapacityTo       = 2000
	DefaultCapacityStep     = 5 * time.Second // modelled, per rate
	DefaultCapacityHandler  = 100 * time.Millisecond
	DefaultCapacityChats    = 5000
	DefaultCapacityMaxAge   = 45 * time.Second
)

// DefaultCapacityLatencies are the modelled round trips (docs/capacity.md
// says where each comes from).
var DefaultCapacityLatencies = local.Latencies{
	PutEvents: 20 * time.Millisecond, SendMessageBatch: 15 * time.Millisecond,
	ReceiveMessage: 10 * time.Millisecond, DeleteBatch: 10 * time.Millisecond,
	DynamoDB: 5 * time.Millisecond, LINE: 30 * time.Millisecond,
}

// RegionQuotas are the per-region quotas the model uses (per account and
// region; docs/capacity.md cites each).
type RegionQuotas struct {
	PutEvents        float64 `json:"putEventsPerSecond"`
	SQSFIFOPerAction float64 `json:"sqsFifoPerActionPerSecond"`
}

// CapacityRegions lists the regions the bench has quotas for.
var CapacityRegions = map[string]RegionQuotas{
	"ap-northeast-1": {PutEvents: 1200, SQSFIFOPerAction: 9000},
	"us-east-1":      {PutEvents: 10000, SQSFIFOPerAction: 18000},
}

// Quotas that do not depend on the region.
const (
	lineRequestsPerSecond = 2000 // LINE: "Other API endpoints", per channel
	dynamoDBInitialWrites = 4000 // a new on-demand table's initial write throughput
	accountConcurrency    = 1000 // Lambda's default account concurrency
	esmInitial            = 5
	esmRampPerMinute      = 300
)

// CapacityOptions configure RunCapacity; zero values take the defaults.
type CapacityOptions struct {
	Template string
	Params   map[string]string
	Region   string
	// Dilation: modelled time runs this many times faster than real time.
	Dilation float64
	// From, Step and To are the offered rates, in events per modelled
	// second: From, From+Step, … up to To; the load stops rising at the
	// first rate not sustained.
	From, Step, To float64
	// StepDuration is how long each rate is offered (modelled).
	StepDuration time.Duration
	// HandlerIO is each event's handler time (modelled), before its reply.
	HandlerIO time.Duration
	// Chats is how many distinct chats send the traffic, round robin.
	Chats int
	// MaxQueueAge is the most a chat may wait (the oldest message of the
	// chat queue) for a rate to count as sustained.
	MaxQueueAge time.Duration
	// AccountConcurrency overrides the account's Lambda concurrency (a new
	// account's may be 10); 0 keeps the default 1,000.
	AccountConcurrency int
	Logs               io.Writer
}

func (o *CapacityOptions) normalize() error {
	o.Template = cmpOr(o.Template, DefaultTemplate)
	o.Region = cmpOr(o.Region, DefaultCapacityRegion)
	if _, ok := CapacityRegions[o.Region]; !ok {
		var names []string
		for r := range CapacityRegions {
			names = append(names, r)
		}
		sort.Strings(names)
		return fmt.Errorf("%w: no quotas for region %q (have %s)", ErrOptions, o.Region, strings.Join(names, ", "))
	}
	if o.Dilation <= 0 {
		o.Dilation = DefaultCapacityDilation
	}
	if o.From <= 0 {
		o.From = DefaultCapacityFrom
	}
	if o.Step <= 0 {
		o.Step = DefaultCapacityStepRate
	}
	if o.To <= 0 {
		o.To = DefaultCapacityTo
	}
	if o.StepDuration <= 0 {
		o.StepDuration = DefaultCapacityStep
	}
	if o.HandlerIO <= 0 {
		o.HandlerIO = DefaultCapacityHandler
	}
	if o.Chats <= 0 {
		o.Chats = DefaultCapacityChats
	}
	if o.MaxQueueAge <= 0 {
		o.MaxQueueAge = DefaultCapacityMaxAge
	}
	if o.AccountConcurrency <= 0 {
		o.AccountConcurrency = accountConcurrency
	}
	if o.To < o.From {
		return fmt.Errorf("%w: --to %v below --from %v", ErrOptions, o.To, o.From)
	}
	return nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// CapacityReport is RunCapacity's one JSON object.
type CapacityReport struct {
	// SustainedEventsPerSecond is the highest rate offered with every
	// webhook accepted, the chat queue's backlog not growing and no
	// message older than MaxQueueAge (0: not even the first).
	SustainedEventsPerSecond float64 `json:"sustainedEventsPerSecond"`
	// MaxQueueAgeSeconds is the oldest message of the chat queue while that
	// rate was offered (modelled seconds).
	MaxQueueAgeSeconds float64 `json:"maxQueueAgeSeconds"`
	// FirstLimit is the first limit the rising load met (nil: none up to
	// the highest rate offered, or Stopped).
	FirstLimit *CapacityLimit `json:"firstLimit"`
	// Stopped says why the load stopped rising without meeting a limit
	// (this machine could not drive the rate).
	Stopped string          `json:"stopped,omitempty"`
	Region  string          `json:"region"`
	Steps   []CapacityStep  `json:"steps"`
	Model   CapacitySetting `json:"model"`
	// Limits are every modelled limit met (by name; FirstS is modelled
	// seconds since the start of the runtime that met it).
	Limits []local.LimitHit `json:"limitsMet"`
}

// CapacityLimit is a limit the load met, and the rate at which.
type CapacityLimit struct {
	Name              string  `json:"name"`
	Quota             string  `json:"quota"`
	AtEventsPerSecond float64 `json:"atEventsPerSecond"`
}

// CapacityStep is one offered rate's outcome (rates per modelled second,
// times in modelled seconds).
type CapacityStep struct {
	Offered            float64        `json:"offeredEventsPerSecond"`
	Sent               float64        `json:"sentEventsPerSecond"`
	Accepted           float64        `json:"acceptedEventsPerSecond"`
	Handled            float64        `json:"handledEventsPerSecond"`
	Refused            map[string]int `json:"refused,omitempty"`
	MaxQueueAgeSeconds float64        `json:"maxQueueAgeSeconds"`
	BacklogStart       float64        `json:"backlogStart"`
	BacklogMid         float64        `json:"backlogMid"`
	BacklogEnd         float64        `json:"backlogEnd"`
	P99EndToEndSeconds float64        `json:"p99EndToEndSeconds"`
	Invocations        int            `json:"chatQueueInvocations"`
	// APIBurstDrained is how much of the stage's burst the step used up: a
	// rate above the stage's throttle drains it before any 429.
	APIBurstDrained float64 `json:"apiBurstDrained"`
	// LimitsMet are the modelled limits that refused calls in this step.
	LimitsMet []string `json:"limitsMet,omitempty"`
	// Dilation is the step's (raised when this machine could not drive the
	// rate at the one asked for).
	Dilation  float64 `json:"dilation"`
	Sustained bool    `json:"sustained"`
	Why       string  `json:"why,omitempty"`
}

// CapacitySetting is what the run modelled: the template's settings, the
// latencies, the quotas and the dilation.
type CapacitySetting struct {
	Dilation             float64            `json:"dilation"`
	StepSeconds          float64            `json:"stepSeconds"`
	HandlerIOms          float64            `json:"handlerIOms"`
	Chats                int                `json:"chats"`
	LatencyMs            map[string]float64 `json:"latencyMs"`
	Quotas               local.Quotas       `json:"quotas"`
	WorkerMaxConcurrency int                `json:"workerMaxConcurrency"`
	BatchSize            int                `json:"batchSize"`
	RecordsAtOnce        int                `json:"recordsAtOnce"`
	WorkerReserved       int                `json:"workerReservedConcurrency"`
}

// RunCapacity runs the capacity bench.
func RunCapacity(ctx context.Context, o CapacityOptions) (CapacityReport, error) {
	if err := o.normalize(); err != nil {
		return CapacityReport{}, err
	}
	rep := CapacityReport{Region: o.Region}
	top, err := template.Load(o.Template, local.TemplateParams(o.Params, nil))
	if err != nil {
		return rep, fmt.Errorf("load %s: %w", o.Template, err)
	}
	setting, quotas, err := capacitySetting(top, o)
	if err != nil {
		return rep, err
	}
	rep.Model = setting

	var handled atomic.Int64
	var e2e sync.Map // text -> send time (real)
	lat := newLatencies()
	botFn := func(k float64) func(config.Worker) *bot.Router {
		return func(config.Worker) *bot.Router {
			r := bot.NewRouter()
			r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
				select { // the handler's I/O, dilated
				case <-time.After(time.Duration(float64(o.HandlerIO) * k)):
				case <-ctx.Done():
					return ctx.Err()
				}
				if err := e.ReplyText(ctx, "ok"); err != nil {
					return err
				}
				if sent, ok := e2e.LoadAndDelete(text); ok {
					lat.add(time.Since(sent.(time.Time)) / time.Duration(k))
				}
				handled.Add(1)
				return nil
			})
			return r
		}
	}
	params := map[string]string{"LogLevel": "WARN"} // the functions' INFO lines cost this machine CPU the model does not have
	for k, v := range o.Params {
		params[k] = v
	}
	start := func(k float64) (*local.Runtime, *driver, error) {
		rt, err := local.Start(ctx, local.Config{
			Template: o.Template, Params: params, Addr: "127.0.0.1:0",
			Getenv: func(string) string { return "" }, Logs: o.Logs, Bot: botFn(k),
			EventLogSize: 1000, LineRecords: 1000,
			Capacity: &local.Capacity{Dilation: k, Latency: DefaultCapacityLatencies, Quotas: quotas},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("linegate local: %w", err)
		}
		client := &http.Client{Timeout: time.Duration(float64(30*time.Second) * k), Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
		return rt, &driver{url: rt.WebhookURL(), client: client, lp: lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret)), chats: o.Chats, e2e: &e2e}, nil
	}
	k := o.Dilation
	rt, d, err := start(k)
	if err != nil {
		return rep, err
	}
	defer func() { rt.Close(); d.client.CloseIdleConnections() }()
	seen := map[string]int64{} // limit -> hits so far, across runtimes
	limits := map[string]local.LimitHit{}
	escalations := 0
	for rate := o.From; rate <= o.To+1e-9; {
		stepStart := time.Now()
		samples := newDepthSampler(rt, k)
		sctx, stopSampling := context.WithCancel(ctx)
		go samples.run(sctx)
		h0 := handled.Load()
		burst0 := rt.CapacityAPIBurst()
		lat.reset()
		sent, lag, statuses := d.offer(ctx, rate/k, time.Duration(float64(o.StepDuration)*k))
		stopSampling()
		<-samples.done
		dur := time.Since(stepStart).Seconds() / k
		// Sent is the rate the driver kept to: its sends over the step's
		// planned length plus how late the last of them went.
		planned := o.StepDuration.Seconds() + lag.Seconds()/k
		st := CapacityStep{Offered: rate, Dilation: k, Sent: float64(sent) / planned, Accepted: float64(statuses[200]) / planned,
			Handled: float64(handled.Load()-h0) / dur, MaxQueueAgeSeconds: samples.maxAge.Seconds(),
			P99EndToEndSeconds: lat.p99().Seconds()}
		st.BacklogStart, st.BacklogMid, st.BacklogEnd = samples.backlog()
		if b1 := rt.CapacityAPIBurst(); !math.IsInf(burst0, 1) {
			st.APIBurstDrained = max(burst0-b1, 0)
		}
		for code, n := range statuses {
			if code != 200 {
				if st.Refused == nil {
					st.Refused = map[string]int{}
				}
				st.Refused[strconv.Itoa(code)] = n
			}
		}
		for _, g := range rt.CapacityScaling() {
			if g.Queue == "InteractiveQueue" {
				st.Invocations = g.Active
			}
		}
		for _, h := range rt.CapacityLimits() { // the limits this step met first, in the order met
			if h.Count > seen[h.Name] {
				st.LimitsMet = append(st.LimitsMet, h.Name)
			}
			seen[h.Name] = h.Count
			if prev, ok := limits[h.Name]; ok {
				h.Count += prev.Count
			}
			limits[h.Name] = h
		}
		st.Sustained, st.Why = judge(st, rate, o.MaxQueueAge, setting.Quotas.APIBurst)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		starved := st.Sent < 0.95*rate
		drained := setting.Quotas.APIBurst > 0 && st.APIBurstDrained > burstDrainedLimit*setting.Quotas.APIBurst
		if !st.Sustained && starved && len(st.LimitsMet) == 0 && len(st.Refused) == 0 && !drained && escalations < 2 {
			// This machine could not drive the rate at this dilation: not a
			// limit of the model. Offer it again, twice as dilated, in a
			// fresh runtime (the steps before left no backlog).
			rep.Steps = append(rep.Steps, st)
			rt.Close()
			d.client.CloseIdleConnections()
			k *= 2
			escalations++
			seen = map[string]int64{}
			if rt, d, err = start(k); err != nil {
				return rep, err
			}
			continue
		}
		rep.Steps = append(rep.Steps, st)
		if !st.Sustained {
			rep.Limits = limitList(limits)
			rep.firstLimit(st, setting, starved)
			break
		}
		rep.SustainedEventsPerSecond, rep.MaxQueueAgeSeconds = rate, st.MaxQueueAgeSeconds
		rate += o.Step
	}
	rep.Limits = limitList(limits)
	return rep, nil
}

// limitList is the limits met, by name.
func limitList(m map[string]local.LimitHit) []local.LimitHit {
	out := make([]local.LimitHit, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// firstLimit names the limit the first step not sustained met: a quota the
// model refused calls for, the stage's burst draining, or else the event
// source's concurrency the pipeline ran out of. A step this machine could not
// drive names none.
func (r *CapacityReport) firstLimit(st CapacityStep, s CapacitySetting, starved bool) {
	apiQuota := fmt.Sprintf("%.0f requests/s, burst %.0f (ApiThrottlingRateLimit, ApiThrottlingBurstLimit)", s.Quotas.APIRate, s.Quotas.APIBurst)
	switch {
	case len(st.LimitsMet) > 0:
		name := st.LimitsMet[0]
		quota := ""
		for _, h := range r.Limits {
			if h.Name == name {
				quota = h.Quota
			}
		}
		if name == local.LimitAPIThrottle && quota == "" {
			quota = apiQuota
		}
		r.FirstLimit = &CapacityLimit{Name: name, Quota: quota, AtEventsPerSecond: st.Offered}
	case st.APIBurstDrained > burstDrainedLimit*s.Quotas.APIBurst:
		r.FirstLimit = &CapacityLimit{Name: local.LimitAPIThrottle, Quota: apiQuota, AtEventsPerSecond: st.Offered}
	case starved:
		r.Stopped = fmt.Sprintf("this machine could not offer %.0f/s even at dilation %g: no limit of the model was met", st.Offered, st.Dilation)
	case st.Invocations >= s.WorkerMaxConcurrency:
		r.FirstLimit = &CapacityLimit{Name: local.LimitESMConcurrent, AtEventsPerSecond: st.Offered,
			Quota: fmt.Sprintf("%d invocations (WorkerMaxConcurrency) of up to %d records each, %d at once", s.WorkerMaxConcurrency, s.BatchSize, s.RecordsAtOnce)}
	default:
		r.FirstLimit = &CapacityLimit{Name: "Lambda's SQS scaling (+300 concurrent batches a minute)", AtEventsPerSecond: st.Offered,
			Quota: fmt.Sprintf("%d of %d chat-queue invocations running", st.Invocations, s.WorkerMaxConcurrency)}
	}
}

// burstDrainedLimit is the share of the stage's burst a step may use up and
// still count as sustained: a rate at the stage's own rate drains some of it
// when arrivals bunch up (LINE's do); a rate above it drains it steadily
// (half of 2,000 in 5 s takes 200/s above 1,000/s).
const burstDrainedLimit = 0.5

// judge says whether a step sustained its rate, and if not why.
func judge(st CapacityStep, rate float64, maxAge time.Duration, apiBurst float64) (bool, string) {
	var why []string
	refused := 0
	for _, n := range st.Refused {
		refused += n
	}
	if refused > 0 {
		why = append(why, fmt.Sprintf("%d webhooks refused", refused))
	}
	if apiBurst > 0 && st.APIBurstDrained > burstDrainedLimit*apiBurst {
		why = append(why, fmt.Sprintf("the stage's burst drained by %.0f of %.0f: the rate is above ApiThrottlingRateLimit, 429s follow", st.APIBurstDrained, apiBurst))
	}
	if st.Sent < 0.95*rate {
		why = append(why, fmt.Sprintf("the driver offered only %.0f/s (the machine is too busy for this dilation)", st.Sent))
	}
	// Growing: the last quarter's backlog is more than half a second of
	// arrivals above the second quarter's.
	if st.BacklogEnd > st.BacklogMid+max(20, 0.5*rate) {
		why = append(why, fmt.Sprintf("backlog growing (%.0f then %.0f messages)", st.BacklogMid, st.BacklogEnd))
	}
	if st.MaxQueueAgeSeconds > maxAge.Seconds() {
		why = append(why, fmt.Sprintf("a message waited %.1f s (> %v)", st.MaxQueueAgeSeconds, maxAge))
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// capacitySetting reads what the run models from the template and the
// options: its concurrency settings and the quotas of the region.
func capacitySetting(top *template.Topology, o CapacityOptions) (CapacitySetting, local.Quotas, error) {
	s := CapacitySetting{Dilation: o.Dilation, StepSeconds: o.StepDuration.Seconds(), HandlerIOms: float64(o.HandlerIO.Milliseconds()), Chats: o.Chats,
		LatencyMs: map[string]float64{
			"putEvents": ms(DefaultCapacityLatencies.PutEvents), "sendMessageBatch": ms(DefaultCapacityLatencies.SendMessageBatch),
			"receiveMessage": ms(DefaultCapacityLatencies.ReceiveMessage), "deleteMessageBatch": ms(DefaultCapacityLatencies.DeleteBatch),
			"dynamoDB": ms(DefaultCapacityLatencies.DynamoDB), "line": ms(DefaultCapacityLatencies.LINE),
		}}
	for _, f := range top.Functions {
		for _, m := range f.SQSEvents {
			if m.Queue == "InteractiveQueue" {
				s.WorkerMaxConcurrency, s.BatchSize = m.MaxConcurrency, m.BatchSize
				s.WorkerReserved = f.ReservedConcurrency
				s.RecordsAtOnce, _ = strconv.Atoi(f.Env["WORKER_CONCURRENCY"])
			}
		}
	}
	if s.WorkerMaxConcurrency == 0 {
		return s, local.Quotas{}, fmt.Errorf("%s: no event source on InteractiveQueue with a MaximumConcurrency", o.Template)
	}
	num := func(name string) (float64, error) {
		v, err := strconv.ParseFloat(top.Parameters[name], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: parameter %s = %q: %w", o.Template, name, top.Parameters[name], err)
		}
		return v, nil
	}
	rate, err := num("ApiThrottlingRateLimit")
	if err != nil {
		return s, local.Quotas{}, err
	}
	burst, err := num("ApiThrottlingBurstLimit")
	if err != nil {
		return s, local.Quotas{}, err
	}
	rq := CapacityRegions[o.Region]
	q := local.Quotas{APIRate: rate, APIBurst: burst, PutEvents: rq.PutEvents, SQSFIFOPerAction: rq.SQSFIFOPerAction,
		LINE: lineRequestsPerSecond, DynamoDBWrites: dynamoDBInitialWrites, AccountConcurrency: o.AccountConcurrency,
		ESMInitial: esmInitial, ESMRampPerMinute: esmRampPerMinute}
	s.Quotas = q
	return s, q, nil
}

// driver sends one-event webhooks, each from the next chat, signed as LINE
// signs them.
type driver struct {
	url    string
	client *http.Client
	lp     *lineplatform.Platform
	chats  int
	next   int
	e2e    *sync.Map
}

// offer sends webhooks at rate per real second for dur, and returns how
// many it sent, how far behind its schedule the last went (this machine too
// busy to send at the rate) and the statuses they got.
func (d *driver) offer(ctx context.Context, rate float64, dur time.Duration) (int, time.Duration, map[int]int) {
	jobs := make(chan int, 4096)
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				code := d.post(ctx, n)
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	sent := 0
	var lag time.Duration
	interval := time.Duration(float64(time.Second) / rate)
	for ctx.Err() == nil {
		at := start.Add(time.Duration(sent) * interval)
		if at.Sub(start) >= dur {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- d.next
		// How late the step's sends end: a send delayed by a pause of this
		// machine is caught up by the next ones (they do not wait), so only
		// the last one's lateness lengthens the step.
		lag = time.Since(at)
		d.next++
		sent++
	}
	close(jobs)
	wg.Wait()
	return sent, lag, statuses
}

// post sends webhook n and returns its status (0 when it got none). A
// request that got no answer at all (a kept-alive connection the server
// closed as it was reused) is sent once more, as LINE redelivers a webhook
// that timed out.
func (d *driver) post(ctx context.Context, n int) int {
	user := fmt.Sprintf("U%032x", n%d.chats+1)
	text := "c" + strconv.Itoa(n)
	body := lineplatform.Body(d.lp.Destination(), d.lp.Text(user, text))
	sig := signature.Sign([]byte(local.DefaultSecret), body)
	d.e2e.Store(text, time.Now())
	var resp *http.Response
	for attempt := 0; attempt < 2; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
		if err != nil {
			break
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(signature.Header, sig)
		if resp, err = d.client.Do(req); err == nil {
			break
		}
	}
	if resp == nil {
		d.e2e.Delete(text)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		d.e2e.Delete(text)
	}
	return resp.StatusCode
}

// depthSampler samples the chat queue's backlog and oldest message.
type depthSampler struct {
	rt      *local.Runtime
	k       float64
	mu      sync.Mutex
	visible []float64
	maxAge  time.Duration
	done    chan struct{}
}

func newDepthSampler(rt *local.Runtime, k float64) *depthSampler {
	return &depthSampler{rt: rt, k: k, done: make(chan struct{})}
}

func (s *depthSampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		vis, _, age, err := s.rt.QueueDepth("InteractiveQueue")
		if err == nil {
			s.mu.Lock()
			s.visible = append(s.visible, float64(vis))
			s.maxAge = max(s.maxAge, age)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backlog is the mean visible backlog of the first, second and last
// quarters of the samples.
func (s *depthSampler) backlog() (start, mid, end float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.visible)
	if n < 4 {
		return 0, 0, 0
	}
	mean := func(v []float64) float64 {
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		return sum / float64(len(v))
	}
	return mean(s.visible[:n/4]), mean(s.visible[n/4 : n/2]), mean(s.visible[3*n/4:])
}

// latencies keeps end-to-end times (modelled) of one step.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func newLatencies() *latencies { return &latencies{} }

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.d = append(l.d, d); l.mu.Unlock() }
func (l *latencies) reset()              { l.mu.Lock(); l.d = l.d[:0]; l.mu.Unlock() }

func (l *latencies) p99() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
}

// WriteJSON writes the report as one JSON object.
func (r CapacityReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as a table of the steps and the verdict.
func (r CapacityReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity at the template's settings, %s quotas, time dilated %gx (rates per modelled second)\n\n", r.Region, r.Model.Dilation)
	fmt.Fprintln(&b, "| offered/s | accepted/s | handled/s | refused | oldest message (s) | p99 webhook→reply (s) | backlog (msgs) | invocations | dilation | sustained |")
	fmt.Fprintln(&b, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
	for _, s := range r.Steps {
		verdict := "yes"
		if !s.Sustained {
			verdict = "no: " + s.Why
		}
		refused := "-"
		if len(s.Refused) > 0 {
			refused = fmt.Sprint(s.Refused)
		}
		fmt.Fprintf(&b, "| %.0f | %.0f | %.0f | %s | %.1f | %.2f | %.0f→%.0f | %d | %g | %s |\n", s.Offered, s.Accepted, s.Handled, refused,
			s.MaxQueueAgeSeconds, s.P99EndToEndSeconds, s.BacklogMid, s.BacklogEnd, s.Invocations, s.Dilation, verdict)
	}
	fmt.Fprintf(&b, "\nsustained: %.0f events/s, oldest message %.1f s\n", r.SustainedEventsPerSecond, r.MaxQueueAgeSeconds)
	if r.FirstLimit != nil {
		fmt.Fprintf(&b, "first limit: %s (%s), met at %.0f/s\n", r.FirstLimit.Name, r.FirstLimit.Quota, r.FirstLimit.AtEventsPerSecond)
	} else if r.Stopped != "" {
		fmt.Fprintln(&b, "stopped: "+r.Stopped)
	} else {
		fmt.Fprintln(&b, "first limit: none met up to the highest rate offered")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
