package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
)

// plan is the traffic of one run: the kind of each event, by index, and
// (chaos) whether its first delivery is made to fail. Every system gets the
// same plan.
type plan struct {
	kinds     []string
	failFirst []bool
}

// pickFailFirst marks round(n*rate) events, drawn from seed, whose first
// delivery fails.
func pickFailFirst(n int, rate float64, seed uint64) []bool {
	out := make([]bool, n)
	k := countOf(n, rate)
	rng := rand.New(rand.NewPCG(seed, seed^0xfa11))
	for _, i := range rng.Perm(n)[:k] {
		out[i] = true
	}
	return out
}

// newPlan assigns kinds: round(n*poisonRate) poison events and
// round(n*flakyRate) flaky ones, at positions drawn from seed.
func newPlan(n int, poisonRate, flakyRate float64, seed uint64) plan {
	kinds := make([]string, n)
	poison := countOf(n, poisonRate)
	flaky := min(countOf(n, flakyRate), n-poison)
	for i := range kinds {
		switch {
		case i < poison:
			kinds[i] = KindPoison
		case i < poison+flaky:
			kinds[i] = KindFlaky
		default:
			kinds[i] = KindNormal
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	rng.Shuffle(n, func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return plan{kinds: kinds}
}

// countOf is rate of n rounded, at least 1 when the rate is positive.
func countOf(n int, rate float64) int {
	if rate <= 0 || n == 0 {
		return 0
	}
	return min(n, max(1, int(float64(n)*rate+0.5)))
}

func (p plan) poison() int { return p.count(KindPoison) }

func (p plan) count(kind string) int {
	c := 0
	for _, k := range p.kinds {
		if k == kind {
			c++
		}
	}
	return c
}

// userID is the distinct LINE user who sends event n.
func userID(n int) string { return fmt.Sprintf("U%032x", n+1) }

// target is a system under test as the traffic driver sees it.
type target struct {
	name       string
	webhookURL string
	secret     []byte
	line       *linemock.Server
	// issueTokens registers the platform's reply tokens with line (the
	// baselines); linegate's local API Gateway does it itself.
	issueTokens bool
	// crash kills the system's processing mid-run; it returns what it knows
	// was in flight (-1: unknown).
	crash func(ctx context.Context) int
	// idle reports that nothing is processing or queued any more.
	idle func() bool
}

// traffic is what the driver observed.
type traffic struct {
	start      []time.Time // when event i's delivery started
	deliveries []lineplatform.Delivery
	began      time.Time
	sent       time.Time // when the last delivery returned
	crashed    bool
	inFlight   int // what crash reported
}

// drive delivers every event of p to t through a local LINE platform, at
// o.Concurrency, with LINE's timeout and redelivery. With o.Crash the
// system's processing is killed once half of the deliveries returned.
func drive(ctx context.Context, t target, p plan, o Options, client *http.Client) traffic {
	opts := []lineplatform.Option{
		lineplatform.WithHTTPClient(client),
		lineplatform.WithTimeout(o.LineTimeout),
		lineplatform.WithRedelivery(o.Redeliveries, o.RedeliveryInterval),
	}
	if t.issueTokens {
		opts = append(opts, lineplatform.WithReplyTokenHook(t.line.IssueReplyToken))
	}
	lp := lineplatform.New(t.webhookURL, t.secret, opts...)
	n := len(p.kinds)
	tr := traffic{start: make([]time.Time, n), deliveries: make([]lineplatform.Delivery, n), began: time.Now()}
	next := make(chan int)
	var done atomic.Int64
	var crashOnce sync.Once
	crashAt := int64(max(1, n/2))
	var wg sync.WaitGroup
	for range max(1, o.Concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// Built just before delivery: the reply token's minute starts now.
				ev := lp.Text(userID(i), eventText(p.kinds[i], i))
				tr.start[i] = time.Now()
				d, _ := lp.Deliver(ctx, ev) // failures are in d.Attempts
				tr.deliveries[i] = d
				if o.Crash && done.Add(1) == crashAt {
					crashOnce.Do(func() {
						tr.inFlight = t.crash(ctx)
						tr.crashed = true
					})
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	tr.sent = time.Now()
	return tr
}

// drain waits until the system is idle and done reports true, or timeout.
// It reports whether the condition was reached.
func drain(ctx context.Context, timeout time.Duration, idle func() bool, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if idle() && done() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		_ = backoff.Sleep(ctx, 50*time.Millisecond)
	}
}

// effects counts the "done <n>" messages a LINE mock recorded, per event,
// with the time of the first.
func effects(recs []linemock.Record, n int) (count []int, first []time.Time) {
	count, first = make([]int, n), make([]time.Time, n)
	for _, r := range recs {
		for _, m := range r.Messages {
			i, ok := parseDone(m)
			if !ok || i >= n {
				continue
			}
			count[i]++
			if first[i].IsZero() || r.At.Before(first[i]) {
				first[i] = r.At
			}
		}
	}
	return count, first
}

// allEffects reports whether every non-poison event has had an effect.
func allEffects(line *linemock.Server, p plan) bool {
	count, _ := effects(line.Messages(), len(p.kinds))
	for i, k := range p.kinds {
		if k != KindPoison && count[i] == 0 {
			return false
		}
	}
	return true
}
