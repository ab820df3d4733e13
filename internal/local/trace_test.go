package local

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/xraycollector"
)

// backends are the tracing backends every trace test runs under: the same
// waterfall must reach /_local/traces from either (`linegate local
// --tracing otel`).
var backends = []config.Backend{config.TracingXRay, config.TracingOTel}

// eachBackend runs test once per tracing backend.
func eachBackend(t *testing.T, test func(t *testing.T, b config.Backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) { test(t, b) })
	}
}

// One LINE text event through linegate local, followed in the collected
// X-Ray segments: the webhook's PutEvents call, the worker's record
// subsegment linked (not merged) to the webhook's trace and annotated with
// the webhookEventId, and the LINE reply call under that record. The
// /_local/traces JSON is the same under both backends.
func TestTraceFollowsOneEvent(t *testing.T) {
	eachBackend(t, testTraceFollowsOneEvent)
}

func testTraceFollowsOneEvent(t *testing.T, backend config.Backend) {
	rt, lp := start(t, Config{Tracing: backend})
	if rt.Tracing() != backend {
		t.Fatalf("runtime traces with %q, want %q", rt.Tracing(), backend)
	}
	user := "U4444444444444444444444444444444d"
	id := deliver(t, lp, lp.Text(user, "trace me"))
	eventually(t, 10*time.Second, "the reply", func() bool { _, ok := findMessage(t, rt, user, "reply", "trace me"); return ok })

	webhookFn, workerFn := functionName(t, rt, "WebhookFunction"), functionName(t, rt, "WorkerFunction")
	lineHost := mustHost(t, rt.URL())
	var webhook, worker xraycollector.Trace
	var record xraycollector.Segment
	// Segments arrive over UDP one by one, after the reply: wait until every
	// segment asserted on below is there and finished.
	waitTraces(t, rt, 10*time.Second, "the webhook trace (root, PutEvents) linked from the worker trace (root, record "+id+", its LINE call)", func(traces []xraycollector.Trace) bool {
		webhook, worker, record = xraycollector.Trace{}, xraycollector.Trace{}, xraycollector.Segment{}
		for _, tr := range traces {
			if s, ok := findSegment(tr, func(s xraycollector.Segment) bool { return s.Name == "record" && s.Annotations["webhookEventId"] == id }); ok {
				worker, record = tr, s
			}
		}
		for _, tr := range traces {
			for _, l := range worker.Links {
				if tr.TraceID == l.TraceID {
					webhook = tr
				}
			}
		}
		return finished(webhook, func(s xraycollector.Segment) bool { return s.Name == webhookFn }) &&
			finished(webhook, func(s xraycollector.Segment) bool { return s.Name == "EventBridge" }) &&
			finished(worker, func(s xraycollector.Segment) bool { return s.Name == workerFn }) &&
			!record.InProgress &&
			finished(worker, func(s xraycollector.Segment) bool {
				return s.ParentID == record.ID && s.Namespace == "remote" && s.Name == lineHost
			})
	})
	if webhook.TraceID == worker.TraceID {
		t.Fatal("the worker continued the webhook's trace; it must be a linked trace")
	}
	// The spans came the backend's way: OTLP datagrams under OpenTelemetry,
	// segment documents under the X-Ray SDK.
	for _, tr := range []xraycollector.Trace{webhook, worker} {
		for _, s := range tr.Segments {
			if s.OTLP != (backend == config.TracingOTel) {
				t.Fatalf("%s segment %q arrived with otlp=%v under %s", tr.TraceID, s.Name, s.OTLP, backend)
			}
		}
	}
	root := segmentNamed(t, webhook, webhookFn)
	put := segmentNamed(t, webhook, "EventBridge")
	if put.ParentID != root.ID || put.Operation != "PutEvents" || put.Namespace != "aws" || put.Fault || put.Error {
		t.Fatalf("PutEvents subsegment %+v under %s", put, root.ID)
	}
	if record.Annotations["eventType"] != "message" || record.Annotations["sourceType"] != "user" ||
		record.Annotations["upstreamTraceId"] != webhook.TraceID {
		t.Fatalf("record annotations %v", record.Annotations)
	}
	var reply xraycollector.Segment
	for _, s := range worker.Segments {
		if s.ParentID == record.ID && s.Namespace == "remote" && s.Name == lineHost {
			reply = s
		}
	}
	if reply.ID == "" || reply.HTTPStatus != 200 || reply.Fault {
		t.Fatalf("no successful LINE call under the record subsegment: %+v", worker.Segments)
	}
	if segmentNamed(t, worker, workerFn).ID != record.ParentID {
		t.Fatal("record subsegment is not under the worker invocation's segment")
	}
}

