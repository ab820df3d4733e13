package eventbus

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/testmetrics"
)

// A publication the bus takes whole on the first try records nothing (the
// webhook's answer and API Gateway's metrics say it; docs/cost.md); retries
// and failures are counted per entry.
func TestOnlyRetriesAndFailuresAreCounted(t *testing.T) {
	tests := []struct {
		name string
		fail func(d string, attempt int) string
		want map[string]float64
	}{
		{name: "taken whole", want: map[string]float64{}},
		{name: "one entry retried", fail: func(d string, attempt int) string {
			if strings.HasPrefix(d, `{"i":1,`) && attempt == 1 {
				return "ThrottlingException"
			}
			return ""
		}, want: map[string]float64{MetricPublishRetries: 1}},
		{name: "one entry refused", fail: func(d string, _ int) string {
			if strings.HasPrefix(d, `{"i":2,`) {
				return "MalformedDetail"
			}
			return ""
		}, want: map[string]float64{MetricPublishFailures: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			p := NewPublisher(&fakeBus{fail: tt.fail}, "bus", WithSleep(noSleep), WithMetrics(m))
			_, _ = p.Publish(context.Background(), entries(3, 40))
			got := m.Counts()
			if got == nil {
				got = map[string]float64{}
			}
			if !maps.Equal(got, tt.want) || m.Observations("PublishLatency") != 0 {
				t.Fatalf("counts %v (PublishLatency observed %d times), want %v", got, m.Observations("PublishLatency"), tt.want)
			}
		})
	}
}
