package local

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/compose/webhookfn"
)

// Capacity makes `linegate local` a model of the deployed stack under load:
// the round trips to AWS and LINE and their quotas, and the way Lambda scales
// an SQS event source, around the same webhook and worker code. Time is
// dilated: every modelled duration takes Dilation times as long in real time,
// and every quota is divided by Dilation, so a rate the machine could not
// drive (1,000 webhooks a second, each with its HMAC, JSON and HTTP calls) is
// modelled by one it can (200 a second at Dilation 5) with the same queueing:
// the latencies, the concurrency and the per-second quotas keep their
// proportions, and ages and rates are reported back in modelled time. CPU
// time is not dilated; it is small next to the modelled I/O. The in-memory
// cloud only.
type Capacity struct {
	// Dilation is how many times slower than modelled time the run goes
	// (default 1). The run's TimeScale is 1/Dilation.
	Dilation float64
	// Latency is the modelled round trip of each call.
	Latency Latencies
	// Quotas are the modelled per-second quotas (0: none).
	Quotas Quotas
}

// Latencies are modelled round trips (before dilation).
type Latencies struct {
	PutEvents, SendMessageBatch time.Duration // the webhook's two hand-offs, made at once
	ReceiveMessage, DeleteBatch time.Duration // an event source mapping's poll and delete
	DynamoDB                    time.Duration // one idempotency read or write
	LINE                        time.Duration // one Messaging API call
}

// Quotas are the modelled limits (per modelled second, before dilation).
type Quotas struct {
	// APIRate and APIBurst are the stage's throttling (template parameters
	// ApiThrottlingRateLimit and ApiThrottlingBurstLimit): a token bucket,
	// 429 when empty.
	APIRate, APIBurst float64
	// PutEvents is EventBridge's PutEvents requests per second, per account
	// and region (ThrottlingException above it).
	PutEvents float64
	// SQSFIFOPerAction is the FIFO chat queue's requests per second per API
	// action in high-throughput mode (SendMessageBatch, ReceiveMessage,
	// DeleteMessageBatch each).
	SQSFIFOPerAction float64
	// LINE is the Messaging API's requests per second per channel (429
	// above it).
	LINE float64
	// DynamoDBWrites is the idempotency table's write request units per
	// second (an on-demand table's initial throughput).
	DynamoDBWrites float64
	// AccountConcurrency is the account's Lambda concurrency; the webhook
	// gets what the template does not reserve (0: unlimited).
	AccountConcurrency int
	// ESMInitial is how many batches an SQS event source processes at once
	// when messages appear (Lambda: 5), ESMRampPerMinute how many more it
	// adds per minute while messages are still available (Lambda: 300), up
	// to the mapping's MaximumConcurrency.
	ESMInitial, ESMRampPerMinute int
}

// LimitHit is a modelled limit the run met: which, its quota, when first
// (modelled seconds since the start) and how often.
type LimitHit struct {
	Name   string  `json:"name"`
	Quota  string  `json:"quota"`
	FirstS float64 `json:"firstAtSeconds"`
	Count  int64   `json:"count"`
}

// Limit names the model records.
const (
	LimitAPIThrottle   = "API Gateway stage throttle"
	LimitPutEvents     = "EventBridge PutEvents quota"
	LimitSQSFIFO       = "SQS FIFO high-throughput quota per API action"
	LimitLINE          = "LINE Messaging API rate limit"
	LimitDynamoDB      = "DynamoDB on-demand table throughput"
	LimitConcurrency   = "Lambda account concurrency"
	LimitESMConcurrent = "SQS event source MaximumConcurrency"
)

// capacityModel is a running model: its buckets, its limit log and its
// event source gates.
type capacityModel struct {
	cfg   Capacity
	k     float64
	start time.Time

	api, putEvents, fifoSend, fifoRecv, fifoDel, line, ddb *bucket

	webhookCap      int64
	webhookInFlight atomic.Int64

	mu     sync.Mutex
	limits map[string]*LimitHit
	gates  map[string]*esmGate // by queue logical id
}

