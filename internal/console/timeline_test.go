package console

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/xraycollector"
)

// The timeline of an event from what the worker reported and what the
// collector received: the webhook's invocation and hand-offs, each
// receive, the handler, its LINE call, and the dead letter.
func TestTimelineGolden(t *testing.T) {
	base := 1_800_000_000.0
	webhook := xraycollector.Trace{TraceID: "1-webhook", Segments: []xraycollector.Segment{
		{ID: "w", Name: "linegate-WebhookFunction", Type: "segment", Start: base, End: base + 0.004, HTTPStatus: 200},
		{ID: "pe", ParentID: "w", Name: "EventBridge", Namespace: "aws", Operation: "PutEvents", Type: "subsegment", Start: base + 0.001, End: base + 0.002},
		{ID: "sq", ParentID: "w", Name: "SQS", Namespace: "aws", Operation: "SendMessageBatch", Type: "subsegment", Start: base + 0.001, End: base + 0.003},
	}}
	first := xraycollector.Trace{TraceID: "1-first", Segments: []xraycollector.Segment{
		{ID: "k", Name: "linegate-WorkerFunction", Type: "segment", Start: base + 0.01, End: base + 0.02},
		{ID: "r", ParentID: "k", Name: "record", Type: "subsegment", Start: base + 0.011, End: base + 0.019, Fault: true,
			Annotations: map[string]any{"webhookEventId": "E1"}, Exceptions: []string{"error: probe:fail"}},
		{ID: "other", ParentID: "k", Name: "record", Type: "subsegment", Start: base + 0.011, End: base + 0.012, Annotations: map[string]any{"webhookEventId": "E2"}},
	}}
	second := xraycollector.Trace{TraceID: "1-second", Segments: []xraycollector.Segment{
		{ID: "k2", Name: "linegate-WorkerFunction", Type: "segment", Start: base + 2, End: base + 2.01},
		{ID: "r2", ParentID: "k2", Name: "record", Type: "subsegment", Start: base + 2.001, End: base + 2.009, Annotations: map[string]any{"webhookEventId": "E1"}},
		{ID: "h", ParentID: "r2", Name: "api.line.me", Namespace: "remote", Type: "subsegment", Start: base + 2.002, End: base + 2.005, Method: "POST", Path: "/v2/bot/message/push", HTTPStatus: 200},
		{ID: "c", ParentID: "h", Name: "connect", Type: "subsegment", Start: base + 2.002, End: base + 2.003},
	}}
	a := Activity{WebhookEventID: "E1", Type: "message", Chat: alice, ReceivedAt: epoch(base), Receives: []Receive{
		{At: epoch(base + 0.019), ReceiveCount: 1, Outcome: "failed", Queue: "linegate-InteractiveQueue.fifo", DurationMs: 8, Error: "probe:fail", RetryInMs: 1500, TraceID: "1-first"},
		{At: epoch(base + 2.009), ReceiveCount: 2, Outcome: "ok", Queue: "linegate-InteractiveQueue.fifo", DurationMs: 8, TraceID: "1-second"},
		{At: epoch(base + 3), ReceiveCount: 3, Outcome: "dead-lettered", DeadLetterReason: "retries-exhausted", TraceID: "1-missing"},
	}}
	steps := Timeline(a, "1-webhook", map[string]xraycollector.Trace{"1-webhook": webhook, "1-first": first, "1-second": second})
	b, err := json.MarshalIndent(steps, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "timeline.golden.json"), append(b, '\n'))
	// Without the webhook's trace (not arrived yet) the event still starts
	// with its receipt.
	if s := Timeline(a, "1-late", nil); s[0].Stage != "webhook" || !s[0].At.Equal(a.ReceivedAt) {
		t.Fatalf("first step %+v", s[0])
	}
}