// traceLink is the X-Ray console link a crash card carries.
var traceLink = regexp.MustCompile(`xray:traces/(1-[0-9a-f]{8}-[0-9a-f]{24})`)

// A panicking handler's record subsegment carries the fault, and the crash
// card's X-Ray link names that record's trace, under either backend.
func TestCrashCardLinksTheFailedRecordsTrace(t *testing.T) {
	eachBackend(t, testCrashCardLinksTheFailedRecordsTrace)
}

func testCrashCardLinksTheFailedRecordsTrace(t *testing.T, backend config.Backend) {
	rt, lp := start(t, Config{TimeScale: 60, Tracing: backend})
	id := deliver(t, lp, lp.Text("U5555555555555555555555555555555e", "probe:panic"))
	var card sentMessage
	eventually(t, 10*time.Second, "the crash card", func() bool {
		m, ok := findMessage(t, rt, DefaultOperator, "push", id)
		card = m
		return ok
	})
	m := traceLink.FindStringSubmatch(string(card.Messages[0]))
	if m == nil {
		t.Fatalf("crash card has no X-Ray trace link: %s", card.Messages[0])
	}
	linked := m[1]
	// The card can be pushed before the record's segment, sent over UDP when
	// the record ends, reaches the collector.
	waitTraces(t, rt, 10*time.Second, "a faulted record subsegment with webhookEventId "+id+" in the linked trace "+linked, func(traces []xraycollector.Trace) bool {
		for _, tr := range traces {
			if tr.TraceID == linked {
				return finished(tr, func(s xraycollector.Segment) bool {
					return s.Name == "record" && s.Annotations["webhookEventId"] == id && s.Fault
				})
			}
		}
		return false
	})
}

// Two runtimes in one process each collect only their own segments, from
// every entry point that starts one (API Gateway for the webhook, the SQS
// event source for the worker, SNS for the notifier): the tracing
// configuration travels in each invocation's context, not in process-wide
// X-Ray state the second Start would take over.
func TestTwoRuntimesKeepTheirOwnTraces(t *testing.T) {
	eachBackend(t, testTwoRuntimesKeepTheirOwnTraces)
}