func newCapacityModel(c Capacity, reserved int) *capacityModel {
	k := c.Dilation
	if k < 1 {
		k = 1
	}
	q := c.Quotas
	m := &capacityModel{cfg: c, k: k, start: time.Now(), limits: map[string]*LimitHit{}, gates: map[string]*esmGate{}}
	m.api = newBucket(q.APIRate/k, q.APIBurst)
	m.putEvents = newBucket(q.PutEvents/k, q.PutEvents)
	m.fifoSend = newBucket(q.SQSFIFOPerAction/k, q.SQSFIFOPerAction)
	m.fifoRecv = newBucket(q.SQSFIFOPerAction/k, q.SQSFIFOPerAction)
	m.fifoDel = newBucket(q.SQSFIFOPerAction/k, q.SQSFIFOPerAction)
	m.line = newBucket(q.LINE/k, q.LINE)
	m.ddb = newBucket(q.DynamoDBWrites/k, q.DynamoDBWrites)
	if q.AccountConcurrency > 0 {
		m.webhookCap = int64(max(q.AccountConcurrency-reserved, 0))
	}
	return m
}

// dilate is the real time a modelled duration takes.
func (m *capacityModel) dilate(d time.Duration) time.Duration { return time.Duration(float64(d) * m.k) }

// modelled is the modelled time a real duration stands for.
func (m *capacityModel) modelled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / m.k)
}

// wait sleeps a modelled round trip.
func (m *capacityModel) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return backoff.Sleep(ctx, m.dilate(d))
}

// met records that a limit refused a call.
func (m *capacityModel) met(name, quota string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.limits[name]
	if h == nil {
		h = &LimitHit{Name: name, Quota: quota, FirstS: m.modelled(time.Since(m.start)).Seconds()}
		m.limits[name] = h
	}
	h.Count++
}

// hits lists the limits met, the first met first.
func (m *capacityModel) hits() []LimitHit {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]LimitHit, 0, len(m.limits))
	for _, h := range m.limits {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstS < out[j].FirstS })
	return out
}

