package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error { return writeJSON(w, r, "report") }

// writeJSON writes v as indented JSON; what names it in the error.
func writeJSON(w io.Writer, v any, what string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("bench: write JSON %s: %w", what, err)
	}
	return nil
}

// writeText writes the markdown built in b; what names it in the error.
func writeText(w io.Writer, b *strings.Builder, what string) error {
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("bench: write markdown %s: %w", what, err)
	}
	return nil
}

// WriteMarkdown writes the report as markdown: the settings, one table row
// per system, the ratios against each baseline, and the accounting.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "## linegate bench\n\n")
	fmt.Fprintf(&b, "%d events from distinct users, concurrency %d, handler work %s, bus latency %s, LINE timeout %s, %d redelivery(ies) after %s",
		s.Events, s.Concurrency, fmtMs(s.WorkMs), fmtMs(s.BusLatencyMs), s.LineTimeout, s.Redeliveries, s.RedeliveryInterval)
	if s.EffectiveTimeScale > 0 {
		fmt.Fprintf(&b, ", linegate time scale %.4g", s.EffectiveTimeScale)
		if s.EffectiveTimeScale != s.TimeScale {
			fmt.Fprintf(&b, " (asked %.4g; lowered so a visibility timeout outlasts the work)", s.TimeScale)
		}
	}
	if s.Crash {
		b.WriteString(", workers crashed mid-run")
	}
	if s.Chaos {
		fmt.Fprintf(&b, ", chaos: PutEvents failures %g, failed first deliveries %g, handler failures %g, poison %g, LINE 429 %g, LINE 500 %g",
			s.PutFailRate, s.WebhookFailRate, s.HandlerFailRate, s.PoisonRate, s.Line429Rate, s.Line500Rate)
	}
	fmt.Fprintf(&b, ", seed %d.\n\n", s.Seed)

	b.WriteString("| system | ack p50 | ack p99 | ack max | LINE timeouts | redeliveries | handler runs per event | duplicate side effects | duplicate replies | lost | e2e p50 | e2e p99 | throughput |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, sr := range r.Systems {
		lost := fmt.Sprint(sr.Lost)
		if sr.Crashed && sr.InFlightAtCrash >= 0 {
			lost += fmt.Sprintf(" (%d in flight at crash)", sr.InFlightAtCrash)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d / %d | %d | %.2f | %d | %d | %s | %s | %s | %.1f/s |\n",
			sr.System, fmtMs(sr.AckP50Ms), fmtMs(sr.AckP99Ms), fmtMs(sr.AckMaxMs), sr.Timeouts, sr.Attempts,
			sr.Redeliveries, sr.ExecutionsPerEvent, sr.DuplicateEffects, sr.Duplicates, lost, fmtMs(sr.E2EP50Ms), fmtMs(sr.E2EP99Ms), sr.Throughput)
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\nlinegate against each baseline (× better; latencies baseline ÷ linegate, throughput linegate ÷ baseline):\n\n")
		b.WriteString("| baseline | ack p50 | ack p99 | ack max | e2e p99 | throughput |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, ra := range r.Ratios {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", ra.Baseline, fmtX(ra.AckP50), fmtX(ra.AckP99), fmtX(ra.AckMax), fmtX(ra.E2EP99), fmtX(ra.Throughput))
		}
	}
	if a := r.Accounting; a != nil {
		fmt.Fprintf(&b, "\nlinegate accounting: %d events, %d answered exactly once, %d duplicated, %d lost; %d poison, %d dead-lettered, %d in the DLQs",
			a.Events, a.ExactlyOnce, a.Duplicates, a.Lost, a.Poison, a.DeadLettered, a.DLQVisible)
		if len(a.AlarmsFired) > 0 {
			fmt.Fprintf(&b, "; alarm %s fired", strings.Join(a.AlarmsFired, ", "))
		}
		if len(a.Notified) > 0 {
			fmt.Fprintf(&b, "; operator notified of %s", strings.Join(a.Notified, ", "))
		}
		b.WriteString(".\n")
		if in := a.Injected; r.Settings.Chaos {
			fmt.Fprintf(&b, "\nchaos served: %d PutEvents entries failed, %d first deliveries answered 500 (LINE redelivered them), %d events failed their first attempt, LINE answered %d × 429 and %d × 500.\n",
				in.PutEventsFailures, in.WebhookFailures, in.FlakyEvents, in.Line429, in.Line500)
		}
	}
	if len(r.Violations) > 0 {
		b.WriteString("\n**INVARIANTS VIOLATED**\n\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "- %s\n", v)
		}
	} else if r.Accounting != nil {
		b.WriteString("\nAll invariants hold.\n")
	}
	fmt.Fprintf(&b, "\nRun took %.1f s.\n", r.Elapsed)
	return writeText(w, &b, "report")
}

func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func fmtX(v float64) string {
	if v == 0 {
		return "n/a"
	}
	if v < 1 {
		return fmt.Sprintf("%.2f×", v)
	}
	return fmt.Sprintf("%.1f×", v)
}

// WriteJSON writes the mix report as indented JSON.
func (r MixReport) WriteJSON(w io.Writer) error { return writeJSON(w, r, "mix report") }

// WriteMarkdown writes the report as markdown: the settings, the two runs
// side by side, and the p99 ratio the claim is about.
func (r MixReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "## linegate bench --mix\n\n")
	fmt.Fprintf(&b, "%d quick messages (%d users × %d rounds, %s apart) answered at once; long work: %d users, one job each (bot.Long, %s of work); bus latency %s, time scale %.4g",
		s.QuickUsers*s.QuickRounds, s.QuickUsers, s.QuickRounds, fmtMs(s.RoundGapMs), s.SlowUsers, fmtMs(s.SlowWorkMs), fmtMs(s.BusLatencyMs), s.TimeScale)
	if s.InPlace {
		b.WriteString(", the slow route NOT declared long (run in place, as before bot.Long)")
	}
	if len(s.Params) > 0 {
		fmt.Fprintf(&b, ", template overrides %v", s.Params)
	} else {
		b.WriteString(", template defaults")
	}
	b.WriteString(".\n\n")
	b.WriteString("| run | quick p50 | quick p99 | quick max | long jobs answered | long e2e p50 | long e2e p99 | unanswered | duplicated |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, run := range []struct {
		name string
		m    MixRun
	}{{"no long work", r.Idle}, {fmt.Sprintf("%d long jobs in flight", r.Loaded.SlowJobs), r.Loaded}} {
		m := run.m
		slowP50, slowP99 := "-", "-"
		if m.SlowJobs > 0 {
			slowP50, slowP99 = fmtMs(m.SlowP50Ms), fmtMs(m.SlowP99Ms)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d / %d | %s | %s | %d | %d |\n", run.name, fmtMs(m.QuickP50Ms), fmtMs(m.QuickP99Ms), fmtMs(m.QuickMaxMs),
			m.SlowAnswered, m.SlowJobs, slowP50, slowP99, m.Unanswered, m.Duplicated)
	}
	verdict := "within"
	if r.P99Ratio > 2 {
		verdict = "OVER"
	}
	fmt.Fprintf(&b, "\nquick replies' p99 with long work in flight ÷ without: **%s** (%s the 2× bound).\n", fmtX(r.P99Ratio), verdict)
	fmt.Fprintf(&b, "\nRun took %.1f s.\n", r.Elapsed)
	return writeText(w, &b, "mix report")
}
