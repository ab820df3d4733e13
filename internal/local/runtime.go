// Package local runs the whole linegate pipeline in one process, driven by
// template.yaml: API Gateway (POST /webhook), the EventBridge bus and its
// rules, the SQS queues with their visibility timeouts and redrive, Lambda's
// SQS event source mappings (partial batch failures included), the SNS ops
// topic, CloudWatch alarms on queue metrics, the notifier, X-Ray collection,
// and a local LINE Messaging API. The functions run the same cores, built by
// internal/compose, as the Lambdas.
package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/chatops"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/compose/webhookfn"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/internal/xraycollector"
	"github.com/linegate/linegate/pkg/bot"
)

// Defaults of `linegate local`.
const (
	DefaultAddr     = "127.0.0.1:3000"
	DefaultSecret   = "local-channel-secret"
	DefaultOperator = "U0000000000000000000000000000cafe"
	DefaultToken    = "local-channel-access-token"
	DefaultBus      = "linegate"
	// DefaultChannelID is the local channel's ID: the functions mint
	// stateless tokens for it from the local LINE API (which expires them
	// after 15 minutes, compressed by the time scale), so refresh runs here.
	DefaultChannelID = "1234567890"
	// DefaultTraces is how many X-Ray traces /_local/traces keeps, the
	// newest (a worker batch's trace holds a few dozen segments).
	DefaultTraces    = 200
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
	// CLI passes internal/app's).
	Bot func(config.Worker) *bot.Router
	// WorkerEnv, when set, is given each worker function's environment as
	// the function gets it here (the template's, with the local
	// overrides), before Bot: the CLI starts the project's worker binary,
	// the bot's process, with it.
	WorkerEnv func(env map[string]string)
	// Options are added to every worker (benchmarks, chaos).
	WorkerOptions []worker.Option
	// BusLatency is added to every PutEvents and every SendMessageBatch of
	// the webhook, to be honest about the round trip to EventBridge and SQS
	// (about 20 ms) when measuring acknowledgement and end-to-end latency.
	BusLatency time.Duration
	// Limits are the HTTP server's timeouts and body limits (zero fields:
	// DefaultLimits).
	Limits Limits
	// AllowRemote permits an Addr beyond loopback. Every path but the
	// webhook's then needs Token (generated when empty).
	AllowRemote bool
	// Token, when set, is required on every path but the webhook's: /_local,
	// the AWS endpoints, and the LINE API mock (whose clients, the local
	// functions, then use it as their channel access token).
	Token string
	// EventLogSize bounds /_local/events (default DefaultEventLogSize).
	EventLogSize int
	// LineRecords bounds /_local/line/messages and /_local/line/loading
	// (default linemock.DefaultMaxRecords each).
	LineRecords int
	// Traces bounds /_local/traces (default DefaultTraces).
	Traces int
	// Tracing picks the tracing backend every function traces with:
	// config.TracingXRay (the X-Ray SDK) or config.TracingOTel
	// (OpenTelemetry, OTLP datagrams); both reach the same collector and
	// show the same waterfall in /_local/traces and the console. "" takes
	// the template's Tracing parameter, else the X-Ray SDK.
	Tracing config.Backend
	// Capacity, when set, models the deployed stack's latencies, quotas and
	// event source scaling around the pipeline, in dilated time (the
	// capacity bench; the in-memory cloud only). It sets TimeScale to
	// 1/Capacity.Dilation and replaces BusLatency.
	Capacity *Capacity
	// StateDir, when set, keeps the in-memory cloud's state in that
	// directory (created when missing): the queues and DLQs with their FIFO
	// state and in-flight messages, the DynamoDB tables (idempotency
	// records, steps, sessions, crash markers) and the event log survive a
	// crash and a restart. Every change that backs an acknowledgement is
	// durable (fsync'd) before the acknowledgement. Not with EndpointURL:
	// the endpoint keeps its own state.
	StateDir string
	// StateOptions configure the state directory's store (tests: a commit
	// hook).
	StateOptions []localstate.Option
}