// throttled is the error AWS answers a throttled call with: an API error
// whose code the SDK's retry rules, and so the webhook's, call retryable.
func throttled(op string) error {
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded (" + op + ", the capacity model's quota)", Fault: smithy.FaultClient}
}

// bucket is a token bucket: rate tokens per real second, at most burst.
// A nil bucket (no quota) always has a token.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate, burst float64) *bucket {
	if rate <= 0 {
		return nil
	}
	burst = max(burst, 1)
	return &bucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// level is the tokens the bucket holds now (+Inf for no bucket).
func (b *bucket) level() float64 {
	if b == nil {
		return math.Inf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(b.burst, b.tokens+time.Since(b.last).Seconds()*b.rate)
}

func (b *bucket) take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// modelledBus is the bus behind the webhook under the model: a round trip
// and the PutEvents quota.
type modelledBus struct {
	next webhookfn.EventPutter
	m    *capacityModel
}

func (b modelledBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if err := b.m.wait(ctx, b.m.cfg.Latency.PutEvents); err != nil {
		return nil, err
	}
	if !b.m.putEvents.take() {
		b.m.met(LimitPutEvents, fmt.Sprintf("%.0f requests/s per account and region", b.m.cfg.Quotas.PutEvents))
		return nil, throttled("PutEvents")
	}
	return b.next.PutEvents(ctx, in, opts...)
}

// modelledChatQueue is the chat queue behind the webhook under the model.
type modelledChatQueue struct {
	next webhookfn.QueueSender
	m    *capacityModel
}

func (q modelledChatQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := q.m.wait(ctx, q.m.cfg.Latency.SendMessageBatch); err != nil {
		return nil, err
	}
	if !q.m.fifoSend.take() {
		q.m.met(LimitSQSFIFO, fmt.Sprintf("%.0f SendMessageBatch/s", q.m.cfg.Quotas.SQSFIFOPerAction))
		return nil, throttled("SendMessageBatch")
	}
	return q.next.SendMessageBatch(ctx, in, opts...)
}

// modelledSQS is an event source's poller under the model: the round
// trips of its receives and deletes, and for a FIFO queue the quota per
// action.
type modelledSQS struct {
	next sqsPoller
	m    *capacityModel
	fifo bool
}

func (s modelledSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if err := s.m.wait(ctx, s.m.cfg.Latency.ReceiveMessage); err != nil {
		return nil, err
	}
	if s.fifo && !s.m.fifoRecv.take() {
		s.m.met(LimitSQSFIFO, fmt.Sprintf("%.0f ReceiveMessage/s", s.m.cfg.Quotas.SQSFIFOPerAction))
		return nil, throttled("ReceiveMessage")
	}
	return s.next.ReceiveMessage(ctx, in, opts...)
}

func (s modelledSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if err := s.m.wait(ctx, s.m.cfg.Latency.DeleteBatch); err != nil {
		return nil, err
	}
	if s.fifo && !s.m.fifoDel.take() {
		s.m.met(LimitSQSFIFO, fmt.Sprintf("%.0f DeleteMessageBatch/s", s.m.cfg.Quotas.SQSFIFOPerAction))
		return nil, throttled("DeleteMessageBatch")
	}
	return s.next.DeleteMessageBatch(ctx, in, opts...)
}

// dynamo models one idempotency call: its round trip and, for a write, the
// table's throughput (a throttled write is an error the worker retries).
func (m *capacityModel) dynamo(ctx context.Context, write bool) error {
	if err := m.wait(ctx, m.cfg.Latency.DynamoDB); err != nil {
		return err
	}
	if write && !m.ddb.take() {
		m.met(LimitDynamoDB, fmt.Sprintf("%.0f write request units/s", m.cfg.Quotas.DynamoDBWrites))
		return throttled("DynamoDB write")
	}
	return nil
}

// lineAPI is the local Messaging API under the model: a round trip per
// call, and LINE's rate limit (429, as LINE answers).
func (m *capacityModel) lineAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := m.wait(r.Context(), m.cfg.Latency.LINE); err != nil {
			return
		}
		if r.Method == http.MethodPost && !m.line.take() {
			m.met(LimitLINE, fmt.Sprintf("%.0f requests/s per channel", m.cfg.Quotas.LINE))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"message":"The API rate limit has been exceeded. Try again later."}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admitWebhook applies the stage throttle and the webhook's share of the
// account's concurrency to one request; done ends the request's share.
// status is 0 when the request may go on, else what API Gateway answers.
func (m *capacityModel) admitWebhook() (status int, done func()) {
	if !m.api.take() {
		m.met(LimitAPIThrottle, fmt.Sprintf("%.0f requests/s, burst %.0f (ApiThrottlingRateLimit, ApiThrottlingBurstLimit)", m.cfg.Quotas.APIRate, m.cfg.Quotas.APIBurst))
		return http.StatusTooManyRequests, func() {}
	}
	n := m.webhookInFlight.Add(1)
	if m.webhookCap > 0 && n > m.webhookCap {
		m.webhookInFlight.Add(-1)
		m.met(LimitConcurrency, fmt.Sprintf("%d concurrent executions (%d left to the webhook)", m.cfg.Quotas.AccountConcurrency, m.webhookCap))
		return http.StatusServiceUnavailable, func() {}
	}
	return 0, func() { m.webhookInFlight.Add(-1) }
}

// esmGate scales one SQS event source's pollers: poller i of the mapping
// polls only while i < active. Under Config.Capacity it models how Lambda
// scales the mapping: ESMInitial concurrent batches when messages appear,
// ESMRampPerMinute more per (modelled) minute while messages are still
// waiting, up to the mapping's MaximumConcurrency. Without it the gate
// scales on demand (demandGate): from min(5, MaximumConcurrency), one more
// poller each time the highest active poller receives messages and one
// fewer each time it receives none, so that an idle mapping does not hold
// MaximumConcurrency long polls (50 on the chat queue) that every queue
// change would wake, and within a ceiling of 4 per CPU.
type esmGate struct {
	active  atomic.Int32
	max     int32
	initial int32
	demand  bool        // scaled by received, not by the modelled ramp
	atMax   atomic.Bool // the mapping ran at its MaximumConcurrency with messages waiting

	mu   sync.Mutex
	wake chan struct{} // closed (and replaced) when active grows
}

func newESMGate(initial, maxConc int) *esmGate {
	g := &esmGate{max: int32(maxConc), initial: int32(min(initial, maxConc)), wake: make(chan struct{})}
	g.active.Store(g.initial)
	return g
}

// demandGate is the gate of a mapping in plain `linegate local`: it
// scales with received, up to the mapping's MaximumConcurrency but no more
// than localBatchesPerCPU per CPU (at least 5): every function runs in this
// one process, so 50 chat-queue batches of 10 records at once would take
// the CPU from the webhook, which in AWS runs in sandboxes of its own.
// `linegate bench --capacity` models the deployed scaling instead.
func demandGate(maxConc int) *esmGate {
	g := newESMGate(defaultPollers, min(maxConc, max(defaultPollers, localBatchesPerCPU*runtime.GOMAXPROCS(0))))
	g.demand = true
	return g
}

// localBatchesPerCPU bounds a mapping's concurrent batches in plain
// `linegate local` (demandGate).
const localBatchesPerCPU = 4

// grow adds one concurrent batch, up to the maximum (reporting whether it
// could), and wakes the waiting pollers.
func (g *esmGate) grow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.active.Load()
	if a >= g.max {
		return false
	}
	g.active.Store(a + 1)
	close(g.wake)
	g.wake = make(chan struct{})
	return true
}

// received is what poller i got from one receive; a demand gate scales on
// it (the capacity model's ignores it).
func (g *esmGate) received(i, n int) {
	if !g.demand || int32(i) != g.active.Load()-1 {
		return
	}
	if n > 0 {
		g.grow()
		return
	}
	g.mu.Lock()
	if a := g.active.Load(); a > g.initial && int32(i) == a-1 {
		g.active.Store(a - 1)
	}
	g.mu.Unlock()
}

// gate returns the gate of a mapping (made and started on first use);
// backlog reports whether messages wait in its queue.
func (m *capacityModel) gate(ctx context.Context, queue string, maxConc int, backlog func() bool) *esmGate {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.gates[queue]; ok {
		return g
	}
	initial := m.cfg.Quotas.ESMInitial
	if initial <= 0 {
		initial = maxConc
	}
	g := newESMGate(initial, maxConc)
	m.gates[queue] = g
	if per := m.cfg.Quotas.ESMRampPerMinute; per > 0 {
		step := m.dilate(time.Minute / time.Duration(per))
		go func() {
			t := time.NewTicker(step)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if backlog() && !g.grow() {
					g.atMax.Store(true)
				}
			}
		}()
	}
	return g
}

