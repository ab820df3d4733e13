package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/bot"
)

// KindSlow is the text kind of the mix bench's long work ("slow:<n>"): a
// route declared bot.Long that works, then replies "done <n>".
const KindSlow = "slow"

// MixOptions configure RunMix. Zero values take the defaults.
type MixOptions struct {
	// SlowUsers each send one long job (N); QuickUsers each send
	// QuickRounds quick messages (M), one round every RoundGap, once the
	// long jobs are in flight.
	SlowUsers, QuickUsers, QuickRounds int
	RoundGap                           time.Duration
	// SlowWork is how long a long job works before it replies.
	SlowWork time.Duration
	// BusLatency is added to every PutEvents (negative: none).
	BusLatency time.Duration
	// TimeScale compresses linegate's visibility timeouts and alarm periods,
	// lowered so a long job never outlives its visibility timeout.
	TimeScale float64
	// Template and Params: linegate's template.yaml and overrides; the
	// claim is made at the template's defaults.
	Template string
	Params   map[string]string
	// InPlace declares the slow route an ordinary one (no bot.Long): the
	// design before long work had its own queue, for comparison.
	InPlace bool
	// Logs receives linegate's JSON logs (default discarded).
	Logs io.Writer
}

func (o MixOptions) normalize() (MixOptions, error) {
	o.SlowUsers = cmp.Or(o.SlowUsers, DefaultMixSlowUsers)
	o.QuickUsers = cmp.Or(o.QuickUsers, DefaultMixQuickUsers)
	o.QuickRounds = cmp.Or(o.QuickRounds, DefaultMixQuickRounds)
	o.RoundGap = cmp.Or(o.RoundGap, DefaultMixRoundGap)
	o.SlowWork = cmp.Or(o.SlowWork, DefaultMixSlowWork)
	o.BusLatency = busLatency(o.BusLatency)
	o.TimeScale = cmp.Or(o.TimeScale, DefaultTimeScale)
	o.Template = cmp.Or(o.Template, DefaultTemplate)
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	if o.SlowUsers < 0 || o.QuickUsers < 1 || o.QuickRounds < 1 || o.SlowWork < 0 || o.TimeScale < 1 {
		return o, fmt.Errorf("%w: mix needs at least one quick user and round, no negative counts, a time scale of at least 1", ErrOptions)
	}
	return o, nil
}

// MixRun is one run of the mix: quick replies' end-to-end latency (LINE's
// delivery start to the reply reaching the Messaging API), and the long
// jobs'. Latencies in milliseconds.
type MixRun struct {
	SlowJobs     int     `json:"slowJobs"`
	Quick        int     `json:"quick"`
	QuickP50Ms   float64 `json:"quickP50Ms"`
	QuickP99Ms   float64 `json:"quickP99Ms"`
	QuickMaxMs   float64 `json:"quickMaxMs"`
	SlowAnswered int     `json:"slowAnswered"`
	SlowP50Ms    float64 `json:"slowP50Ms,omitempty"`
	SlowP99Ms    float64 `json:"slowP99Ms,omitempty"`
	// Unanswered and Duplicated count events without exactly one answer.
	Unanswered int `json:"unanswered"`
	Duplicated int `json:"duplicated"`
}

// MixReport compares the quick replies with long work in flight against
// the same traffic without it.
type MixReport struct {
	Settings MixSettings `json:"settings"`
	Idle     MixRun      `json:"idle"`
	Loaded   MixRun      `json:"loaded"`
	// P99Ratio is Loaded.QuickP99Ms ÷ Idle.QuickP99Ms: the claim is ≤ 2.
	P99Ratio float64 `json:"p99Ratio"`
	Elapsed  float64 `json:"elapsedSeconds"`
}

// MixSettings are the options a MixReport was made with.
type MixSettings struct {
	InPlace      bool              `json:"inPlace,omitempty"`
	SlowUsers    int               `json:"slowUsers"`
	QuickUsers   int               `json:"quickUsers"`
	QuickRounds  int               `json:"quickRounds"`
	RoundGapMs   float64           `json:"roundGapMs"`
	SlowWorkMs   float64           `json:"slowWorkMs"`
	BusLatencyMs float64           `json:"busLatencyMs"`
	TimeScale    float64           `json:"timeScale"`
	Params       map[string]string `json:"params,omitempty"`
}

