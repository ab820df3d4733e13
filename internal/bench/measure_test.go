package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
)

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10
	tests := []struct {
		q    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {1, 1}, {90, 9}}
	for _, tt := range tests {
		if got := percentile(ds, tt.q); got != tt.want {
			t.Errorf("p%g = %d, want %d", tt.q, got, tt.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty input")
	}
	if ds[0] != 5 {
		t.Error("percentile sorted its input in place")
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		n                    int
		poison, flaky        float64
		wantPoison, wantFlky int
	}{
		{200, 0, 0, 0, 0},
		{200, 0.01, 0.05, 2, 10},
		{10, 0.01, 0, 1, 0}, // a positive rate yields at least one
		{150, 0.03, 0.1, 5, 15},
		{3, 0.9, 0.9, 3, 0},
	}
	for _, tt := range tests {
		p := newPlan(tt.n, tt.poison, tt.flaky, 7)
		if len(p.kinds) != tt.n || p.poison() != tt.wantPoison || p.count(KindFlaky) != tt.wantFlky ||
			p.count(KindNormal) != tt.n-tt.wantPoison-tt.wantFlky {
			t.Errorf("%+v: %d poison, %d flaky of %d", tt, p.poison(), p.count(KindFlaky), len(p.kinds))
		}
	}
	a, b := newPlan(100, 0.1, 0.1, 3), newPlan(100, 0.1, 0.1, 3)
	if !equal(a.kinds, b.kinds) {
		t.Error("the same seed gave two plans")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFaultSequenceServesTheRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	faults := faultSequence(rng, 20000, 0.05, 0.02)
	calls, n429, n500 := 0, 0, 0
	for _, f := range faults {
		switch f.Status {
		case http.StatusTooManyRequests:
			n429++
			calls++
		case http.StatusInternalServerError:
			n500++
			calls++
		case 0:
			if f.Times < 1 || f.Delay != 0 {
				t.Fatalf("a normal run must be Times>=1 without delay: %+v", f)
			}
			calls += f.Times
		default:
			t.Fatalf("unexpected fault %+v", f)
		}
	}
	if calls != 20000 {
		t.Fatalf("sequence covers %d calls, want 20000", calls)
	}
	if n429 < 800 || n429 > 1200 || n500 < 280 || n500 > 520 {
		t.Fatalf("429 %d (want ~1000), 500 %d (want ~400)", n429, n500)
	}
}

func TestMeasure(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := plan{kinds: []string{KindNormal, KindNormal, KindPoison, KindNormal}}
	tr := traffic{
		began: t0, sent: t0.Add(3 * time.Second),
		start: []time.Time{t0, t0.Add(time.Second), t0, t0.Add(time.Second)},
		deliveries: []lineplatform.Delivery{
			{Delivered: true, Attempts: []lineplatform.Attempt{{Status: 200, Latency: 10 * time.Millisecond}}},
			{Delivered: true, Attempts: []lineplatform.Attempt{{Err: "timeout", Timeout: true, Latency: 1999 * time.Millisecond},
				{Status: 200, Latency: 30 * time.Millisecond, Redelivery: true}}},
			{Delivered: true, Attempts: []lineplatform.Attempt{{Status: 200, Latency: 20 * time.Millisecond}}},
			{Delivered: false, Attempts: []lineplatform.Attempt{{Status: 500, Err: "status 500", Latency: 40 * time.Millisecond}}},
		},
	}
	text := func(s string) json.RawMessage { return json.RawMessage(`{"type":"text","text":"` + s + `"}`) }
	recs := []linemock.Record{
		{At: t0.Add(500 * time.Millisecond), Messages: []json.RawMessage{text("done 0")}},
		{At: t0.Add(3 * time.Second), Messages: []json.RawMessage{text("done 1"), text("hello")}},
		{At: t0.Add(2 * time.Second), Messages: []json.RawMessage{text("done 1")}},
		{At: t0.Add(9 * time.Second), Messages: []json.RawMessage{text("done 99")}}, // not an event of the run
	}
	work := []int{1, 2, 0, 1} // event 1's handler did its work twice, the poison's never
	got := measure("x", p, tr, recs, work, 2*time.Second, true)
	want := SystemResult{System: "x", Events: 4, Poison: 1, AckP50Ms: 30, AckP99Ms: 2000, AckMaxMs: 2000,
		Attempts: 5, Timeouts: 1, Failures: 2, Redeliveries: 1, Undelivered: 1, Duplicates: 1, ExtraMessages: 1,
		Lost: 1, E2EP50Ms: 500, E2EP99Ms: 1000, Throughput: 1, SendSeconds: 3, Drained: true,
		Executions: 4, ExecutionsPerEvent: 4.0 / 3, DuplicateEffects: 1}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestRatios(t *testing.T) {
	lg := SystemResult{System: SystemLinegate, AckP50Ms: 20, AckP99Ms: 25, AckMaxMs: 50, E2EP99Ms: 4000, Throughput: 40}
	sync := SystemResult{System: SystemSync, AckP50Ms: 2000, AckP99Ms: 2000, AckMaxMs: 2000, E2EP99Ms: 3000, Throughput: 10}
	got := ratios(lg, []SystemResult{sync, {System: SystemBackground}})
	if len(got) != 2 || got[0] != (Ratio{Baseline: SystemSync, AckP50: 100, AckP99: 80, AckMax: 40, E2EP99: 0.75, Throughput: 4}) ||
		got[1] != (Ratio{Baseline: SystemBackground}) {
		t.Fatalf("%+v", got)
	}
}

func sampleReport() Report {
	return Report{
		Settings: Settings{Events: 200, Concurrency: 20, WorkMs: 3000, BusLatencyMs: 20, Crash: true, Chaos: false,
			Redeliveries: 1, RedeliveryInterval: "1s", LineTimeout: "2s", TimeScale: 60, EffectiveTimeScale: 27.142857142857142, Seed: 1},
		Systems: []SystemResult{
			{System: SystemSync, Events: 200, AckP50Ms: 2000, AckP99Ms: 2000, AckMaxMs: 2000, Attempts: 400, Timeouts: 400, Failures: 400,
				Redeliveries: 200, Undelivered: 200, E2EP50Ms: 3001, E2EP99Ms: 3010, Throughput: 6.6,
				SendSeconds: 50.1, Drained: true, Crashed: true, InFlightAtCrash: 20, Executions: 400, ExecutionsPerEvent: 2, DuplicateEffects: 200},
			{System: SystemBackground, Events: 200, AckP50Ms: 0.6, AckP99Ms: 3.2, AckMaxMs: 5, Attempts: 200, Lost: 97,
				E2EP50Ms: 3002, E2EP99Ms: 3004, Throughput: 33.1, SendSeconds: 0.3, Drained: true, Crashed: true, InFlightAtCrash: 100,
				Executions: 103, ExecutionsPerEvent: 0.515},
			{System: SystemDirect, Events: 200, AckP50Ms: 21, AckP99Ms: 26, AckMaxMs: 30, Attempts: 200,
				E2EP50Ms: 3030, E2EP99Ms: 9100, Throughput: 21.1, SendSeconds: 0.5, Drained: true, Crashed: true, InFlightAtCrash: 50,
				Executions: 212, ExecutionsPerEvent: 1.06, DuplicateEffects: 12},
			{System: SystemLinegate, Events: 200, AckP50Ms: 21.5, AckP99Ms: 27, AckMaxMs: 31, Attempts: 200,
				E2EP50Ms: 6100, E2EP99Ms: 13000, Throughput: 14.2, SendSeconds: 0.4, Drained: true, Crashed: true, InFlightAtCrash: -1,
				Executions: 200, ExecutionsPerEvent: 1},
		},
		Ratios: []Ratio{{Baseline: SystemSync, AckP50: 93, AckP99: 74.1, AckMax: 64.5, E2EP99: 0.23, Throughput: 2.2},
			{Baseline: SystemBackground, AckP50: 0.03, AckP99: 0.12, AckMax: 0.16, E2EP99: 0.23, Throughput: 0.43},
			{Baseline: SystemDirect, AckP50: 0.98, AckP99: 0.96, AckMax: 0.97, E2EP99: 0.7, Throughput: 0.67}},
		Accounting: &Summary{Events: 200, ExactlyOnce: 200},
		Elapsed:    71.25,
	}
}

// checkWriters compares what a report's two writers write with
// testdata/<name>.md and testdata/<name>.json.
func checkWriters(t *testing.T, name string, md, js func(io.Writer) error) {
	t.Helper()
	for ext, write := range map[string]func(io.Writer) error{".md": md, ".json": js} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", name+ext), b.Bytes())
	}
}

func TestReportGolden(t *testing.T) {
	rep := sampleReport()
	checkWriters(t, "report", rep.WriteMarkdown, rep.WriteJSON)
	var md bytes.Buffer

	rep.Settings.Chaos = true
	rep.Systems, rep.Ratios = rep.Systems[3:], nil
	rep.Accounting = &Summary{Events: 200, Poison: 2, ExactlyOnce: 197, Duplicates: 1, DeadLettered: 2, DLQVisible: 2,
		AlarmsFired: []string{"linegate-interactive-dlq"}, Notified: []string{"linegate-interactive-dlq"},
		Injected: Injected{PutEventsFailures: 11, WebhookFailures: 10, FlakyEvents: 10, Line429: 9, Line500: 4}}
	rep.Settings.WebhookFailRate = 0.05
	rep.Violations = []string{"1 event(s) with a duplicate effect: #5 (01J) ×2", "the DLQs hold 1 message(s), want 2 (the poison events)"}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report-chaos.md"), md.Bytes())
}