// await blocks poller i until the mapping runs that many batches at once;
// it reports false when ctx ended.
func (g *esmGate) await(ctx context.Context, i int) bool {
	for {
		g.mu.Lock()
		ok, wake := int32(i) < g.active.Load(), g.wake
		g.mu.Unlock()
		if ok {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		}
	}
}

// MappingScale is one SQS event source's scaling in a capacity run.
type MappingScale struct {
	Queue  string `json:"queue"`
	Active int    `json:"active"`
	Max    int    `json:"max"`
	AtMax  bool   `json:"ranAtMaximumWithBacklog"`
}

// CapacityLimits lists the modelled limits the run met, the first first
// (nil without Config.Capacity).
func (r *Runtime) CapacityLimits() []LimitHit {
	if r.model == nil {
		return nil
	}
	return r.model.hits()
}

// CapacityAPIBurst is how much of the stage's burst is left now (its token
// bucket's level; +Inf without Config.Capacity or a throttle). A burst that
// drains while a rate is offered means the rate is above the stage's.
func (r *Runtime) CapacityAPIBurst() float64 {
	if r.model == nil {
		return math.Inf(1)
	}
	return r.model.api.level()
}

// CapacityScaling reports each modelled event source's scaling, by queue
// logical id.
func (r *Runtime) CapacityScaling() []MappingScale {
	if r.model == nil {
		return nil
	}
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	var out []MappingScale
	for q, g := range r.model.gates {
		out = append(out, MappingScale{Queue: q, Active: int(g.active.Load()), Max: int(g.max), AtMax: g.atMax.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// QueueDepth is a queue's depth and the age of its oldest message, the age
// in modelled time under Config.Capacity.
func (r *Runtime) QueueDepth(logicalID string) (visible, inFlight int, oldest time.Duration, err error) {
	q, ok := r.queue(logicalID)
	if !ok {
		return 0, 0, 0, fmt.Errorf("queue %s is not in the template", logicalID)
	}
	if r.mem == nil {
		return 0, 0, 0, fmt.Errorf("queue depth: the in-memory cloud only")
	}
	st := r.mem.QueueStats(r.res.queueURL[q.LogicalID])
	return st.Visible, st.InFlight, st.OldestAge, nil
}
