// Package local runs the whole linegate pipeline in one process, driven by
// template.yaml: API Gateway (POST /webhook), the EventBridge bus and its
// rules, the SQS queues with their visibility timeouts and redrive, Lambda's
// SQS event source mappings (partial batch failures included), the SNS ops
// topic, CloudWatch alarms on queue metrics, the notifier, X-Ray collection,
// and a local LINE Messaging API. The functions run the same cores, built by
// pkg/compose, as the Lambdas.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/internal/xraycollector"
	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/compose/notifierfn"
	"github.com/linegate/linegate/pkg/compose/webhookfn"
	"github.com/linegate/linegate/pkg/compose/workerfn"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/telemetry"
	"github.com/linegate/linegate/pkg/worker"
)

// Defaults of `linegate local`.
const (
	DefaultAddr      = "127.0.0.1:3000"
	DefaultSecret    = "local-channel-secret"
	DefaultOperator  = "U0000000000000000000000000000cafe"
	DefaultToken     = "local-channel-access-token"
	defaultPollers   = 5
	maxLocalPollWait = 20 // seconds of SQS long polling, the maximum; a cancelled context ends it
)

// Config configures a local run.
type Config struct {
	Template    string            // path of template.yaml
	Params      map[string]string // template parameter overrides
	Addr        string            // where to serve (default 127.0.0.1:3000; ":0" picks a port)
	TimeScale   float64           // >1 compresses visibility timeouts and alarm periods
	EndpointURL string            // AWS-compatible endpoint; "" runs the in-memory cloud
	Getenv      func(string) string
	Out         io.Writer // one human-readable line per notable thing, and the "ready" line
	Logs        io.Writer // the functions' JSON logs and EMF lines (default: discarded)
	// Bot builds the bot the worker runs from the worker's configuration
	// (required: linegate's own packages never import an example bot; the
	// CLI passes pkg/app's).
	Bot func(config.Worker) *bot.Router
	// Options are added to every worker (benchmarks, chaos).
	WorkerOptions []worker.Option
	// BusLatency is added to every PutEvents and every SendMessageBatch of
	// the webhook, to be honest about the round trip to EventBridge and SQS
	// (about 20 ms) when measuring acknowledgement and end-to-end latency.
	BusLatency time.Duration
}

