// Package bench measures linegate against the designs it replaces, with the
// same traffic and the same handler: a synchronous webhook that runs the
// handler inside the request (as LINE's samples do), an in-process background
// design that answers 200 and runs the handler in a goroutine, a
// durable-direct design that answers 200 once each event is in an SQS queue
// and runs the handler from workers polling it, and the local linegate
// pipeline built from template.yaml. The baselines answer as the samples do
// (reply only); the bench counts, per event, how many times the handler did
// its work (its side effect) as well as the answers the user saw.
//
// Traffic comes from a local LINE platform (internal/lineplatform): signed text
// events from distinct users, delivered at a fixed concurrency with LINE's
// 2 s timeout and redelivery on. Effects are counted where a user would see
// them, in each system's local Messaging API: the handler answers event n
// with "done n". The bench reports acknowledgement latency, LINE-side
// timeouts, redeliveries, duplicate answers, lost events, end-to-end latency
// and throughput; it can kill the workers mid-run (Crash) and inject faults
// (Chaos), and it checks linegate's invariants after every run.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
)

// Defaults of Options.
const (
	DefaultEvents             = 200
	DefaultChaosEvents        = 1000
	DefaultConcurrency        = 20
	DefaultWork               = 3 * time.Second
	DefaultChaosWork          = 50 * time.Millisecond
	DefaultBusLatency         = 20 * time.Millisecond
	DefaultTimeScale          = 60
	DefaultRedeliveries       = 1
	DefaultChaosRedeliveries  = 3
	DefaultRedeliveryInterval = time.Second
	DefaultRecordConcurrency  = 10
	DefaultTemplate           = "template.yaml"

	// The mix (RunMix): N users' long jobs next to M other users' quick
	// messages.
	DefaultMixSlowUsers   = 40
	DefaultMixQuickUsers  = 20
	DefaultMixQuickRounds = 5
	DefaultMixSlowWork    = 5 * time.Second
	DefaultMixRoundGap    = 200 * time.Millisecond
)

// Default chaos rates (fractions of events or calls).
const (
	DefaultPutFailRate     = 0.05
	DefaultHandlerFailRate = 0.05
	DefaultPoisonRate      = 0.01
	DefaultLine429Rate     = 0.05
	DefaultLine500Rate     = 0.02
	// DefaultWebhookFailRate is the fraction of events whose first
	// delivery fails at the bus for every PutEvents retry, so the webhook
	// answers 500 and LINE redelivers.
	DefaultWebhookFailRate = 0.05
)

// ErrOptions marks options that cannot run; the CLI maps it to a usage error.
var ErrOptions = errors.New("bench: bad options")

// Options configure a Run. Zero values take the defaults above; Normalize
// applies them.
type Options struct {
	// Events is how many webhooks to send (one event each), Concurrency how
	// many LINE sends at once.
	Events      int
	Concurrency int
	// Work is how long the handler works before it replies; a negative
	// value means none (0 takes the default).
	Work time.Duration
	// BusLatency is added to every PutEvents of linegate (a typical
	// EventBridge round trip); negative means none.
	BusLatency time.Duration
	// Crash kills each system's processing once half the deliveries
	// returned.
	Crash bool
	// Chaos runs linegate only, with PutEvents failures, transient handler
	// errors, poison events and LINE 429/500 at the rates below (used as
	// given: zero is none; the CLI's flags default to the Default* rates).
	Chaos                                                              bool
	PutFailRate, HandlerFailRate, PoisonRate, Line429Rate, Line500Rate float64
	// WebhookFailRate (chaos) is the fraction of events whose first
	// delivery fails: every PutEvents attempt of it fails, the webhook
	// answers 500 and LINE redelivers (the redelivery goes through).
	WebhookFailRate float64
	// TimeScale compresses linegate's visibility timeouts and alarm periods
	// (lowered when it would re-deliver a record whose handler still runs;
	// the Report says which scale ran).
	TimeScale float64
	// Only runs some systems: a comma-separated list of SystemSync,
	// SystemBackground, SystemDirect and SystemLinegate ("" runs all).
	Only string
	// Redeliveries and RedeliveryInterval are LINE's webhook redelivery
	// (default 1 after 1 s; 3 with Chaos, so a webhook refused under
	// PutEvents failures is offered again).
	Redeliveries       int
	RedeliveryInterval time.Duration
	// LineTimeout is how long LINE waits for a 2xx (default 2 s).
	LineTimeout time.Duration
	// DrainTimeout bounds the wait for effects after the last delivery
	// (default: derived from the work, the visibility timeout, the receive
	// count and the alarm period).
	DrainTimeout time.Duration
	// Template is linegate's template.yaml and Params its overrides.
	Template string
	Params   map[string]string
	// StateDir runs linegate with `linegate local --state` in that (empty)
	// directory, to measure what durability costs; "" runs in memory.
	StateDir string
	// Pollers is linegate's WorkerMaxConcurrency (pollers per queue) and
	// durable-direct's pollers, the same for both (0: DefaultDirectPollers);
	// RecordConcurrency is how many records of a batch run at once (default
	// 10, a whole batch), in both.
	Pollers           int
	RecordConcurrency int
	// Seed makes the choice of flaky and poison events and of injected
	// faults reproducible: the same seed, the same faults. 0 draws a seed
	// (the Report says which, so a run can be repeated).
	Seed uint64
	// Logs receives the systems' JSON logs (default discarded).
	Logs io.Writer
}