// RunMix runs the quick traffic twice through linegate local built from the
// template: alone, then with SlowUsers long jobs in flight (sent first, and
// handed to the long-work queue before the first quick message). It fails
// with ErrInvariant when an event was not answered exactly once.
func RunMix(ctx context.Context, o MixOptions) (MixReport, error) {
	o, err := o.normalize()
	if err != nil {
		return MixReport{}, err
	}
	began := time.Now()
	tm, err := linegateTiming(Options{Template: o.Template, Params: o.Params, Work: o.SlowWork, TimeScale: o.TimeScale})
	if err != nil {
		return MixReport{}, err
	}
	rep := MixReport{Settings: MixSettings{InPlace: o.InPlace, SlowUsers: o.SlowUsers, QuickUsers: o.QuickUsers, QuickRounds: o.QuickRounds,
		RoundGapMs: ms(o.RoundGap), SlowWorkMs: ms(o.SlowWork), BusLatencyMs: ms(o.BusLatency), TimeScale: tm.scale, Params: o.Params}}
	if rep.Idle, err = mixRun(ctx, o, tm.scale, 0); err != nil {
		return rep, err
	}
	if rep.Loaded, err = mixRun(ctx, o, tm.scale, o.SlowUsers); err != nil {
		return rep, err
	}
	rep.P99Ratio = div(rep.Loaded.QuickP99Ms, rep.Idle.QuickP99Ms)
	rep.Elapsed = time.Since(began).Seconds()
	var bad []string
	for _, r := range []MixRun{rep.Idle, rep.Loaded} {
		if r.Unanswered > 0 || r.Duplicated > 0 {
			bad = append(bad, fmt.Sprintf("with %d long jobs: %d events unanswered, %d answered more than once", r.SlowJobs, r.Unanswered, r.Duplicated))
		}
	}
	if len(bad) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, joinSemi(bad))
	}
	return rep, nil
}

// mixRouter answers "bench:<n>" at once and "slow:<n>" as long work (or,
// inPlace, as an ordinary route that shows the loading animation itself).
func mixRouter(work time.Duration, inPlace bool) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		_, n, ok := parseText(text)
		if !ok {
			return nil
		}
		return e.ReplyText(ctx, doneText(n))
	})
	var long []bot.RouteOption
	if !inPlace {
		long = append(long, bot.Queue("long"))
	}
	r.OnText(KindSlow+":", func(ctx context.Context, e *bot.Event, text string) error {
		_, n, ok := parseText(text)
		if !ok {
			return nil
		}
		if inPlace {
			_ = e.ShowLoading(ctx, 60)
		}
		if err := backoff.Sleep(ctx, work); err != nil {
			return fmt.Errorf("event %d: long work: %w", n, err)
		}
		return e.ReplyText(ctx, doneText(n))
	}, long...)
	return r
}