// TemplateParams is params plus the values linegate local gives the
// template's parameters that a deploy must set or that are derived per stack:
// OperatorLineIds (required, no default) from OPERATOR_LINE_IDS or
// DefaultOperator, AlertEmail from ALERT_EMAIL (its email subscriptions are
// recorded at /_local/email), and EventBusName "linegate" (a deployed stack
// derives a name unique to it; locally there is one stack). params wins.
func TemplateParams(params map[string]string, getenv func(string) string) map[string]string {
	out := map[string]string{
		"OperatorLineIds": DefaultOperator,
		"EventBusName":    DefaultBus,
	}
	if getenv != nil {
		if ids := getenv("OPERATOR_LINE_IDS"); ids != "" {
			out["OperatorLineIds"] = ids
		}
		if email := getenv("ALERT_EMAIL"); email != "" {
			out["AlertEmail"] = email
		}
	}
	for k, v := range params {
		out[k] = v
	}
	return out
}

// Runtime is a running local pipeline.
type Runtime struct {
	cfg        Config
	top        *template.Topology
	back       backend
	ports      cloudPorts
	mem        *mem.Cloud        // nil with the endpoint backend
	tables     *awswire.Tables   // the AWS endpoint's DynamoDB; nil with the endpoint backend
	state      *localstate.Store // Config.StateDir; nil in memory
	workers    []*workerRun
	workersMu  sync.Mutex
	res        resources
	line       *linemock.Server
	realLINE   bool
	collector  *xraycollector.Collector
	tracer     compose.Tracer // sends this runtime's spans to collector
	tracing    config.Backend
	events     *eventLog
	alarms     *alarmEvaluator
	metrics    *metricStore // the functions' EMF metrics and those put at /_local/metrics
	emails     *outbox      // what the template's email subscriptions would have sent
	sweeps     sweepCounts  // the notifier's sweeps of this run
	silencer   chatops.Silencer
	chatOpsKey string
	model      *capacityModel // Config.Capacity's running model; nil without
	counters   *counters
	console    consoleState // the browser console's stream, transcript, activity and log ring
	out        *printer
	log        *slog.Logger
	srv        *http.Server
	ln         net.Listener
	hooks      []string // the webhook's paths: open without the token
	url        string
	rctx       context.Context // lives until Close; parent of every poller
	cancel     context.CancelFunc
	wg         sync.WaitGroup
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

// Token is what every path but the webhook's requires ("" on loopback
// without Config.Token).
func (r *Runtime) Token() string { return r.cfg.Token }

// ListenAddr is the address the server listens on (0.0.0.0:3000 when bound
// to every interface; URL then names loopback).
func (r *Runtime) ListenAddr() string { return r.ln.Addr().String() }

// Remote reports whether the server listens beyond loopback.
func (r *Runtime) Remote() bool {
	a, ok := r.ln.Addr().(*net.TCPAddr)
	return ok && !a.IP.IsLoopback()
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
	if cfg.Capacity != nil {
		if cfg.EndpointURL != "" || cfg.StateDir != "" {
			return nil, errors.New("local: the capacity model runs on the in-memory cloud only (no endpoint, no --state)")
		}
		cfg.TimeScale, cfg.BusLatency = 1/max(cfg.Capacity.Dilation, 1), 0
	}
	if cfg.Template == "" {
		cfg.Template = "template.yaml"
	}
	if cfg.Traces <= 0 {
		cfg.Traces = DefaultTraces
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
	top, err := template.Load(cfg.Template, TemplateParams(cfg.Params, cfg.Getenv), topts...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Template, err)
	}
	if cfg.StateDir != "" && cfg.EndpointURL != "" {
		return nil, errors.New("--state keeps the in-memory cloud's state; with --endpoint-url the endpoint keeps its own: pass one of them")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.AllowRemote && cfg.Token == "" {
		cfg.Token = newToken()
	}
	ln, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	cs := newConsoleState(cmp.Or(cfg.EventLogSize, DefaultEventLogSize))
	metrics := newMetricStore()
	// The console's Logs pane, and CloudWatch Logs' reading of EMF lines.
	cfg.Logs = &emfTap{next: io.MultiWriter(cfg.Logs, cs.logs), store: metrics}
	r := &Runtime{
		cfg: cfg, top: top, ln: ln, url: "http://" + dialAddr(ln.Addr()), rctx: rctx, cancel: cancel,
		events: newEventLog(cfg.EventLogSize), counters: newCounters(), out: newPrinter(cfg.Out),
		log: telemetry.NewLogger(cfg.Logs), console: cs, metrics: metrics, emails: &outbox{},
	}
	if cfg.StateDir != "" {
		if r.state, err = openState(cfg.StateDir, cfg.StateOptions...); err != nil {
			r.Close()
			return nil, err
		}
		store, err := newJournaledStore(cfg.EventLogSize, r.state)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("--state %s: %w", cfg.StateDir, err)
		}
		r.events.store = store
	}
	if err := r.start(ctx, rctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Runtime) start(ctx, rctx context.Context) error {
	// Tracing: spans from every function go to this runtime's collector on
	// loopback, the local X-Ray daemon, which reads the X-Ray SDK's segment
	// documents and OpenTelemetry's OTLP datagrams alike. The backend
	// travels in the context of each invocation (startInvocation), not in
	// process-wide state, so two runtimes (or a runtime and a test's own
	// tracing) in one process stay apart.
	r.collector = xraycollector.New(xraycollector.WithLogger(r.log), xraycollector.WithMaxTraces(r.cfg.Traces))
	if err := r.collector.Listen(rctx, "127.0.0.1:0"); err != nil {
		return fmt.Errorf("x-ray collector: %w", err)
	}
	tracing, err := r.tracingBackend()
	if err != nil {
		return err
	}
	tracer, err := compose.NewTracing(tracing, compose.TracingOptions{Daemon: r.collector.Addr(), Service: "linegate-local",
		Region: r.top.Region, Local: true, Logger: r.log})
	if err != nil {
		return err
	}
	r.tracer, r.tracing = tracer, tracing

	// LINE: the local Messaging API unless a real token is configured.
	r.realLINE = r.cfg.Getenv("LINE_CHANNEL_ACCESS_TOKEN") != ""
	if !r.realLINE {
		r.line = r.newLINE()
	}

	if r.cfg.EndpointURL != "" {
		r.back = newEndpointBackend(r.cfg.EndpointURL, r.top.Region, r.log)
	} else {
		mb, err := newMemBackend(r.top, r.cfg.TimeScale, r.log, r.state)
		if err != nil {
			return err
		}
		r.back = mb
		if r.state != nil {
			if err := r.releaseClaims(ctx, mb.tables); err != nil {
				return err
			}
		}
	}
	r.ports = r.back.ports()
	r.ports.chat = r.ports.queues
	res, err := provision(ctx, r.ports.queues, r.ports.rules, r.ports.topics, r.top)
	if mb, ok := r.back.(*memBackend); ok {
		r.mem, r.tables = mb.c, mb.tables
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
	if r.cfg.Capacity != nil {
		reserved := 0
		for _, f := range r.top.Functions {
			reserved += f.ReservedConcurrency
		}
		r.model = newCapacityModel(*r.cfg.Capacity, reserved)
		r.ports.bus = modelledBus{next: r.ports.bus, m: r.model}
		r.ports.chat = modelledChatQueue{next: r.ports.chat, m: r.model}
	}
	r.ports.bus = acceptingBus{next: r.ports.bus, r: r}
	r.ports.chat = holdingChatQueue{next: r.ports.chat, r: r}

	mux := http.NewServeMux()
	// The alarm evaluator exists before the functions: the worker's Silence
	// button mutes its alarms.
	if r.alarms, err = newAlarmEvaluator(r); err != nil {
		return err
	}
	r.silencer = r.alarms
	for _, sub := range r.top.Subscriptions {
		if sub.Protocol == "email" {
			if err := r.subscribeEmail(ctx, sub); err != nil {
				return err
			}
		}
	}
	if err := r.startFunctions(ctx, rctx, mux); err != nil {
		return err
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.alarms.run(rctx) }()

	r.routes(mux)
	lim := r.cfg.Limits
	r.srv = &http.Server{
		Handler:           guard{next: mux, limits: lim, token: r.cfg.Token, webhook: r.isWebhookPath, public: console.IsAsset},
		ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout, WriteTimeout: lim.WriteTimeout,
		IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: lim.MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelWarn),
	}
	r.srv.RegisterOnShutdown(r.console.hub.Close) // the console's streams never go idle
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
	if r.tracer != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = r.tracer.Shutdown(sctx)
		cancel()
	}
	if r.collector != nil {
		_ = r.collector.Close()
	}
	if r.state != nil {
		_ = r.state.Close()
	}
	return nil
}

// StateDir is the directory the runtime keeps its state in ("": memory).
func (r *Runtime) StateDir() string { return r.cfg.StateDir }

// functionEnv is a function's environment from the template with the local
// overrides: plain secrets instead of SSM parameters, the local LINE API, and
// the developer's own settings.
func (r *Runtime) functionEnv(f template.Function) config.Getenv {
	env := r.functionEnvMap(f)
	return func(k string) string { return env[k] }
}

// functionEnvMap is functionEnv as a map.
func (r *Runtime) functionEnvMap(f template.Function) map[string]string {
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
		env["LINE_CHANNEL_ACCESS_TOKEN"] = orDefault(r.cfg.Token, DefaultToken)
		env["LINE_API_BASE_URL"] = r.url
		r.localLINEEnv(env)
	}
	r.localOpsEnv(env)
	env["PROBES_ENABLED"] = orDefault(get("PROBES_ENABLED"), "true")
	env["OPERATOR_LINE_IDS"] = orDefault(get("OPERATOR_LINE_IDS"), DefaultOperator)
	if tz := get("OPERATOR_TIMEZONE"); tz != "" {
		env["OPERATOR_TIMEZONE"] = tz
	}
	if b := get("BOT_USER_ID"); b != "" {
		env["BOT_USER_ID"] = b
	}
	if c := r.cfg.Capacity; c != nil {
		// The webhook's hand-off deadline is modelled time too: dilated,
		// within what the webhook's configuration accepts (5 s).
		if ms, err := strconv.Atoi(env["PUBLISH_DEADLINE_MS"]); err == nil {
			env["PUBLISH_DEADLINE_MS"] = strconv.Itoa(min(int(float64(ms)*max(c.Dilation, 1)), 5000))
		}
	}
	return env
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
// an API event makes it the webhook; SQS events the notifier when a queue it
// reads is subscribed to a topic (the OpsQueue), the worker otherwise; an SNS
// event the notifier. A template edit (another queue on the worker, another
// function on a topic) changes what runs here.
func (r *Runtime) startFunctions(ctx, rctx context.Context, mux *http.ServeMux) error {
	started := 0
	for _, f := range r.top.Functions {
		env := r.functionEnv(f)
		switch {
		case len(f.APIEvents) > 0:
			if err := r.startWebhook(ctx, rctx, f, env, mux); err != nil {
				return err
			}
		case len(f.SQSEvents) > 0 && r.readsTopic(f):
			if err := r.startNotifier(ctx, rctx, f, env); err != nil {
				return err
			}
		case len(f.SQSEvents) > 0:
			if err := r.startWorker(ctx, rctx, f, env); err != nil {
				return err
			}
		case len(f.SNSEvents) > 0:
			if err := r.startNotifier(ctx, rctx, f, env); err != nil {
				return err
			}
		case len(f.ScheduleEvents) > 0:
			if err := r.startScheduled(ctx, rctx, f, env); err != nil {
				return err
			}
		default:
			continue
		}
		started++
	}
	if started == 0 {
		return errors.New("the template has no function with an Api, SQS, SNS or Schedule event")
	}
	return nil
}

// startWebhook serves the webhook's API routes and polls its SQS event
// sources (the replay queue), as Lambda would invoke the one function for
// both.
func (r *Runtime) startWebhook(ctx, rctx context.Context, f template.Function, env config.Getenv, mux *http.ServeMux) error {
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
	if len(f.SQSEvents) > 0 {
		sources, err := r.sqsSources(f, h.Replays, m, false)
		if err != nil {
			return err
		}
		(&workerRun{sources: sources}).start(rctx, &r.wg)
	}
	api := &apiGateway{fn: f, handler: h.APIGateway, metrics: m, runtime: r, secrets: secrets, maxBody: cfg.MaxBodyBytes}
	for _, a := range f.APIEvents {
		r.hooks = append(r.hooks, a.Path)
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
		store = tracedStore{next: store, region: r.top.Region, model: r.model}
	}
	if r.cfg.WorkerEnv != nil {
		r.cfg.WorkerEnv(r.functionEnvMap(f))
	}
	c, m := r.common(f.Name)
	p, err := workerfn.New(ctx, cfg, r.cfg.Bot(cfg), workerfn.Deps{
		Store: store, Ops: r.ports.ops, Function: f.Name, Region: r.top.Region,
		Queues: redriveAware{Queues: r.ports.queues, events: r.events, out: r.out, scale: r.delayScale()}, Silencer: r.silencer,
		Observer: r.observeRecord, Options: append([]worker.Option{worker.WithCompletionContext(r.completionContext)}, r.cfg.WorkerOptions...),
	}, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	sources, err := r.sqsSources(f, p.Handle, m, false)
	if err != nil {
		return err
	}
	run := &workerRun{sources: sources}
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
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); es.poll(ctx, crashed, i) }()
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

// Events lists the events of /_local/events (the newest EventLogSize), one
// per webhookEventId, oldest first.
func (r *Runtime) Events() []EventOutcome { return r.events.list() }

// readsTopic reports whether one of f's SQS event sources reads a queue that
// an SNS topic of the template delivers to: the notifier behind the OpsQueue.
func (r *Runtime) readsTopic(f template.Function) bool {
	for _, m := range f.SQSEvents {
		for _, sub := range r.top.Subscriptions {
			if sub.Queue == m.Queue {
				return true
			}
		}
	}
	return false
}

// startNotifier runs the notifier on its event sources: SQS mappings of the
// queues the ops topic feeds (polled like the worker's, with their batching
// window), or SNS subscriptions delivering each message on its own.
func (r *Runtime) startNotifier(ctx, rctx context.Context, f template.Function, env config.Getenv) error {
	cfg, err := config.LoadNotifier(env)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	c, m := r.common(f.Name)
	deps, err := r.notifierDeps(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	n, err := notifierfn.New(ctx, cfg, r.top.Region, deps, c)
	if err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	r.startSweeps(rctx, f, m, n)
	handle := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := n.HandleQueue(ctx, ev)
		r.out.notifiedBatch(len(ev.Records), len(resp.BatchItemFailures), cfg.Operators)
		return resp, err
	}
	sources, err := r.sqsSources(f, handle, m, true)
	if err != nil {
		return err
	}
	(&workerRun{sources: sources}).start(rctx, &r.wg)
	for _, s := range f.SNSEvents {
		arn, ok := r.res.topicARN[s.Topic]
		if !ok {
			return fmt.Errorf("%s: event %s: topic %s is not in the template", f.LogicalID, s.Name, s.Topic)
		}
		invoke := func(ctx context.Context, ev events.SNSEvent) error {
			err := r.invoke(ctx, f, m, func(ctx context.Context) error { return n.Handle(ctx, ev) })
			r.out.notified(len(ev.Records), cfg.Operators, err)
			return err
		}
		if err := r.back.subscribe(ctx, arn, invoke); err != nil {
			return fmt.Errorf("%s: %w", f.LogicalID, err)
		}
	}
	return nil
}

// sqsSources is an event source for each of f's SQS mappings, handing its
// batches to handle; alerts marks the notifier's, whose dead letters are
// alerts rather than LINE events.
func (r *Runtime) sqsSources(f template.Function, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error),
	metrics interface{ Flush() error }, alerts bool) ([]*eventSource, error) {
	var out []*eventSource
	for _, sm := range f.SQSEvents {
		q, ok := r.queue(sm.Queue)
		if !ok {
			return nil, fmt.Errorf("%s: event %s: queue %s is not in the template", f.LogicalID, sm.Name, sm.Queue)
		}
		es := &eventSource{runtime: r, sqs: r.ports.queues, fn: f, mapping: sm, queue: q, url: r.res.queueURL[q.LogicalID],
			arn: r.res.queueARN[q.LogicalID], handle: handle, metrics: metrics, alerts: alerts}
		url, n := es.url, sm.MaxConcurrency
		if n <= 0 {
			n = defaultPollers
		}
		if r.model != nil {
			es.sqs = modelledSQS{next: r.ports.queues, m: r.model, fifo: q.FIFO}
			es.gate = r.model.gate(r.rctx, q.LogicalID, n, func() bool { return r.mem.QueueStats(url).Visible > 0 })
		} else {
			es.gate = demandGate(n)
		}
		out = append(out, es)
	}
	return out, nil
}