// Normalize applies the defaults and validates. The error wraps ErrOptions.
func (o Options) Normalize() (Options, error) {
	events, redeliveries := DefaultEvents, DefaultRedeliveries
	if o.Chaos {
		events, redeliveries = DefaultChaosEvents, DefaultChaosRedeliveries
	}
	o.Events = cmp.Or(o.Events, events)
	o.Concurrency = cmp.Or(o.Concurrency, DefaultConcurrency)
	switch {
	case o.Work == 0 && o.Chaos:
		o.Work = DefaultChaosWork
	case o.Work == 0:
		o.Work = DefaultWork
	case o.Work < 0:
		o.Work = 0
	}
	o.BusLatency = busLatency(o.BusLatency)
	o.TimeScale = cmp.Or(o.TimeScale, DefaultTimeScale)
	o.Redeliveries = cmp.Or(o.Redeliveries, redeliveries)
	o.RedeliveryInterval = cmp.Or(o.RedeliveryInterval, DefaultRedeliveryInterval)
	o.LineTimeout = cmp.Or(o.LineTimeout, lineplatform.DefaultTimeout)
	o.Template = cmp.Or(o.Template, DefaultTemplate)
	o.RecordConcurrency = cmp.Or(o.RecordConcurrency, DefaultRecordConcurrency)
	if o.Seed == 0 {
		o.Seed = rand.Uint64() | 1
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	var bad []string
	if o.Events < 1 || o.Concurrency < 1 {
		bad = append(bad, "events and concurrency must be at least 1")
	}
	if o.TimeScale < 1 {
		bad = append(bad, "time scale must be at least 1")
	}
	for _, r := range []float64{o.PutFailRate, o.HandlerFailRate, o.PoisonRate, o.Line429Rate, o.Line500Rate, o.WebhookFailRate} {
		if r < 0 || r >= 1 {
			bad = append(bad, "rates must be in [0, 1)")
			break
		}
	}
	if o.Line429Rate+o.Line500Rate >= 1 || o.PoisonRate+o.HandlerFailRate > 1 {
		bad = append(bad, "the LINE fault rates, and the poison and handler-failure rates, must each sum below 1")
	}
	for _, sys := range o.systems() {
		switch sys {
		case SystemSync, SystemBackground, SystemDirect, SystemLinegate:
		default:
			bad = append(bad, fmt.Sprintf("unknown system %q (want %s, %s, %s or %s)", sys, SystemSync, SystemBackground, SystemDirect, SystemLinegate))
		}
	}
	if o.Chaos && o.Only != "" && o.Only != SystemLinegate {
		bad = append(bad, "chaos runs linegate only")
	}
	if o.Redeliveries < 0 || o.RecordConcurrency < 1 || o.Pollers < 0 {
		bad = append(bad, "redeliveries, pollers and record concurrency cannot be negative")
	}
	if len(bad) > 0 {
		return o, fmt.Errorf("%w: %s", ErrOptions, joinSemi(bad))
	}
	return o, nil
}

// systems lists the systems to run, in run order.
func (o Options) systems() []string {
	if o.Chaos {
		return []string{SystemLinegate}
	}
	if strings.TrimSpace(o.Only) == "" {
		return []string{SystemSync, SystemBackground, SystemDirect, SystemLinegate}
	}
	var out []string
	for _, s := range strings.Split(o.Only, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Settings are the options a Report was made with.
type Settings struct {
	Events             int     `json:"events"`
	Concurrency        int     `json:"concurrency"`
	WorkMs             float64 `json:"workMs"`
	BusLatencyMs       float64 `json:"busLatencyMs"`
	Crash              bool    `json:"crash"`
	Chaos              bool    `json:"chaos"`
	PutFailRate        float64 `json:"putFailRate,omitempty"`
	HandlerFailRate    float64 `json:"handlerFailRate,omitempty"`
	PoisonRate         float64 `json:"poisonRate,omitempty"`
	Line429Rate        float64 `json:"line429Rate,omitempty"`
	Line500Rate        float64 `json:"line500Rate,omitempty"`
	WebhookFailRate    float64 `json:"webhookFailRate,omitempty"`
	Redeliveries       int     `json:"redeliveries"`
	RedeliveryInterval string  `json:"redeliveryInterval"`
	LineTimeout        string  `json:"lineTimeout"`
	TimeScale          float64 `json:"timeScale"`
	// EffectiveTimeScale is the scale linegate ran with (see Options.TimeScale).
	EffectiveTimeScale float64 `json:"effectiveTimeScale,omitempty"`
	Seed               uint64  `json:"seed"`
}

// Report is the outcome of a Run.
type Report struct {
	Settings Settings       `json:"settings"`
	Systems  []SystemResult `json:"systems"`
	// Ratios compare linegate with each baseline that ran.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Accounting summarises the linegate invariants check.
	Accounting *Summary `json:"accounting,omitempty"`
	// Violations lists every broken invariant (empty when all hold).
	Violations []string `json:"violations,omitempty"`
	// Elapsed is the whole run's wall time in seconds.
	Elapsed float64 `json:"elapsedSeconds"`
}

// System returns the result of one system, if it ran.
func (r Report) System(name string) (SystemResult, bool) {
	for _, s := range r.Systems {
		if s.System == name {
			return s, true
		}
	}
	return SystemResult{}, false
}

// Run sends the same traffic through each system in turn (never at once:
// the local pipeline configures process-wide tracing) and reports. The
// error wraps ErrOptions for bad options, ErrInvariant when a linegate
// invariant was violated (the Report is complete then), or says what could
// not be started.
func Run(ctx context.Context, o Options) (Report, error) {
	o, err := o.Normalize()
	if err != nil {
		return Report{}, err
	}
	began := time.Now()
	rep := Report{Settings: settings(o)}
	log := slog.New(slog.NewJSONHandler(o.Logs, nil))
	var poison, flaky, failFirst float64
	if o.Chaos {
		poison, flaky, failFirst = o.PoisonRate, o.HandlerFailRate, o.WebhookFailRate
	}
	p := newPlan(o.Events, poison, flaky, o.Seed)
	p.failFirst = pickFailFirst(o.Events, failFirst, o.Seed)
	client := &http.Client{Transport: newTransport(2 * o.Concurrency)}
	defer client.CloseIdleConnections()

	var baselines []SystemResult
	run := o.systems()
	for _, sys := range []string{SystemSync, SystemBackground, SystemDirect} {
		if !slices.Contains(run, sys) {
			continue
		}
		res, err := runBaseline(ctx, sys, o, p, client, log)
		if err != nil {
			return rep, err
		}
		rep.Systems = append(rep.Systems, res)
		baselines = append(baselines, res)
	}
	if slices.Contains(run, SystemLinegate) {
		res, acc, scale, err := runLinegate(ctx, o, p, client)
		if err != nil {
			return rep, err
		}
		rep.Settings.EffectiveTimeScale = scale
		rep.Systems = append(rep.Systems, res)
		rep.Ratios = ratios(res, baselines)
		sum := acc.Summarize()
		rep.Accounting = &sum
		rep.Violations = append(rep.Violations, acc.Violations()...)
	}
	rep.Elapsed = time.Since(began).Seconds()
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("bench: interrupted: %w", err)
	}
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, joinSemi(rep.Violations))
	}
	return rep, nil
}