// Runtime is a running local pipeline.
type Runtime struct {
	cfg       Config
	top       *template.Topology
	back      backend
	ports     cloudPorts
	mem       *mem.Cloud // nil with the endpoint backend
	workers   []*workerRun
	workersMu sync.Mutex
	res       resources
	line      *linemock.Server
	realLINE  bool
	collector *xraycollector.Collector
	tracer    *telemetry.Tracer // sends this runtime's segments to collector
	events    *eventLog
	alarms    *alarmEvaluator
	counters  *counters
	out       *printer
	log       *slog.Logger
	srv       *http.Server
	ln        net.Listener
	url       string
	rctx      context.Context // lives until Close; parent of every poller
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// URL is the base URL the runtime serves on (http://host:port).
func (r *Runtime) URL() string { return r.url }

// WebhookURL is the URL LINE would post webhooks to.
func (r *Runtime) WebhookURL() string {
	for _, f := range r.top.Functions {
		for _, a := range f.APIEvents {
			return r.url + a.Path
		}
	}
	return r.url + "/webhook"
}

// LINE is the local Messaging API (nil when a real channel token is used).
func (r *Runtime) LINE() *linemock.Server { return r.line }

// Topology is what the template described.
func (r *Runtime) Topology() *template.Topology { return r.top }

// Start loads the template, creates its resources, starts the functions and
// serves HTTP. It returns once the webhook accepts requests.
func Start(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Template == "" {
		cfg.Template = "template.yaml"
	}
	if cfg.Bot == nil {
		return nil, errors.New("local: Config.Bot is nil: pass the bot to run (for example app.New)")
	}
	var topts []template.Option
	if cfg.EndpointURL != "" {
		// ARNs in the functions' environment must be the endpoint's.
		account, err := endpointAccount(ctx, cfg.EndpointURL)
		if err != nil {
			return nil, err
		}
		topts = append(topts, template.WithAccountID(account))
	}
	top, err := template.Load(cfg.Template, cfg.Params, topts...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Template, err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Runtime{
		cfg: cfg, top: top, ln: ln, url: "http://" + ln.Addr().String(), rctx: rctx, cancel: cancel,
		events: newEventLog(), counters: newCounters(), out: &printer{w: cfg.Out},
		log: telemetry.NewLogger(cfg.Logs),
	}
	if err := r.start(ctx, rctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Runtime) start(ctx, rctx context.Context) error {
	// X-Ray: segments from every function go to this runtime's collector on
	// loopback. The tracer travels in the context of each invocation
	// (startInvocation), not in process-wide SDK state, so two runtimes (or
	// a runtime and a test's own tracing) in one process stay apart.
	r.collector = xraycollector.New(xraycollector.WithLogger(r.log))
	if err := r.collector.Listen(rctx, "127.0.0.1:0"); err != nil {
		return fmt.Errorf("x-ray collector: %w", err)
	}
	tracer, err := telemetry.NewTracer(telemetry.WithDaemonAddress(r.collector.Addr()), telemetry.WithSampleAll())
	if err != nil {
		return fmt.Errorf("x-ray: %w", err)
	}
	r.tracer = tracer

	// LINE: the local Messaging API unless a real token is configured.
	r.realLINE = r.cfg.Getenv("LINE_CHANNEL_ACCESS_TOKEN") != ""
	if !r.realLINE {
		r.line = linemock.New()
	}

	if r.cfg.EndpointURL != "" {
		r.back = newEndpointBackend(r.cfg.EndpointURL, r.top.Region, r.log)
	} else {
		r.back = newMemBackend(r.top, r.cfg.TimeScale, r.log)
	}
	r.ports = r.back.ports()
	r.ports.chat = r.ports.queues
	res, err := provision(ctx, r.ports.queues, r.ports.rules, r.ports.topics, r.top)
	if mb, ok := r.back.(*memBackend); ok {
		r.mem = mb.c
		rtt := roundTrip{region: r.top.Region, latency: r.cfg.BusLatency}
		r.ports.bus, r.ports.chat = tracedBus{r.ports.bus, rtt}, tracedChatQueue{r.ports.chat, rtt}
		r.ports.ops = tracedTopics{next: r.ports.ops, region: r.top.Region}
	} else if r.cfg.BusLatency > 0 {
		rtt := roundTrip{region: r.top.Region, latency: r.cfg.BusLatency}
		r.ports.bus, r.ports.chat = tracedBus{r.ports.bus, rtt}, tracedChatQueue{r.ports.chat, rtt}
	}
	if err != nil {
		return err
	}
	r.res = res

	mux := http.NewServeMux()
	if err := r.startFunctions(ctx, rctx, mux); err != nil {
		return err
	}
	r.alarms = newAlarmEvaluator(r)
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.alarms.run(rctx) }()

	r.routes(mux)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.srv.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("local server stopped", "error", err.Error())
		}
	}()
	return nil
}

// Close stops the pollers, the alarms, the server and the cloud.
func (r *Runtime) Close() error {
	r.cancel()
	if r.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = r.srv.Shutdown(sctx)
		cancel()
	} else {
		_ = r.ln.Close()
	}
	r.wg.Wait()
	if r.back != nil {
		r.back.close()
	}
	if r.collector != nil {
		_ = r.collector.Close()
	}
	return nil
}