// invoke runs fn as one invocation of f that no event source polls for (an
// SNS delivery, a schedule): in its own segment, within f's timeout; then
// it flushes f's metrics and counts the invocation.
func (r *Runtime) invoke(ctx context.Context, f template.Function, metrics interface{ Flush() error }, fn func(context.Context) error) error {
	ctx, seg := r.startInvocation(ctx, f.Name)
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	err := fn(ctx)
	seg.End(err)
	_ = metrics.Flush()
	r.counters.invoked(f.Name, err)
	return err
}

// startInvocation begins the span of one invocation of function (a root
// segment, as Lambda's facade segment is), with this runtime's backend, sent
// to its collector; ending it flushes the backend, as at the end of a Lambda
// invocation. Every local entry point that runs a function (API Gateway, the
// SQS event source pollers, SNS deliveries) starts its span here.
func (r *Runtime) startInvocation(ctx context.Context, function string) (context.Context, *telemetry.Span) {
	return telemetry.StartInvocation(telemetry.WithBackend(ctx, r.tracer), function)
}

// tracingBackend is the backend Config.Tracing names, else the template's
// Tracing parameter, else the X-Ray SDK.
func (r *Runtime) tracingBackend() (config.Backend, error) {
	if r.cfg.Tracing != "" {
		return r.cfg.Tracing, nil
	}
	b, err := config.ParseBackend(r.top.Parameters["Tracing"])
	if err != nil {
		return "", fmt.Errorf("template parameter Tracing %w", err)
	}
	return b, nil
}

