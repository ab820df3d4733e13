package bench

import (
	"slices"
	"time"

	"github.com/linegate/linegate/internal/linemock"
)

// SystemResult is what one system did with the bench traffic. Latencies are
// in milliseconds.
type SystemResult struct {
	// System is SystemSync, SystemBackground or SystemLinegate.
	System string `json:"system"`
	// Events is how many events were sent; Poison how many of them were
	// poison (their effect must never happen).
	Events int `json:"events"`
	Poison int `json:"poison"`
	// AckP50Ms, AckP99Ms and AckMaxMs summarise every webhook attempt's time
	// to a response, as LINE measured it. An attempt LINE gave up on counts
	// as the timeout (LINE stopped waiting then).
	AckP50Ms float64 `json:"ackP50Ms"`
	AckP99Ms float64 `json:"ackP99Ms"`
	AckMaxMs float64 `json:"ackMaxMs"`
	// Attempts is every webhook request LINE made; Timeouts the ones that got
	// no response within LINE's timeout; Failures every attempt without a 2xx
	// (timeouts included); Redeliveries the attempts that were redeliveries.
	Attempts     int `json:"attempts"`
	Timeouts     int `json:"timeouts"`
	Failures     int `json:"failures"`
	Redeliveries int `json:"redeliveries"`
	// Undelivered is how many events LINE gave up on (no attempt got a 2xx).
	Undelivered int `json:"undelivered"`
	// Duplicates is how many events the user saw answered more than once;
	// ExtraMessages how many answers were surplus.
	Duplicates    int `json:"duplicates"`
	ExtraMessages int `json:"extraMessages"`
	// Lost is how many non-poison events were never answered within the
	// drain timeout.
	Lost int `json:"lost"`
	// Executions is how many times a handler did its work (the side effect
	// before the reply: a charge, an LLM call), all events together;
	// ExecutionsPerEvent that per non-poison event; DuplicateEffects how
	// many events had it done more than once. A user may see one answer
	// and still have been charged twice.
	Executions         int     `json:"handlerExecutions"`
	ExecutionsPerEvent float64 `json:"handlerExecutionsPerEvent"`
	DuplicateEffects   int     `json:"duplicateSideEffects"`
	// E2EP50Ms and E2EP99Ms are delivery start → first answer recorded by the
	// LINE API, over the answered events.
	E2EP50Ms float64 `json:"e2eP50Ms"`
	E2EP99Ms float64 `json:"e2eP99Ms"`
	// Throughput is answered events per second, from the first delivery to
	// the last first answer.
	Throughput float64 `json:"throughputPerSec"`
	// SendSeconds is how long delivering all events took; Drained whether
	// the system finished within the drain timeout.
	SendSeconds float64 `json:"sendSeconds"`
	Drained     bool    `json:"drained"`
	// Crashed reports a --crash run; InFlightAtCrash what the system had in
	// flight then (-1: not observable from outside).
	Crashed         bool `json:"crashed,omitempty"`
	InFlightAtCrash int  `json:"inFlightAtCrash,omitempty"`
}

// measure turns a run's observations into a SystemResult: the attempts
// LINE made, the answers its Messaging API recorded, and the side effects
// the handlers counted (by event index).
func measure(name string, p plan, tr traffic, recs []linemock.Record, work []int, timeout time.Duration, drained bool) SystemResult {
	n := len(p.kinds)
	res := SystemResult{System: name, Events: n, Poison: p.poison(), Drained: drained,
		Crashed: tr.crashed, InFlightAtCrash: tr.inFlight, SendSeconds: tr.sent.Sub(tr.began).Seconds()}
	var acks []time.Duration
	for _, d := range tr.deliveries {
		if !d.Delivered {
			res.Undelivered++
		}
		for _, a := range d.Attempts {
			res.Attempts++
			lat := a.Latency
			if a.Timeout {
				res.Timeouts++
				lat = max(lat, timeout)
			}
			if a.Err != "" {
				res.Failures++
			}
			if a.Redelivery {
				res.Redeliveries++
			}
			acks = append(acks, lat)
		}
	}
	res.AckP50Ms, res.AckP99Ms, res.AckMaxMs = ms(percentile(acks, 50)), ms(percentile(acks, 99)), ms(percentile(acks, 100))

	count, first := effects(recs, n)
	var e2e []time.Duration
	var last time.Time
	answered := 0
	for i, k := range p.kinds {
		if count[i] > 1 {
			res.Duplicates++
			res.ExtraMessages += count[i] - 1
		}
		if count[i] == 0 {
			if k != KindPoison {
				res.Lost++
			}
			continue
		}
		answered++
		if !tr.start[i].IsZero() {
			e2e = append(e2e, first[i].Sub(tr.start[i]))
		}
		if first[i].After(last) {
			last = first[i]
		}
	}
	res.E2EP50Ms, res.E2EP99Ms = ms(percentile(e2e, 50)), ms(percentile(e2e, 99))
	for _, n := range work {
		res.Executions += n
		if n > 1 {
			res.DuplicateEffects++
		}
	}
	if normal := n - res.Poison; normal > 0 {
		res.ExecutionsPerEvent = float64(res.Executions) / float64(normal)
	}
	if span := last.Sub(tr.began); answered > 0 && span > 0 {
		res.Throughput = float64(answered) / span.Seconds()
	}
	return res
}

// percentile is the nearest-rank percentile q (0 < q <= 100) of ds; 0 for
// none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q/100*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Ratio compares linegate with one baseline. Each figure is "how many times
// better linegate is": baseline/linegate for latencies, linegate/baseline
// for throughput. 0 means not comparable (a zero on either side).
type Ratio struct {
	Baseline   string  `json:"baseline"`
	AckP50     float64 `json:"ackP50"`
	AckP99     float64 `json:"ackP99"`
	AckMax     float64 `json:"ackMax"`
	E2EP99     float64 `json:"e2eP99"`
	Throughput float64 `json:"throughput"`
}

func ratios(lg SystemResult, baselines []SystemResult) []Ratio {
	var out []Ratio
	for _, b := range baselines {
		out = append(out, Ratio{
			Baseline:   b.System,
			AckP50:     div(b.AckP50Ms, lg.AckP50Ms),
			AckP99:     div(b.AckP99Ms, lg.AckP99Ms),
			AckMax:     div(b.AckMaxMs, lg.AckMaxMs),
			E2EP99:     div(b.E2EP99Ms, lg.E2EP99Ms),
			Throughput: div(lg.Throughput, b.Throughput),
		})
	}
	return out
}

func div(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}
