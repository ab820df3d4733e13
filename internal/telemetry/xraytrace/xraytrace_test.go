package xraytrace

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-xray-sdk-go/v2/xraylog"

	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/tracetest"
)

// newBackend builds the X-Ray backend the conformance suite asks for. In
// Lambda mode the SDK's facade is the invocation; the daemon address still
// points at the suite's collector.
func newBackend(t *testing.T, m tracetest.Mode) tracetest.Backend {
	t.Helper()
	opts := []Option{WithDaemonAddress(m.Daemon)}
	if m.Invocations {
		opts = append(opts, WithSampleAll(), WithInvocationSegments())
	}
	b, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	tracetest.Run(t, newBackend)
}

func TestNewErrors(t *testing.T) {
	if b, err := New(WithDaemonAddress("no-port")); err == nil || b != nil {
		t.Fatalf("New with a bad daemon address = %v, %v; want an error", b, err)
	}
}

// Without options the backend follows the SDK's process-wide configuration
// and leaves invocations to Lambda's facade.
func TestLambdaDefaults(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if b.cfg != nil || b.invocations {
		t.Fatalf("New() = %+v, want the process-wide configuration and no invocation segments", b)
	}
	ctx := telemetry.WithBackend(context.Background(), b)
	if c, s := telemetry.StartInvocation(ctx, "webhook"); c != ctx || s.ID() != "" {
		t.Fatal("StartInvocation recorded an invocation Lambda's facade stands for")
	}
}

func TestSDKDisabled(t *testing.T) {
	t.Setenv("AWS_XRAY_SDK_DISABLED", "true")
	col := tracetest.NewCollector(t)
	b, err := New(WithDaemonAddress(col.Addr()), WithSampleAll(), WithInvocationSegments())
	if err != nil {
		t.Fatal(err)
	}
	invoke := telemetry.Header{Root: "1-6650a1b2-aaaabbbbccccddddeeeeffff", Parent: "9999aaaabbbbcccc", Sampled: true}
	ctx, seg := telemetry.StartInvocation(telemetry.WithBackend(context.Background(), b), "webhook")
	sctx, sp := telemetry.Start(telemetry.WithInvokeHeader(ctx, invoke), "publish")
	sp.Annotate("k", 1)
	sp.End(errors.New("x"))
	seg.SetHTTPStatus(500)
	seg.End(nil)
	if seg.TraceID() != "" || sp.ID() != "" || b.Header(sctx) != (telemetry.Header{}) {
		t.Fatalf("disabled SDK reports a trace: %q %+v", seg.TraceID(), b.Header(sctx))
	}
	tracetest.CheckCallsUntraced(t, b, ctx, "disabled SDK")
}

func TestAnnotationConversion(t *testing.T) {
	tests := []struct {
		in   any
		want any
	}{
		{"s", "s"}, {true, true}, {int64(7), 7}, {uint8(3), uint(3)}, {float32(1.5), 1.5},
		{int8(-1), -1}, {int16(2), 2}, {int32(3), 3}, {uint16(4), uint(4)}, {uint32(5), uint(5)}, {uint64(6), uint(6)},
		{time.Second, "1s"}, {errors.New("e"), "e"}, {[]int{1}, "[1]"},
	}
	for _, tt := range tests {
		if got := annotationValue(tt.in); got != tt.want {
			t.Errorf("annotationValue(%#v) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
	if got := annotationKey("a-b.c_d9"); got != "a_b_c_d9" {
		t.Errorf("annotationKey = %q", got)
	}
}

func TestSDKLoggerFilters(t *testing.T) {
	var buf bytes.Buffer
	l := sdkLogger{log: slog.New(slog.NewJSONHandler(&buf, nil)), min: xraylog.LogLevelWarn}
	l.Log(xraylog.LogLevelError, stringer("Suppressing AWS X-Ray context missing panic: failed to begin subsegment"))
	l.Log(xraylog.LogLevelInfo, stringer("Emitter using address: 127.0.0.1:2000"))
	if buf.Len() != 0 {
		t.Fatalf("logged %s", buf.String())
	}
	l.Log(xraylog.LogLevelError, stringer("Error dialing emitter address"))
	if !strings.Contains(buf.String(), `"level":"ERROR"`) || !strings.Contains(buf.String(), "Error dialing emitter address") {
		t.Fatalf("error not logged as JSON ERROR: %s", buf.String())
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// BenchmarkInvocation is what the X-Ray SDK adds to one webhook invocation
// in Lambda: two AWS call subsegments of the facade, each sent to a daemon
// on loopback when it closes (compare otelxray's BenchmarkInvocation): go
// test -run '^$' -bench Invocation ./internal/telemetry/xraytrace
func BenchmarkInvocation(b *testing.B) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	go func() {
		buf := make([]byte, 70000)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	be, err := New(WithDaemonAddress(conn.LocalAddr().String()))
	if err != nil {
		b.Fatal(err)
	}
	invoke := telemetry.WithInvokeHeader(telemetry.WithBackend(context.Background(), be),
		telemetry.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Parent: "53995c3f42cd8ad8", Sampled: true})
	for b.Loop() {
		ctx, inv := telemetry.StartInvocation(invoke, "WebhookFunction")
		for _, svc := range []string{"EventBridge", "SQS"} {
			_, s := telemetry.StartAWSCall(ctx, svc, "Put", "us-east-1")
			s.SetHTTPStatus(200)
			s.End(nil)
		}
		inv.SetHTTPStatus(200)
		inv.End(nil)
	}
}
