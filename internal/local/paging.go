package local

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/compose/notifierfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/template"
)

// The notifier's paging ledger and sweep, locally: the ledger is an item of
// the template's idempotency table (journaled with --state, so a restart
// pages nothing twice), and the sweep runs on the notifier's Schedule event,
// compressed by the time scale like the coalescing window.

// notifierDeps gives the notifier its ledger (the table ALERT_STATE_TABLE
// names) and the SQS client its sweep reads DLQ depths with.
func (r *Runtime) notifierDeps(ctx context.Context, cfg config.Notifier) (notifierfn.Deps, error) {
	if cfg.StateTable == "" {
		return notifierfn.Deps{}, nil
	}
	var table *template.Table
	for i := range r.top.Tables {
		if r.top.Tables[i].Name == cfg.StateTable {
			table = &r.top.Tables[i]
		}
	}
	if table == nil {
		return notifierfn.Deps{}, fmt.Errorf("ALERT_STATE_TABLE %q is not a table of the template", cfg.StateTable)
	}
	store, err := r.back.store(ctx, *table)
	if err != nil {
		return notifierfn.Deps{}, err
	}
	return notifierfn.Deps{Ledger: store, Queues: r.ports.queues}, nil
}

// sweepCounts is what the notifier's sweeps of this run did, for
// /_local/alerts.
type sweepCounts struct {
	mu          sync.Mutex
	Sweeps      int       `json:"sweeps"`
	Digests     int       `json:"digests"`
	Unannounced int       `json:"unannounced"`
	Failed      int       `json:"failed"`
	Last        time.Time `json:"last,omitzero"`
}

func (c *sweepCounts) add(res alert.SweepResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Sweeps++
	c.Digests += res.Digests
	c.Unannounced += res.Unannounced
	if err != nil {
		c.Failed++
	}
	c.Last = time.Now()
}

// view is a copy for /_local/alerts.
func (c *sweepCounts) view() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return map[string]any{"sweeps": c.Sweeps, "digests": c.Digests, "unannounced": c.Unannounced, "failed": c.Failed, "last": c.Last}
}

// startSweeps runs the notifier's sweep at each of its Schedule events'
// rate, compressed by the time scale, as an invocation of the function.
func (r *Runtime) startSweeps(rctx context.Context, f template.Function, metrics interface{ Flush() error }, n *alert.Notifier) {
	for _, ev := range f.ScheduleEvents {
		rate := ev.Every
		if rate <= 0 {
			rate = time.Minute // cron: not modelled locally, every minute
		}
		// At most a sweep a second: at a large time scale a sweep every
		// scaled minute would be load for nothing (a digest is a window
		// late at worst by one sweep).
		period := max(scaled(rate, r.cfg.TimeScale), time.Second)
		sweep := func(ctx context.Context) {
			var res alert.SweepResult
			err := r.invoke(ctx, f, metrics, func(ctx context.Context) (err error) {
				res, err = n.Sweep(ctx)
				return err
			})
			r.sweeps.add(res, err)
			switch {
			case err != nil:
				r.out.line("notifier  sweep failed: %v", err)
			case res.Digests > 0 || res.Unannounced > 0:
				r.out.line("notifier  sweep: %d digest(s), %d dead letter(s) with no notice", res.Digests, res.Unannounced)
			}
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); every(rctx, period, sweep) }()
	}
}

// scaledPagingEnv compresses the notifier's coalescing window and its
// sweep's grace by the time scale, like every period of the pipeline.
func scaledPagingEnv(env map[string]string, scale float64) {
	if scale <= 1 {
		return
	}
	if env["ALERT_STATE_TABLE"] == "" {
		return // not the notifier, or one without a ledger: no window
	}
	for k, def := range map[string]time.Duration{"ALERT_WINDOW": alert.DefaultWindow, "ALERT_SWEEP_GRACE": alert.DefaultGrace} {
		v, ok := env[k]
		d := def
		if ok {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				continue // the notifier's configuration says what is wrong
			}
			d = parsed
		}
		env[k] = max(scaled(d, scale), time.Millisecond).String()
	}
}

// serveAlerts answers GET /_local/alerts: the sweeps of this run and the
// email deliveries.
func (r *Runtime) serveAlerts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"sweeps": r.sweeps.view(), "emails": len(r.emails.list())})
}
