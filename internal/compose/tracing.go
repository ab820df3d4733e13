package compose

import (
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/telemetry/otelxray"
	"github.com/linegate/linegate/internal/telemetry/xraytrace"
)

// Tracer is a tracing backend as a function's start-up uses it: the seam's
// Backend, and the instrumentation of the function's AWS SDK clients.
type Tracer interface {
	telemetry.Backend
	InstrumentAWS(cfg *aws.Config)
}

// TracingOptions say where a function's spans go and what they name.
type TracingOptions struct {
	// Daemon is the X-Ray daemon's address (AWS_XRAY_DAEMON_ADDRESS in
	// Lambda) or a local collector's; "" is the backend's default. The X-Ray
	// SDK reads the variable itself in Lambda.
	Daemon string
	// Service, Region and Version name the function in OpenTelemetry's
	// resource (X-Ray's node): AWS_LAMBDA_FUNCTION_NAME, AWS_REGION,
	// AWS_LAMBDA_FUNCTION_VERSION in Lambda.
	Service, Region, Version string
	// Local is set by runtimes that run invocations themselves (`linegate
	// local`): each invocation is a root span, and every trace is sampled.
	Local bool
	// Logger receives what the backend cannot send.
	Logger *slog.Logger
}

// NewTracing builds the backend b names (config.Tracing's Backend). Under the
// X-Ray SDK in Lambda it leaves the SDK's process-wide configuration to the
// SDK, as before; everything else is carried by the returned Tracer.
func NewTracing(b config.Backend, o TracingOptions) (Tracer, error) {
	switch b {
	case config.TracingOTel:
		opts := []otelxray.Option{otelxray.WithDaemonAddress(o.Daemon), otelxray.WithService(o.Service, o.Region, o.Version),
			otelxray.WithLogger(o.Logger)}
		if o.Local {
			opts = append(opts, otelxray.WithSampleAll())
		}
		t, err := otelxray.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing (otel): %w", err)
		}
		return t, nil
	case config.TracingXRay, "":
		var opts []xraytrace.Option
		if o.Local {
			opts = append(opts, xraytrace.WithDaemonAddress(o.Daemon), xraytrace.WithSampleAll(), xraytrace.WithInvocationSegments())
		}
		t, err := xraytrace.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing (xray): %w", err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("tracing: unknown backend %q (xray or otel)", b)
}
