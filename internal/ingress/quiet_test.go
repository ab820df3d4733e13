package ingress

import (
	"context"
	"maps"
	"testing"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/testmetrics"
)

// A request the webhook answers 200 writes no metric: API Gateway's own
// metrics count and time it, and SQS's NumberOfMessagesSent counts its chat
// events, for free, while every EMF byte is billed (docs/cost.md). What goes
// wrong is counted, once per request.
func TestOnlyWhatGoesWrongIsCounted(t *testing.T) {
	text := sample(t, "message-text-user.json")
	tests := []struct {
		name   string
		method string
		sig    string
		body   []byte
		pubErr error
		want   map[string]float64
	}{
		{name: "accepted", body: text, want: map[string]float64{}},
		{name: "verify request", body: sample(t, "verify-empty-events.json"), want: map[string]float64{}},
		{name: "wrong signature", body: text, sig: "x", want: map[string]float64{MetricSignaturesRejected: 1}},
		{name: "not POST", method: "GET", want: map[string]float64{MetricRequestsRejected: 1}},
		{name: "not JSON", body: []byte("hello"), want: map[string]float64{MetricRequestsRejected: 1}},
		// The bus's refusal is the publisher's to count (PublishFailures).
		{name: "bus refuses", body: text, pubErr: eventbus.ErrNotAccepted, want: map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			pub := &fakePublisher{recorder[eventbus.Entry]{err: tt.pubErr}}
			h := newHandler(t, pub, WithChatQueue(&fakeQueue{recorder[chatqueue.Message]{}}), WithMetrics(m))
			method, sig := tt.method, tt.sig
			if method == "" {
				method = "POST"
			}
			if sig == "" {
				sig = sign(tt.body)
			}
			if _, err := h.Handle(context.Background(), method, sig, tt.body); (err != nil) == (tt.name == "accepted" || tt.name == "verify request") {
				t.Fatalf("Handle: %v", err)
			}
			got := m.Counts()
			if got == nil {
				got = map[string]float64{}
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("counts %v, want %v", got, tt.want)
			}
			for _, name := range []string{"AckLatency", "PublishLatency", "QueueLatency"} {
				if n := m.Observations(name); n != 0 {
					t.Fatalf("%s observed %d times: a request's latency is API Gateway's IntegrationLatency", name, n)
				}
			}
		})
	}
}