// mixRun starts a fresh linegate local, puts slow long jobs in flight, sends
// the quick rounds, and waits for every answer.
func mixRun(ctx context.Context, o MixOptions, scale float64, slow int) (MixRun, error) {
	rt, err := local.Start(ctx, local.Config{
		Template: o.Template, Params: o.Params, Addr: "127.0.0.1:0", TimeScale: scale,
		Getenv: func(string) string { return "" }, Logs: o.Logs, BusLatency: o.BusLatency,
		Bot: func(config.Worker) *bot.Router { return mixRouter(o.SlowWork, o.InPlace) },
	})
	if err != nil {
		return MixRun{}, fmt.Errorf("linegate: %w", err)
	}
	defer rt.Close()
	client := &http.Client{Transport: newTransport(2 * (slow + o.QuickUsers))}
	defer client.CloseIdleConnections()
	lp := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret), lineplatform.WithHTTPClient(client))
	quick := o.QuickUsers * o.QuickRounds
	n := quick + slow
	starts := make([]time.Time, n)
	var mu sync.Mutex
	deliver := func(i int, user, text string) {
		ev := lp.Text(user, text)
		mu.Lock()
		starts[i] = time.Now()
		mu.Unlock()
		_, _ = lp.Deliver(ctx, ev)
	}
	// Events 0..quick-1 are quick (user u, round k: index k*QuickUsers+u),
	// quick..n-1 the long jobs, each from a user of its own. A first,
	// unmeasured round warms the pipeline (connections, pollers) in both
	// runs alike; its answers are numbered past n and not counted.
	var wg sync.WaitGroup
	for u := range o.QuickUsers {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = lp.Deliver(ctx, lp.Text(userID(u), eventText(KindNormal, n+u))) }()
	}
	wg.Wait()
	if !waitFor(ctx, 30*time.Second, func() bool { return len(rt.LINE().Messages()) >= o.QuickUsers }) {
		return MixRun{}, fmt.Errorf("bench: the warm-up round was not answered within 30 s")
	}
	for j := range slow {
		wg.Add(1)
		go func() { defer wg.Done(); deliver(quick+j, userID(quick+j), KindSlow+":"+fmt.Sprint(quick+j)) }()
	}
	wg.Wait()
	if slow > 0 && !o.InPlace {
		// Every long job handed off (its loading animation shown): the
		// quick messages come while they are in flight.
		if !waitFor(ctx, 30*time.Second, func() bool { return len(rt.LINE().Loading()) >= slow }) {
			return MixRun{}, fmt.Errorf("bench: the long jobs were not handed to the long-work queue within 30 s")
		}
	} else if slow > 0 {
		// In place the jobs show the animation when they start, as workers
		// free up: the quick messages come once the first have.
		waitFor(ctx, 5*time.Second, func() bool { return len(rt.LINE().Loading()) > 0 })
	}
	for k := range o.QuickRounds {
		if k > 0 {
			_ = backoff.Sleep(ctx, o.RoundGap)
		}
		for u := range o.QuickUsers {
			i := k*o.QuickUsers + u
			wg.Add(1)
			go func() { defer wg.Done(); deliver(i, userID(u), eventText(KindNormal, i)) }()
		}
		wg.Wait()
	}
	done := func() bool {
		count, _ := effects(rt.LINE().Messages(), n)
		for _, c := range count {
			if c == 0 {
				return false
			}
		}
		return true
	}
	waitFor(ctx, 3*o.SlowWork*time.Duration(max(1, slow))/time.Duration(max(1, slowCapacity(rt)))+30*time.Second, done)
	_ = backoff.Sleep(ctx, 200*time.Millisecond) // a duplicate would show now
	return summarizeMix(rt.LINE().Messages(), starts, quick, slow), nil
}

// slowCapacity is how many long jobs run at once: the long-work mapping's
// MaximumConcurrency (BatchSize 1).
func slowCapacity(rt *local.Runtime) int {
	for _, f := range rt.Topology().Functions {
		for _, m := range f.SQSEvents {
			if m.Queue == "LongQueue" && m.MaxConcurrency > 0 {
				return m.MaxConcurrency * max(1, m.BatchSize)
			}
		}
	}
	return 1
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		_ = backoff.Sleep(ctx, 20*time.Millisecond)
	}
	return true
}

// summarizeMix measures a mix run from the answers the Messaging API saw.
func summarizeMix(recs []linemock.Record, starts []time.Time, quick, slow int) MixRun {
	count, first := effects(recs, quick+slow)
	r := MixRun{SlowJobs: slow, Quick: quick}
	var q, s []time.Duration
	for i := range quick + slow {
		switch {
		case count[i] == 0:
			r.Unanswered++
			continue
		case count[i] > 1:
			r.Duplicated++
		}
		d := first[i].Sub(starts[i])
		if i < quick {
			q = append(q, d)
		} else {
			r.SlowAnswered++
			s = append(s, d)
		}
	}
	r.QuickP50Ms, r.QuickP99Ms, r.QuickMaxMs = ms(percentile(q, 50)), ms(percentile(q, 99)), ms(percentile(q, 100))
	r.SlowP50Ms, r.SlowP99Ms = ms(percentile(s, 50)), ms(percentile(s, 99))
	return r
}