// Tracing is the tracing backend the runtime's functions trace with.
func (r *Runtime) Tracing() config.Backend { return r.tracing }

// dialAddr is how this machine reaches a listener: its own address, or
// loopback when it listens on every interface.
func dialAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
	}
	return a.String()
}

// isWebhookPath reports whether path is one of the webhook's API paths.
func (r *Runtime) isWebhookPath(path string) bool {
	for _, h := range r.hooks {
		if path == h {
			return true
		}
	}
	return false
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

// delayScale is how much the cloud divides SQS delays by: the time scale
// for the in-memory cloud, 1 for an endpoint (it keeps real time).
func (r *Runtime) delayScale() float64 {
	if r.mem == nil || r.cfg.TimeScale <= 1 {
		return 1
	}
	return r.cfg.TimeScale
}

// observeRecord books one worker receive in the event log and the console.
// A record the worker dead-lettered itself (permanent, malformed, retries
// exhausted) is marked with its queue's DLQ, so a redrive of that DLQ puts
// the event back to queued, as one SQS dead-lettered does.
//
// A debounce flush that ran its chat's burst handled every event of it: each
// is booked with the flush's receive.
func (r *Runtime) observeRecord(res worker.Result) {
	r.events.observe(res)
	r.observeReceive(res)
	if res.Outcome == worker.OutcomeOK || res.Outcome == worker.OutcomeHeld {
		for _, id := range res.Batch {
			if id != res.WebhookEventID {
				in := res
				in.WebhookEventID, in.Batch = id, nil
				r.events.observe(in)
				r.observeReceive(in)
			}
		}
	}
	if res.Outcome == worker.OutcomeDeadLettered {
		if q, ok := r.queueByName(res.Queue); ok {
			if dlq, ok := r.queue(q.RedriveTarget); ok {
				r.events.deadLettered(cmp.Or(res.WebhookEventID, res.MessageID), dlq.Name)
			}
		}
	}
	r.out.record(res)
}
