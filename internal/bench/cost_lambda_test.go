package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/coldstart"
)

// FunctionLogBytes, the cost table's log volume, is what the deployed
// webhook and worker write to CloudWatch Logs for one event, within 5 %:
// measured on the real binaries (the Makefile's build) under the real Lambda
// Runtime Interface Emulator, with Lambda's environment at the template's
// defaults (JSON logs at INFO, active tracing, CloudFormation's function
// names), answering one-event webhooks one at a time. What is counted is the
// function's own output (stdout and stderr, as Lambda ships both) between
// the emulator's START and END lines; the START/END/REPORT lines themselves
// are platformLogBytes. The webhook writes nothing for a request it accepts;
// the worker writes one line per record, which carries the webhookEventId,
// the trace id and request id of the invocation and its EMF metrics.
func TestFunctionLogBytesInLambda(t *testing.T) {
	c := startBenchCloud(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 20
	per := map[string]float64{}
	for _, fn := range []string{"webhook", "worker"} {
		iv := startFunction(t, bootstrap(t, fn), functionEnv(t, fn, 256, c), nil)
		total := 0
		for i := range n + 1 {
			ev := webhookEvent(t)
			if fn == "worker" {
				ev = workerEvent(t, c, i)
			}
			inv, err := iv.Run(ctx, ev)
			if err != nil {
				t.Fatalf("%s invocation %d: %v\noutput: %s", fn, i, err, iv.Logs())
			}
			checkAnswer(t, fn, inv.Body)
			if i == 0 {
				continue // the cold start: what INIT writes is not per event
			}
			checkLines(t, fn, inv, inv.Output)
			if i == 1 && len(inv.Output) > 0 {
				t.Logf("%s", inv.Output[0])
			}
			for _, l := range inv.Output {
				total += len(l) + 1 // and the newline
			}
		}
		per[fn] = float64(total) / n
	}
	got := per["webhook"] + per["worker"]
	t.Logf("per event: webhook %.0f B, worker %.0f B, %.0f B in all (FunctionLogBytes %d)", per["webhook"], per["worker"], got, FunctionLogBytes)
	if math.Abs(got-FunctionLogBytes) > 0.05*FunctionLogBytes {
		t.Fatalf("%.0f bytes per event, FunctionLogBytes says %d: measure again and regenerate docs/cost.md", got, FunctionLogBytes)
	}
}

// checkAnswer fails unless fn's answer is a success: 200 for the webhook,
// no batch item failure for the worker.
func checkAnswer(t *testing.T, fn string, body []byte) {
	t.Helper()
	var a struct {
		StatusCode        int   `json:"statusCode"`
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(body, &a); err != nil || (fn == "webhook" && a.StatusCode != 200) || len(a.BatchItemFailures) > 0 {
		t.Fatalf("%s answered %s (%v)", fn, body, err)
	}
}

// checkLines fails unless the lines are what an answered event should write:
// none from the webhook, one from the worker that is both its record's log
// line (webhookEventId, trace id, the invocation's request id) and an EMF
// document.
func checkLines(t *testing.T, fn string, inv coldstart.Invocation, lines []string) {
	t.Helper()
	if fn == "webhook" {
		if len(lines) != 0 {
			t.Fatalf("the webhook wrote %d lines for an accepted request: %s", len(lines), strings.Join(lines, "\n"))
		}
		return
	}
	if len(lines) != 1 {
		t.Fatalf("the worker wrote %d lines for one record, want 1: %s", len(lines), strings.Join(lines, "\n"))
	}
	var l map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
		t.Fatalf("not JSON: %s", lines[0])
	}
	if l["message"] != "record processed" || l["webhookEventId"] == nil || l["traceId"] != inv.TraceID || inv.TraceID == "" || l["requestId"] != inv.RequestID ||
		l["_aws"] == nil || l["RecordsProcessed"] != nil || l["LineRepliesSent"] != 1.0 || l["EndToEndLatency"] == nil {
		t.Fatalf("the worker's line is not its record's line with the invocation's metrics: %s", lines[0])
	}
}

// eventSeq numbers the benchmark's worker events across its runs.
var eventSeq atomic.Int64

// Lambda bills a function's duration at its memory size, and gives it a
// share of a vCPU in proportion (1,769 MB is one vCPU:
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
// This runs the real webhook and worker under aws-lambda-rie at 128, 256
// and 512 MB: the emulator, and so the function it forks, in a cgroup whose
// CFS bandwidth is that share (a 20 ms period, the one observed in Lambda:
// https://github.com/pwrdrvr/lambda-dispatch/issues/246; set
// BENCH_CFS_PERIOD to try another). The emulator is rapid, the process that
// serves the Runtime API inside Lambda's sandbox beside the function (the
// Firecracker paper's "shim control process" in each MicroVM:
// https://www.usenix.org/system/files/nsdi20-paper-agache.pdf), so its CPU
// comes out of the same share. The AWS and LINE round trips of the capacity
// model (DefaultCapacityLatencies) are added by a proxy. It reports per
// invocation the invoke's round trip (ns/op), Lambda's billed milliseconds
// (billed-ms/op: the runtime's Duration from rapid's INVOKE RTDONE line,
// rounded up), the CPU time the sandbox used (cpu-ms/op: the function and
// the emulator), the GB-seconds (gb-ms/op, memory × billed), the p99 of
// Duration (p99-ms) and the function's peak resident memory (maxrss-MiB).
// INIT (rapid's INIT REPORT), once per sandbox, is logged. It needs root on a
// cgroup v1 host (it skips otherwise). docs/cost.md quotes:
//
//	go test -run '^$' -bench BilledDuration -benchtime 60x -count 6 ./internal/bench
//
// The machine's cores are not Graviton's, and another job on the machine
// competes for them: compare the memory sizes within one run.
func BenchmarkBilledDuration(b *testing.B) {
	eventSeq.Store(1_000_000)
	period := 20 * time.Millisecond
	if v := os.Getenv("BENCH_CFS_PERIOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("BENCH_CFS_PERIOD: %v", err)
		}
		period = d
	}
	c := startBenchCloud(b, true)
	for _, fn := range []string{"webhook", "worker"} {
		bin := bootstrap(b, fn)
		for _, mb := range []int{128, 256, 512} {
			b.Run(fmt.Sprintf("%s/%dMB", fn, mb), func(b *testing.B) {
				g, err := newCPUGroup(b, fmt.Sprintf("linegate-bench-%d-%s-%d", os.Getpid(), fn, mb), mb, period)
				if err != nil {
					b.Skipf("SKIPPED: %v", err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				iv := startFunction(b, bin, functionEnv(b, fn, mb, c), g)
				event := func() []byte {
					if fn == "worker" {
						return workerEvent(b, c, int(eventSeq.Add(1))) // a new event each time: no duplicate is skipped
					}
					return webhookEvent(b)
				}
				if _, err := iv.Run(ctx, event()); err != nil { // the cold start
					b.Fatal(err)
				}
				init := iv.Init()
				b.Logf("%s at %d MB: INIT %v", fn, mb, init.Round(time.Millisecond))
				var billed, durations []time.Duration
				cpu0 := g.usage()
				for b.Loop() {
					inv, err := iv.Run(ctx, event())
					if err != nil {
						b.Fatal(err)
					}
					d := inv.Duration
					durations = append(durations, d)
					billed = append(billed, (d + time.Millisecond - 1).Truncate(time.Millisecond)) // Lambda bills whole milliseconds, rounded up
				}
				cpu := g.usage() - cpu0
				var sum time.Duration
				for _, d := range billed {
					sum += d
				}
				per := float64(sum) / float64(len(billed)) / float64(time.Millisecond)
				b.ReportMetric(per, "billed-ms/op")
				b.ReportMetric(per*float64(mb)/1024, "gb-ms/op")
				b.ReportMetric(float64(cpu)/float64(len(billed))/float64(time.Millisecond), "cpu-ms/op")
				b.ReportMetric(float64(functionRSS(g, bin))/(1<<20), "maxrss-MiB")
				slices.Sort(durations)
				b.ReportMetric(float64(durations[len(durations)*99/100])/float64(time.Millisecond), "p99-ms")
			})
		}
	}
}