func runBaseline(ctx context.Context, sys string, o Options, p plan, client *http.Client, log *slog.Logger) (SystemResult, error) {
	fx := newSideEffects(len(p.kinds))
	b, err := startBaseline(sys, newRouter(o.Work, fx), o, log)
	if err != nil {
		return SystemResult{}, err
	}
	defer b.close()
	t := target{name: sys, webhookURL: b.webhookURL(), secret: []byte(b.secret), line: b.line, issueTokens: true,
		crash: func(context.Context) int { return b.crash() }, idle: b.idle}
	tr := drive(ctx, t, p, o, client)
	timeout := o.DrainTimeout
	if timeout <= 0 {
		timeout = 3*o.Work + 10*time.Second
		if b.direct != nil { // a crashed record comes back after its visibility timeout
			timeout += b.direct.visibility
		}
	}
	drained := drain(ctx, timeout, t.idle, func() bool {
		// A crashed background process never answers what it lost: idle is
		// all there is to wait for.
		return (o.Crash && sys == SystemBackground) || allEffects(b.line, p)
	})
	return measure(sys, p, tr, b.line.Messages(), fx.counts(), o.LineTimeout, drained), nil
}

func settings(o Options) Settings {
	s := Settings{Events: o.Events, Concurrency: o.Concurrency, WorkMs: ms(o.Work), BusLatencyMs: ms(o.BusLatency),
		Crash: o.Crash, Chaos: o.Chaos, Redeliveries: o.Redeliveries, RedeliveryInterval: o.RedeliveryInterval.String(),
		LineTimeout: o.LineTimeout.String(), TimeScale: o.TimeScale, Seed: o.Seed}
	if o.Chaos {
		s.PutFailRate, s.HandlerFailRate, s.PoisonRate, s.Line429Rate, s.Line500Rate, s.WebhookFailRate =
			o.PutFailRate, o.HandlerFailRate, o.PoisonRate, o.Line429Rate, o.Line500Rate, o.WebhookFailRate
	}
	return s
}

func joinSemi(s []string) string { return strings.Join(s, "; ") }

// busLatency applies the option's convention: 0 takes DefaultBusLatency,
// negative means none.
func busLatency(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultBusLatency
	case d < 0:
		return 0
	}
	return d
}