func testTwoRuntimesKeepTheirOwnTraces(t *testing.T, backend config.Backend) {
	type run struct {
		rt    *Runtime
		id    string
		trace map[string]bool
	}
	// Both start before either is used: a process-wide configuration would
	// now send everything to the second one's collector.
	var runs []*run
	var platforms []*lineplatform.Platform
	for range 2 {
		rt, lp := start(t, Config{Tracing: backend})
		runs, platforms = append(runs, &run{rt: rt}), append(platforms, lp)
	}
	for i, user := range []string{"U6666666666666666666666666666666a", "U6666666666666666666666666666666b"} {
		runs[i].id = deliver(t, platforms[i], platforms[i].Text(user, "probe:panic"))
	}
	for i, r := range runs {
		fns := []string{functionName(t, r.rt, "WebhookFunction"), functionName(t, r.rt, "WorkerFunction"), functionName(t, r.rt, "NotifierFunction")}
		what := fmt.Sprintf("runtime %d: finished segments of %v and the record of its event %s", i, fns, r.id)
		traces := waitTraces(t, r.rt, 10*time.Second, what, func(traces []xraycollector.Trace) bool {
			all := xraycollector.Trace{}
			for _, tr := range traces {
				all.Segments = append(all.Segments, tr.Segments...)
			}
			for _, fn := range fns {
				if !finished(all, func(s xraycollector.Segment) bool { return s.Name == fn && s.Type == "segment" }) {
					return false
				}
			}
			return finished(all, func(s xraycollector.Segment) bool {
				return s.Name == "record" && s.Annotations["webhookEventId"] == r.id
			})
		})
		r.trace = map[string]bool{}
		for _, tr := range traces {
			r.trace[tr.TraceID] = true
		}
	}
	for i, r := range runs {
		other := runs[1-i]
		for id := range r.trace {
			if other.trace[id] {
				t.Errorf("trace %s reached the collectors of both runtimes", id)
			}
		}
		var traces []xraycollector.Trace
		getJSON(t, r.rt.URL()+"/_local/traces", &traces)
		for _, tr := range traces {
			if _, ok := findSegment(tr, func(s xraycollector.Segment) bool { return s.Annotations["webhookEventId"] == other.id }); ok {
				t.Errorf("runtime %d collected runtime %d's event %s: %s", i, 1-i, other.id, describeTraces([]xraycollector.Trace{tr}))
			}
		}
	}
}

// waitTraces polls the runtime's /_local/traces until cond accepts them, and
// returns them. Segments arrive asynchronously over UDP, so a trace test
// must wait for what it asserts on; when timeout passes it fails, naming
// what it waited for and listing every trace it saw last.
func waitTraces(t *testing.T, rt *Runtime, timeout time.Duration, what string, cond func([]xraycollector.Trace) bool) []xraycollector.Trace {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var traces []xraycollector.Trace
		getJSON(t, rt.URL()+"/_local/traces", &traces)
		if cond(traces) {
			return traces
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; the collector had %d traces:\n%s", timeout, what, len(traces), describeTraces(traces))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// describeTraces lists traces one segment a line, for failure messages.
func describeTraces(traces []xraycollector.Trace) string {
	var b strings.Builder
	for _, tr := range traces {
		fmt.Fprintf(&b, "  trace %s links %v\n", tr.TraceID, tr.Links)
		for _, s := range tr.Segments {
			fmt.Fprintf(&b, "    %s %q id=%s parent=%s ns=%s inProgress=%v fault=%v status=%d annotations=%v\n",
				s.Type, s.Name, s.ID, s.ParentID, s.Namespace, s.InProgress, s.Fault, s.HTTPStatus, s.Annotations)
		}
	}
	return b.String()
}

// findSegment returns the first segment of tr that ok accepts.
func findSegment(tr xraycollector.Trace, ok func(xraycollector.Segment) bool) (xraycollector.Segment, bool) {
	for _, s := range tr.Segments {
		if ok(s) {
			return s, true
		}
	}
	return xraycollector.Segment{}, false
}

// finished reports whether tr holds a finished segment that ok accepts.
func finished(tr xraycollector.Trace, ok func(xraycollector.Segment) bool) bool {
	_, found := findSegment(tr, func(s xraycollector.Segment) bool { return !s.InProgress && ok(s) })
	return found
}

// functionName is the name the template gives the function with logicalID.
func functionName(t *testing.T, rt *Runtime, logicalID string) string {
	t.Helper()
	for _, f := range rt.Topology().Functions {
		if f.LogicalID == logicalID {
			return f.Name
		}
	}
	t.Fatalf("no function %s in the template", logicalID)
	return ""
}

func segmentNamed(t *testing.T, tr xraycollector.Trace, name string) xraycollector.Segment {
	t.Helper()
	for _, s := range tr.Segments {
		if s.Name == name {
			return s
		}
	}
	b, _ := json.Marshal(tr)
	t.Fatalf("no segment %q in trace %s", name, b)
	return xraycollector.Segment{}
}

func mustHost(t *testing.T, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}