// functionEnv is a function's environment from the template with the local
// overrides: plain secrets instead of SSM parameters, the local LINE API, and
// the developer's own settings.
func (r *Runtime) functionEnv(f template.Function) config.Getenv {
	env := map[string]string{}
	for k, v := range f.Env {
		env[k] = v
	}
	get := r.cfg.Getenv
	env["AWS_REGION"] = r.top.Region
	env["LINE_CHANNEL_SECRET_PARAM"] = ""
	env["LINE_CHANNEL_SECRET_PREVIOUS_PARAM"] = ""
	env["LINE_CHANNEL_ACCESS_TOKEN_PARAM"] = ""
	env["LINE_CHANNEL_SECRET"] = orDefault(get("LINE_CHANNEL_SECRET"), DefaultSecret)
	env["LINE_CHANNEL_SECRET_PREVIOUS"] = get("LINE_CHANNEL_SECRET_PREVIOUS")
	if r.realLINE {
		env["LINE_CHANNEL_ACCESS_TOKEN"] = get("LINE_CHANNEL_ACCESS_TOKEN")
		env["LINE_API_BASE_URL"] = orDefault(get("LINE_API_BASE_URL"), "https://api.line.me")
	} else {
		env["LINE_CHANNEL_ACCESS_TOKEN"] = DefaultToken
		env["LINE_API_BASE_URL"] = r.url
	}
	env["PROBES_ENABLED"] = orDefault(get("PROBES_ENABLED"), "true")
	env["OPERATOR_LINE_IDS"] = orDefault(get("OPERATOR_LINE_IDS"), DefaultOperator)
	if tz := get("OPERATOR_TIMEZONE"); tz != "" {
		env["OPERATOR_TIMEZONE"] = tz
	}
	if b := get("BOT_USER_ID"); b != "" {
		env["BOT_USER_ID"] = b
	}
	return func(k string) string { return env[k] }
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// common builds the observability every local function gets: the same as
// in Lambda (compose.NewObservability), with logs and EMF lines going to
// Config.Logs.
func (r *Runtime) common(function string) (compose.Common, *telemetry.Metrics) {
	o := compose.NewObservability(r.log.With("function", function), r.cfg.Logs, "linegate", function)
	return o.Common, o.EMF
}

// startFunctions builds each function of the template by what triggers it:
// an API event makes it the webhook, SQS events the worker, an SNS event the
// notifier. A template edit (another queue on the worker, another function
// on a topic) changes what runs here.
func (r *Runtime) startFunctions(ctx, rctx context.Context, mux *http.ServeMux) error {
	started := 0
	for _, f := range r.top.Functions {
		env := r.functionEnv(f)
		switch {
		case len(f.APIEvents) > 0:
			if err := r.startWebhook(ctx, f, env, mux); err != nil {
				return err
			}
		case len(f.SQSEvents) > 0:
			if err := r.startWorker(ctx, rctx, f, env); err != nil {
				return err
			}
		case len(f.SNSEvents) > 0:
			if err := r.startNotifier(ctx, f, env); err != nil {
				return err
			}
		default:
			continue
		}
		started++
	}
	if started == 0 {
		return errors.New("the template has no function with an Api, SQS or SNS event")
	}
	return nil
}

func (r *Runtime) startWebhook(ctx context.Context, f template.Function, env config.Getenv, mux *http.ServeMux) error {
	cfg, err := config.LoadWebhook(env)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	c, m := r.common(f.Name)
	h, err := webhookfn.New(ctx, cfg, r.ports.bus, r.ports.chat, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	secrets := [][]byte{[]byte(cfg.Secret.Value)}
	if cfg.PreviousSecret.Value != "" {
		secrets = append(secrets, []byte(cfg.PreviousSecret.Value))
	}
	api := &apiGateway{fn: f, handler: h.APIGateway, metrics: m, runtime: r, secrets: secrets}
	for _, a := range f.APIEvents {
		mux.Handle(strings.ToUpper(a.Method)+" "+a.Path, api)
		if !strings.EqualFold(a.Method, "any") {
			mux.Handle(a.Path, api) // other methods reach the core, which answers 405
		}
	}
	return nil
}

func (r *Runtime) startWorker(ctx, rctx context.Context, f template.Function, env config.Getenv) error {
	cfg, err := config.LoadWorker(env)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	var table *template.Table
	for i := range r.top.Tables {
		if r.top.Tables[i].Name == cfg.IdempotencyTable {
			table = &r.top.Tables[i]
		}
	}
	if table == nil {
		return fmt.Errorf("%s: IDEMPOTENCY_TABLE %q is not a table of the template", f.LogicalID, cfg.IdempotencyTable)
	}
	store, err := r.back.store(ctx, *table)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	if r.mem != nil {
		store = tracedStore{next: store, region: r.top.Region}
	}
	c, m := r.common(f.Name)
	p, err := workerfn.New(ctx, cfg, r.cfg.Bot(cfg), workerfn.Deps{
		Store: store, Ops: r.ports.ops, Queues: r.ports.queues, Function: f.Name, Region: r.top.Region,
		Observer: func(res worker.Result) { r.events.observe(res); r.out.record(res) }, Options: r.cfg.WorkerOptions,
	}, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	run := &workerRun{}
	for _, sm := range f.SQSEvents {
		q, ok := r.queue(sm.Queue)
		if !ok {
			return fmt.Errorf("%s: event %s: queue %s is not in the template", f.LogicalID, sm.Name, sm.Queue)
		}
		run.sources = append(run.sources, &eventSource{runtime: r, sqs: r.ports.queues, fn: f, mapping: sm, queue: q, url: r.res.queueURL[q.LogicalID],
			arn: r.res.queueARN[q.LogicalID], handle: p.Handle, metrics: m})
	}
	r.workersMu.Lock()
	r.workers = append(r.workers, run)
	r.workersMu.Unlock()
	run.start(rctx, &r.wg)
	return nil
}

// workerRun is the pollers of one worker function: what "the worker
// process" is locally, so that a crash can be simulated.
type workerRun struct {
	sources []*eventSource
	mu      sync.Mutex
	cancel  context.CancelFunc
	crashed chan struct{}
}

func (w *workerRun) start(parent context.Context, wg *sync.WaitGroup) {
	ctx, cancel := context.WithCancel(parent)
	w.mu.Lock()
	w.cancel = cancel
	w.crashed = make(chan struct{})
	crashed := w.crashed
	w.mu.Unlock()
	for _, es := range w.sources {
		n := es.mapping.MaxConcurrency
		if n <= 0 {
			n = defaultPollers
		}
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); es.poll(ctx, crashed) }()
		}
	}
}

