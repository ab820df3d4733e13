package compose

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/telemetry/otelxray"
	"github.com/linegate/linegate/internal/telemetry/xraytrace"
)

func TestNewTracingPicksTheBackend(t *testing.T) {
	tests := []struct {
		backend config.Backend
		opts    TracingOptions
		want    string // the backend's type, "" for an error
		err     string
	}{
		{config.TracingXRay, TracingOptions{}, "*xraytrace.Backend", ""},
		{"", TracingOptions{Daemon: "127.0.0.1:2000", Local: true}, "*xraytrace.Backend", ""},
		{config.TracingOTel, TracingOptions{Daemon: "169.254.79.129:2000", Service: "fn"}, "*otelxray.Backend", ""},
		{config.TracingOTel, TracingOptions{Daemon: "no-port"}, "", "tracing (otel)"},
		{config.TracingXRay, TracingOptions{Daemon: "no-port", Local: true}, "", "tracing (xray)"},
		{"jaeger", TracingOptions{}, "", `unknown backend "jaeger"`},
	}
	for _, tt := range tests {
		tr, err := NewTracing(tt.backend, tt.opts)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NewTracing(%q, %+v) error = %v, want %q", tt.backend, tt.opts, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewTracing(%q): %v", tt.backend, err)
			continue
		}
		var got string
		switch tr.(type) {
		case *xraytrace.Backend:
			got = "*xraytrace.Backend"
		case *otelxray.Backend:
			got = "*otelxray.Backend"
		}
		if got != tt.want {
			t.Errorf("NewTracing(%q) = %T, want %s", tt.backend, tr, tt.want)
		}
		_ = tr.Shutdown(context.Background())
	}
}

// Each invocation Flushing wraps is a span under the invoke's trace, which
// has left (flushed) by the time the handler's answer goes back: with the
// API Gateway status, the handler's error, or its panic, re-raised.
func TestFlushingTracesEachInvocation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	b, err := otelxray.New(otelxray.WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	telemetry.SetDefault(b)
	t.Cleanup(func() { telemetry.SetDefault(nil) })
	var metrics bytes.Buffer
	m := telemetry.NewMetrics(&metrics, "ns")
	invoke := telemetry.WithInvokeHeader(context.Background(),
		telemetry.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Parent: "53995c3f42cd8ad8", Sampled: true})

	api := Flushing(m, func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		m.Count("Called", 1)
		_, s := telemetry.Start(ctx, "verify")
		s.End(nil)
		return events.APIGatewayProxyResponse{StatusCode: 503}, nil
	})
	if _, err := api(invoke, events.APIGatewayProxyRequest{}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported when the invocation returned, want the handler's and the invocation's", len(spans))
	}
	inv := spans[1]
	if inv.Parent.SpanID().String() != "53995c3f42cd8ad8" || !inv.Parent.IsRemote() || inv.Status.Code != codes.Error ||
		spans[0].Parent.SpanID() != inv.SpanContext.SpanID() {
		t.Errorf("invocation span %+v, want a 503 error under Lambda's segment, parent of the handler's span", inv)
	}
	if !strings.Contains(metrics.String(), "Called") {
		t.Errorf("metrics not flushed: %q", metrics.String())
	}

	exp.Reset()
	failing := Flushing(m, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, errors.New("batch failed")
	})
	if _, err := failing(invoke, events.SQSEvent{}); err == nil {
		t.Fatal("the handler's error was lost")
	}
	if s := exp.GetSpans(); len(s) != 1 || s[0].Status.Code != codes.Error || s[0].Status.Description != "batch failed" {
		t.Fatalf("failed invocation spans %+v", s)
	}

	exp.Reset()
	panicking := Flushing(m, func(context.Context, events.SNSEvent) (struct{}, error) { panic("handler bug") })
	func() {
		defer func() {
			if v := recover(); v != "handler bug" {
				t.Errorf("recovered %v, want the handler's panic re-raised", v)
			}
		}()
		_, _ = panicking(invoke, events.SNSEvent{})
	}()
	if s := exp.GetSpans(); len(s) != 1 || s[0].Status.Description != "panic: handler bug" || len(s[0].Events) != 1 {
		t.Fatalf("panicking invocation spans %+v", s)
	}
}

// BenchmarkNewTracing is what building each backend adds to a function's
// INIT (docs/benchmarks.md, "Cold start"): go test -run '^$' -bench NewTracing ./internal/compose
func BenchmarkNewTracing(b *testing.B) {
	for _, backend := range []config.Backend{config.TracingXRay, config.TracingOTel} {
		b.Run(string(backend), func(b *testing.B) {
			for b.Loop() {
				tr, err := NewTracing(backend, TracingOptions{Daemon: "127.0.0.1:2000", Service: "fn", Region: "us-east-1"})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = tr.Shutdown(context.Background())
				b.StartTimer()
			}
		})
	}
}
