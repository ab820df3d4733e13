package local

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/xraycollector"
)

// One LINE text event through linegate local, followed in the collected
// X-Ray segments: the webhook's PutEvents call, the worker's record
// subsegment linked (not merged) to the webhook's trace and annotated with
// the webhookEventId, and the LINE reply call under that record.
func TestTraceFollowsOneEvent(t *testing.T) {
	rt, lp := start(t, Config{})
	user := "U4444444444444444444444444444444d"
	id := deliver(t, lp, lp.Text(user, "trace me"))
	eventually(t, 10*time.Second, "the reply", func() bool { _, ok := findMessage(t, rt, user, "reply", "trace me"); return ok })

	var webhook, worker xraycollector.Trace
	var record xraycollector.Segment
	eventually(t, 10*time.Second, "both traces", func() bool {
		var traces []xraycollector.Trace
		getJSON(t, rt.URL()+"/_local/traces", &traces)
		webhook, worker, record = xraycollector.Trace{}, xraycollector.Trace{}, xraycollector.Segment{}
		for _, tr := range traces {
			for _, s := range tr.Segments {
				if s.Name == "record" && s.Annotations["webhookEventId"] == id {
					worker, record = tr, s
				}
			}
		}
		for _, tr := range traces {
			for _, l := range worker.Links {
				if tr.TraceID == l.TraceID {
					webhook = tr
				}
			}
		}
		return worker.TraceID != "" && webhook.TraceID != "" && hasChild(worker, record.ID, func(s xraycollector.Segment) bool { return s.Namespace == "remote" })
	})
	if webhook.TraceID == worker.TraceID {
		t.Fatal("the worker continued the webhook's trace; it must be a linked trace")
	}
	root := segmentNamed(t, webhook, "linegate-WebhookFunction")
	put := segmentNamed(t, webhook, "EventBridge")
	if put.ParentID != root.ID || put.Operation != "PutEvents" || put.Namespace != "aws" || put.Fault || put.Error {
		t.Fatalf("PutEvents subsegment %+v under %s", put, root.ID)
	}
	if record.Annotations["eventType"] != "message" || record.Annotations["sourceType"] != "user" ||
		record.Annotations["upstreamTraceId"] != webhook.TraceID {
		t.Fatalf("record annotations %v", record.Annotations)
	}
	lineHost := mustHost(t, rt.URL())
	var reply xraycollector.Segment
	for _, s := range worker.Segments {
		if s.ParentID == record.ID && s.Namespace == "remote" && s.Name == lineHost {
			reply = s
		}
	}
	if reply.ID == "" || reply.HTTPStatus != 200 || reply.Fault {
		t.Fatalf("no successful LINE call under the record subsegment: %+v", worker.Segments)
	}
	if segmentNamed(t, worker, "linegate-WorkerFunction").ID != record.ParentID {
		t.Fatal("record subsegment is not under the worker invocation's segment")
	}
}

// A panicking handler's record subsegment carries the fault, and the crash
// card's X-Ray link names that record's trace.
func TestCrashCardLinksTheFailedRecordsTrace(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60})
	id := deliver(t, lp, lp.Text("U5555555555555555555555555555555e", "probe:panic"))
	var card sentMessage
	eventually(t, 10*time.Second, "the crash card", func() bool {
		m, ok := findMessage(t, rt, DefaultOperator, "push", id)
		card = m
		return ok
	})
	var traces []xraycollector.Trace
	getJSON(t, rt.URL()+"/_local/traces", &traces)
	for _, tr := range traces {
		for _, s := range tr.Segments {
			if s.Name == "record" && s.Annotations["webhookEventId"] == id && s.Fault {
				if !strings.Contains(string(card.Messages[0]), "xray:traces/"+tr.TraceID) {
					t.Fatalf("crash card does not link trace %s: %s", tr.TraceID, card.Messages[0])
				}
				return
			}
		}
	}
	t.Fatal("no faulted record subsegment for the panicking event")
}

func hasChild(tr xraycollector.Trace, parent string, ok func(xraycollector.Segment) bool) bool {
	for _, s := range tr.Segments {
		if s.ParentID == parent && ok(s) {
			return true
		}
	}
	return false
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
