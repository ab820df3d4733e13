package bench

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
)

// A short mix through linegate local: every event answered once, the long
// jobs taking their work, and the quick replies never waiting for it.
func TestMixShortRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := MixOptions{SlowUsers: 6, QuickUsers: 4, QuickRounds: 2, RoundGap: 50 * time.Millisecond, SlowWork: 800 * time.Millisecond, Template: testTemplate}
	if f := logs(); f != nil {
		o.Logs = f
	}
	rep, err := RunMix(ctx, o)
	if err != nil {
		t.Fatalf("RunMix: %v\n%+v", err, rep)
	}
	if rep.Idle.SlowJobs != 0 || rep.Loaded.SlowJobs != 6 || rep.Loaded.SlowAnswered != 6 || rep.Idle.Quick != 8 || rep.Loaded.Quick != 8 {
		t.Fatalf("runs %+v / %+v", rep.Idle, rep.Loaded)
	}
	if rep.Loaded.SlowP50Ms < 800 {
		t.Errorf("long jobs answered after %.0f ms, under their 800 ms of work", rep.Loaded.SlowP50Ms)
	}
	// Quick replies sent while the long jobs run are answered long before
	// any job ends: they do not wait behind long work.
	if rep.Loaded.QuickMaxMs >= 800 {
		t.Errorf("a quick reply took %.0f ms with long work in flight: it waited behind it", rep.Loaded.QuickMaxMs)
	}
	if rep.P99Ratio <= 0 || rep.P99Ratio != div(rep.Loaded.QuickP99Ms, rep.Idle.QuickP99Ms) {
		t.Errorf("ratio %v", rep.P99Ratio)
	}
}

func TestMixOptions(t *testing.T) {
	if _, err := RunMix(context.Background(), MixOptions{QuickUsers: -1}); !errors.Is(err, ErrOptions) {
		t.Fatalf("negative quick users: %v, want ErrOptions", err)
	}
	o, err := MixOptions{}.normalize()
	if err != nil || o.SlowUsers != 40 || o.QuickUsers != 20 || o.SlowWork != 5*time.Second || o.BusLatency != DefaultBusLatency {
		t.Fatalf("defaults %+v %v", o, err)
	}
}

// summarizeMix counts answers per event: unanswered, duplicated, and the
// latencies of quick and long events apart.
func TestSummarizeMix(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(n int, after time.Duration) linemock.Record {
		return linemock.Record{At: t0.Add(after), Messages: []json.RawMessage{json.RawMessage(`{"type":"text","text":"` + doneText(n) + `"}`)}}
	}
	recs := []linemock.Record{rec(0, 10*time.Millisecond), rec(1, 30*time.Millisecond), rec(1, 40*time.Millisecond), rec(3, 5*time.Second)}
	starts := []time.Time{t0, t0, t0, t0}
	got := summarizeMix(recs, starts, 3, 1)
	if got.Unanswered != 1 || got.Duplicated != 1 || got.SlowAnswered != 1 || got.QuickMaxMs != 30 || got.SlowP99Ms != 5000 {
		t.Fatalf("%+v", got)
	}
}

func TestMixReportGolden(t *testing.T) {
	rep := MixReport{
		Settings: MixSettings{SlowUsers: 40, QuickUsers: 20, QuickRounds: 5, RoundGapMs: 200, SlowWorkMs: 5000, BusLatencyMs: 20, TimeScale: 17.27},
		Idle:     MixRun{Quick: 100, QuickP50Ms: 27, QuickP99Ms: 43, QuickMaxMs: 47},
		Loaded:   MixRun{SlowJobs: 40, Quick: 100, QuickP50Ms: 28, QuickP99Ms: 37, QuickMaxMs: 37, SlowAnswered: 40, SlowP50Ms: 5050, SlowP99Ms: 10060},
		P99Ratio: 37.0 / 43, Elapsed: 11.6,
	}
	checkWriters(t, "mix", rep.WriteMarkdown, rep.WriteJSON)
}
