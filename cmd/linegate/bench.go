package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/bench"
)

// benchCommand is `linegate bench`: the same traffic and handler through the
// synchronous baseline, the in-process background baseline, the
// durable-direct baseline and linegate. It exits non-zero when a linegate
// invariant was violated.
func benchCommand(fs *flag.FlagSet) action {
	events := fs.Int("events", 0, fmt.Sprintf("webhooks to send, one event each (default %d; %d with --chaos)", bench.DefaultEvents, bench.DefaultChaosEvents))
	conc := fs.Int("concurrency", bench.DefaultConcurrency, "webhooks LINE sends at once")
	work := fs.Duration("work", 0, fmt.Sprintf("simulated handler work before the reply (default %s; %s with --chaos; 0s for none)", bench.DefaultWork, bench.DefaultChaosWork))
	busLatency := fs.Duration("bus-latency", bench.DefaultBusLatency, "latency added to every PutEvents of linegate (0s for none)")
	crash := fs.Bool("crash", false, "kill each system's workers mid-run")
	chaos := fs.Bool("chaos", false, "linegate only: inject PutEvents failures, failed webhook calls (LINE redelivers them), handler errors, poison events and LINE 429/500, then check the invariants")
	putFail := fs.Float64("put-fail-rate", bench.DefaultPutFailRate, "chaos: fraction of PutEvents entries failing with InternalFailure")
	webhookFail := fs.Float64("webhook-fail-rate", bench.DefaultWebhookFailRate, "chaos: fraction of events whose first webhook call fails (the bus refuses it for every retry, the webhook answers 500, LINE redelivers)")
	handlerFail := fs.Float64("handler-fail-rate", bench.DefaultHandlerFailRate, "chaos: fraction of events whose handler fails its first attempt")
	poison := fs.Float64("poison-rate", bench.DefaultPoisonRate, "chaos: fraction of events whose handler always fails")
	l429 := fs.Float64("line-429-rate", bench.DefaultLine429Rate, "chaos: fraction of LINE API calls answered 429")
	l500 := fs.Float64("line-500-rate", bench.DefaultLine500Rate, "chaos: fraction of LINE API calls answered 500")
	scale := fs.Float64("time-scale", bench.DefaultTimeScale, "compress linegate's visibility timeouts and alarm periods (lowered when shorter than the work allows)")
	redeliveries := fs.Int("redeliveries", 0, fmt.Sprintf("LINE webhook redeliveries (default %d; %d with --chaos)", bench.DefaultRedeliveries, bench.DefaultChaosRedeliveries))
	interval := fs.Duration("redelivery-interval", bench.DefaultRedeliveryInterval, "wait before a redelivery")
	only := fs.String("only", "", "run only these systems, comma-separated: sync, background, durable-direct, linegate")
	tmpl := fs.String("template", bench.DefaultTemplate, "linegate's SAM template")
	pollers := fs.Int("pollers", 0, fmt.Sprintf("pollers per queue, linegate's (its WorkerMaxConcurrency) and durable-direct's (default %d, the same for both)", bench.DefaultDirectPollers))
	drainTimeout := fs.Duration("drain-timeout", 0, "how long to wait for effects after the last delivery (default: derived)")
	seed := fs.Uint64("seed", 0, "seed of the flaky/poison choice and of injected faults (default: a new one each run, printed in the report; pass it to repeat a run)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of markdown")
	mix := fs.Bool("mix", false, "linegate only: quick messages from --quick-users users next to long work (bot.Queue(\"long\")) from --slow-users others, against the same quick traffic alone")
	slowUsers := fs.Int("slow-users", bench.DefaultMixSlowUsers, "mix: users who each start one long job (--work long, default 5s)")
	quickUsers := fs.Int("quick-users", bench.DefaultMixQuickUsers, "mix: other users who send quick messages")
	quickRounds := fs.Int("quick-rounds", bench.DefaultMixQuickRounds, "mix: quick messages per quick user, one round every 200 ms")
	state := fs.Bool("state", false, "run linegate with --state in a fresh temporary directory: what durable queues and tables cost")
	inPlace := fs.Bool("in-place", false, "mix: run the slow handlers as ordinary routes (no bot.Queue), the design before long work, for comparison")
	cost := fs.Bool("cost", false, "print docs/cost.md's table: the monthly cost of a million webhooks at the template's settings")
	capacity := fs.Bool("capacity", false, "linegate only: run it at the template's settings inside the model of the deployed stack's latencies and quotas (docs/capacity.md), under a rising load, and report the sustained rate, the oldest message and the first limit met")
	region := fs.String("region", bench.DefaultCapacityRegion, "capacity: whose quotas the model uses (ap-northeast-1, us-east-1)")
	dilation := fs.Float64("dilation", bench.DefaultCapacityDilation, "capacity: how many times slower than the modelled time the run goes (every modelled duration that much longer, every quota that much lower)")
	from := fs.Float64("from", bench.DefaultCapacityFrom, "capacity: first offered rate, events per modelled second")
	to := fs.Float64("to", bench.DefaultCapacityTo, "capacity: highest offered rate")
	stepRate := fs.Float64("step", bench.DefaultCapacityStepRate, "capacity: how much the offered rate rises each step")
	stepFor := fs.Duration("step-duration", bench.DefaultCapacityStep, "capacity: how long each rate is offered (modelled)")
	handlerIO := fs.Duration("handler-io", bench.DefaultCapacityHandler, "capacity: each event's handler I/O before its reply (modelled)")
	chats := fs.Int("chats", bench.DefaultCapacityChats, "capacity: distinct chats sending the traffic")
	accountConc := fs.Int("account-concurrency", 0, "capacity: the account's Lambda concurrency (default 1000; a new account's may be 10)")
	params := map[string]string{}
	fs.Func("param", "capacity: a template parameter override NAME=VALUE (repeatable), e.g. ApiThrottlingRateLimit=5000", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		params[name] = value
		return nil
	})
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("unexpected arguments: %v", args)}
		}
		if *cost {
			c, err := bench.CostFromTemplate(*tmpl)
			if err != nil {
				return err
			}
			return c.WriteMarkdown(stdout)
		}
		if *capacity {
			rep, err := bench.RunCapacity(ctx, bench.CapacityOptions{Template: *tmpl, Params: params, Region: *region, Dilation: *dilation,
				From: *from, To: *to, Step: *stepRate, StepDuration: *stepFor, HandlerIO: *handlerIO, Chats: *chats, AccountConcurrency: *accountConc})
			if errors.Is(err, bench.ErrOptions) {
				return usageError{err.Error()}
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return rep.WriteJSON(stdout)
			}
			return rep.WriteMarkdown(stdout)
		}
		if *mix {
			return runMix(ctx, bench.MixOptions{SlowUsers: *slowUsers, QuickUsers: *quickUsers, QuickRounds: *quickRounds, InPlace: *inPlace,
				SlowWork: orNone(*work, fs, "work"), BusLatency: orNone(*busLatency, fs, "bus-latency"), TimeScale: *scale, Template: *tmpl}, *asJSON, stdout)
		}
		o := bench.Options{
			Events: *events, Concurrency: *conc, Work: orNone(*work, fs, "work"), BusLatency: orNone(*busLatency, fs, "bus-latency"),
			Crash: *crash, Chaos: *chaos, TimeScale: *scale, Only: *only, Redeliveries: *redeliveries, RedeliveryInterval: *interval,
			Template: *tmpl, Pollers: *pollers, DrainTimeout: *drainTimeout, Seed: *seed,
		}
		if *state {
			dir, err := os.MkdirTemp("", "linegate-bench-state-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.StateDir = dir
		}
		if *chaos {
			o.PutFailRate, o.HandlerFailRate, o.PoisonRate, o.Line429Rate, o.Line500Rate = *putFail, *handlerFail, *poison, *l429, *l500
			o.WebhookFailRate = *webhookFail
		}
		rep, err := bench.Run(ctx, o)
		if errors.Is(err, bench.ErrOptions) {
			return usageError{err.Error()}
		}
		if err != nil && !errors.Is(err, bench.ErrInvariant) {
			return err
		}
		if *asJSON {
			if werr := rep.WriteJSON(stdout); werr != nil {
				return werr
			}
		} else if werr := rep.WriteMarkdown(stdout); werr != nil {
			return werr
		}
		if err != nil {
			// The report above lists each violation.
			return fmt.Errorf("%d invariant(s) violated", len(rep.Violations))
		}
		return nil
	}
}

// orNone maps an explicit 0 to "none" (a negative duration, which Options
// reads as none) and an unset flag to 0 (the default).
func orNone(d time.Duration, fs *flag.FlagSet, name string) time.Duration {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	if set && d == 0 {
		return -1
	}
	return d
}

// runMix is `linegate bench --mix`: quick replies with and without long work
// in flight. It exits non-zero when an event was not answered exactly once.
func runMix(ctx context.Context, o bench.MixOptions, asJSON bool, stdout io.Writer) error {
	if o.SlowWork < 0 {
		o.SlowWork = 1 // --work 0s: long jobs that return at once
	}
	rep, err := bench.RunMix(ctx, o)
	if errors.Is(err, bench.ErrOptions) {
		return usageError{err.Error()}
	}
	if err != nil && !errors.Is(err, bench.ErrInvariant) {
		return err
	}
	write := rep.WriteMarkdown
	if asJSON {
		write = rep.WriteJSON
	}
	if werr := write(stdout); werr != nil {
		return werr
	}
	return err
}