// CrashWorkers kills every worker mid-batch, the way a Lambda sandbox dies:
// in-flight invocations are abandoned without deleting anything, and new
// pollers start at once (they live until Close). What was in flight comes
// back after its visibility timeout; nothing is lost.
func (r *Runtime) CrashWorkers() {
	r.workersMu.Lock()
	defer r.workersMu.Unlock()
	for _, w := range r.workers {
		w.mu.Lock()
		close(w.crashed)
		w.cancel()
		w.mu.Unlock()
		w.start(r.rctx, &r.wg)
	}
	r.out.line("worker    crashed on purpose: in-flight batches abandoned, pollers restarted")
}

// Cloud is the in-memory cloud, for fault injection (nil with an endpoint).
func (r *Runtime) Cloud() *mem.Cloud { return r.mem }

// Events lists every event that reached a worker, with its latest outcome.
func (r *Runtime) Events() []EventOutcome { return r.events.list() }

func (r *Runtime) startNotifier(ctx context.Context, f template.Function, env config.Getenv) error {
	cfg, err := config.LoadNotifier(env)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	c, m := r.common(f.Name)
	n, err := notifierfn.New(ctx, cfg, r.top.Region, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	for _, s := range f.SNSEvents {
		arn, ok := r.res.topicARN[s.Topic]
		if !ok {
			return fmt.Errorf("%s: event %s: topic %s is not in the template", f.LogicalID, s.Name, s.Topic)
		}
		invoke := func(ctx context.Context, ev events.SNSEvent) error {
			ctx, seg := r.startInvocation(ctx, f.Name)
			ctx, cancel := context.WithTimeout(ctx, f.Timeout)
			defer cancel()
			err := n.Handle(ctx, ev)
			seg.End(err)
			_ = m.Flush()
			r.counters.invoked(f.Name, err)
			r.out.notified(len(ev.Records), cfg.Operators, err)
			return err
		}
		if err := r.back.subscribe(ctx, arn, invoke); err != nil {
			return fmt.Errorf("%s: %w", f.LogicalID, err)
		}
	}
	return nil
}

// startInvocation begins the segment of one invocation of function, as
// Lambda's facade segment does, sent to this runtime's collector. Every
// local entry point that runs a function (API Gateway, the SQS event source
// pollers, SNS deliveries) starts its segment here.
func (r *Runtime) startInvocation(ctx context.Context, function string) (context.Context, *telemetry.Span) {
	return telemetry.StartSegment(r.tracer.Context(ctx), function, telemetry.Header{})
}

// queue finds a queue of the template by logical id.
func (r *Runtime) queue(logicalID string) (template.Queue, bool) {
	for _, q := range r.top.Queues {
		if q.LogicalID == logicalID {
			return q, true
		}
	}
	return template.Queue{}, false
}

// queueByName finds a queue of the template by physical name.
func (r *Runtime) queueByName(name string) (template.Queue, bool) {
	for _, q := range r.top.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return template.Queue{}, false
}

// isDLQ reports whether some queue redrives to q.
func (r *Runtime) isDLQ(q template.Queue) bool {
	for _, o := range r.top.Queues {
		if o.RedriveTarget == q.LogicalID {
			return true
		}
	}
	for _, rule := range r.top.Rules {
		for _, t := range rule.Targets {
			if t.DLQLogicalID == q.LogicalID {
				return true
			}
		}
	}
	for _, f := range r.top.Functions {
		if f.OnFailureQueue == q.LogicalID {
			return true
		}
	}
	return false
}

// sortedQueues is the template's queues by name.
func (r *Runtime) sortedQueues() []template.Queue {
	qs := append([]template.Queue(nil), r.top.Queues...)
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	return qs
}
