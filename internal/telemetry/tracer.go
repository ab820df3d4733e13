package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/aws/aws-xray-sdk-go/v2/strategy/ctxmissing"
	"github.com/aws/aws-xray-sdk-go/v2/strategy/sampling"
	"github.com/aws/aws-xray-sdk-go/v2/xray"
	"github.com/aws/aws-xray-sdk-go/v2/xraylog"
)

func init() {
	// Safe defaults before any Configure call: a missing segment is silently
	// ignored (the SDK's default would log "failed to begin subsegment") and
	// the SDK's own chatter goes to stderr as JSON at WARN and above instead
	// of plain text on stdout, where it would corrupt JSON log lines.
	_ = xray.Configure(xray.Config{ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy()})
	xray.SetLogger(sdkLogger{log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), min: xraylog.LogLevelWarn})
}

// ErrProcessWideOption marks an option NewTracer refuses because what it sets
// cannot be scoped to a context (the SDK's logger is one per process): pass
// it to Configure instead.
var ErrProcessWideOption = errors.New("option is process-wide")

// ConfigOption tunes Configure and NewTracer.
type ConfigOption func(*traceConfig)

type traceConfig struct {
	daemonAddr     string
	sampleAll      bool
	serviceVersion string
	sdkLog         *slog.Logger
}

// WithDaemonAddress makes segments go to the X-Ray daemon (or the local
// collector) at addr ("127.0.0.1:2000"). An explicit address wins over
// AWS_XRAY_DAEMON_ADDRESS; without this option the SDK's rule applies (the
// environment variable, else 127.0.0.1:2000). Finished subsegments are then
// streamed one by one, so a large batch never makes a segment document over
// UDP's 64 KB.
func WithDaemonAddress(addr string) ConfigOption {
	return func(c *traceConfig) { c.daemonAddr = addr }
}

// WithSampleAll samples every segment started by StartSegment without a
// sampled parent. Use it for local runs: the default sampling keeps only
// 1 trace/s + 5%.
func WithSampleAll() ConfigOption {
	return func(c *traceConfig) { c.sampleAll = true }
}

// WithServiceVersion records v as the service version of every segment.
func WithServiceVersion(v string) ConfigOption {
	return func(c *traceConfig) { c.serviceVersion = v }
}

// WithSDKLogger routes the X-Ray SDK's own WARN and ERROR messages to l
// (default: JSON on stderr). The SDK has one logger per process, so only
// Configure takes this option; NewTracer refuses it with
// ErrProcessWideOption.
func WithSDKLogger(l *slog.Logger) ConfigOption {
	return func(c *traceConfig) { c.sdkLog = l }
}

// sdkConfig builds the SDK configuration the options describe. Fields left
// nil fall back to the process-wide configuration.
func (c traceConfig) sdkConfig() (xray.Config, error) {
	cfg := xray.Config{
		ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy(),
		ServiceVersion:         c.serviceVersion,
	}
	if c.daemonAddr != "" {
		addr, err := net.ResolveUDPAddr("udp", c.daemonAddr)
		if err != nil {
			return xray.Config{}, fmt.Errorf("telemetry: daemon address %q: %w", c.daemonAddr, err)
		}
		em, err := xray.NewDefaultEmitter(addr)
		if err != nil {
			return xray.Config{}, fmt.Errorf("telemetry: emitter for %s: %w", addr, err)
		}
		cfg.Emitter = pinnedEmitter{em}
		// A local batch of ten records with their DynamoDB and LINE calls
		// would otherwise be one segment document over UDP's 64 KB: stream
		// every finished subsegment on its own instead.
		stream, err := xray.NewDefaultStreamingStrategyWithMaxSubsegmentCount(1)
		if err != nil {
			return xray.Config{}, fmt.Errorf("telemetry: streaming strategy: %w", err)
		}
		cfg.StreamingStrategy = stream
	}
	if c.sampleAll {
		cfg.SamplingStrategy = sampleAll{}
	}
	return cfg, nil
}

// Configure sets where and how segments are emitted for the whole process:
// every segment started from a context without a Tracer's configuration. Call
// it once at start-up, before any segment exists, and only from a main that
// owns the process; libraries and `linegate local` use NewTracer. Without a
// call the SDK defaults apply (AWS_XRAY_DAEMON_ADDRESS or 127.0.0.1:2000),
// which is what Lambda needs. AWS_XRAY_CONTEXT_MISSING, when set, still
// overrides the silent missing-context strategy (the SDK's rule).
func Configure(opts ...ConfigOption) error {
	var c traceConfig
	for _, o := range opts {
		o(&c)
	}
	cfg, err := c.sdkConfig()
	if err != nil {
		return err
	}
	if err := xray.Configure(cfg); err != nil {
		return fmt.Errorf("telemetry: configure x-ray: %w", err)
	}
	if c.sdkLog != nil {
		xray.SetLogger(sdkLogger{log: c.sdkLog, min: xraylog.LogLevelWarn})
	}
	return nil
}

// Tracer is a tracing configuration carried by contexts instead of set for
// the process: segments started from a context that went through
// (*Tracer).Context go where the Tracer says, and their subsegments, AWS
// calls and HTTP calls follow them. Two Tracers (two local runtimes in one
// test binary) never see each other's segments, and the process-wide
// configuration stays as it was. A Tracer is immutable and safe for
// concurrent use.
type Tracer struct {
	cfg *xray.Config
}

// NewTracer returns a Tracer built from opts, with the same meaning as for
// Configure; options not given fall back to the process-wide configuration
// (so a Tracer without WithDaemonAddress sends where Configure or the
// environment says). It changes no process-wide state. WithSDKLogger is
// refused with an error wrapping ErrProcessWideOption.
func NewTracer(opts ...ConfigOption) (*Tracer, error) {
	var c traceConfig
	for _, o := range opts {
		o(&c)
	}
	if c.sdkLog != nil {
		return nil, fmt.Errorf("telemetry: NewTracer: WithSDKLogger: %w (pass it to Configure)", ErrProcessWideOption)
	}
	cfg, err := c.sdkConfig()
	if err != nil {
		return nil, err
	}
	// ContextWithConfig validates the configuration against the environment
	// (AWS_XRAY_DAEMON_ADDRESS, AWS_XRAY_CONTEXT_MISSING) once; Context then
	// only attaches the result.
	ctx, err := xray.ContextWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry: tracer configuration: %w", err)
	}
	return &Tracer{cfg: xray.GetRecorder(ctx)}, nil
}

// Context returns ctx carrying t's configuration: StartSegment called with it
// (or a context derived from it) emits where t says. A nil Tracer returns ctx
// unchanged, so segments follow the process-wide configuration.
func (t *Tracer) Context(ctx context.Context) context.Context {
	if t == nil || t.cfg == nil {
		return ctx
	}
	return context.WithValue(ctx, xray.RecorderContextKey{}, t.cfg)
}

// pinnedEmitter keeps an explicitly configured address: the SDK re-points
// emitters at AWS_XRAY_DAEMON_ADDRESS on every Configure and
// ContextWithConfig, which would send a local run's segments away from its
// collector.
type pinnedEmitter struct{ *xray.DefaultEmitter }

// RefreshEmitterWithAddress ignores the SDK's re-pointing (see pinnedEmitter).
func (pinnedEmitter) RefreshEmitterWithAddress(*net.UDPAddr) {}

// sampleAll is a sampling strategy that keeps every trace.
type sampleAll struct{}

// ShouldTrace samples every request.
func (sampleAll) ShouldTrace(*sampling.Request) *sampling.Decision {
	return &sampling.Decision{Sample: true}
}

// sdkLogger adapts slog to the SDK's logger interface.
type sdkLogger struct {
	log *slog.Logger
	min xraylog.LogLevel
}

// Log forwards WARN and ERROR messages to slog, dropping missing-context ones.
func (l sdkLogger) Log(level xraylog.LogLevel, msg fmt.Stringer) {
	if level < l.min {
		return
	}
	text := msg.String()
	if strings.Contains(text, "context missing") || strings.Contains(text, "cannot be found") {
		// A call without a trace is expected (tests, local runs, background
		// work); AWS_XRAY_CONTEXT_MISSING=LOG_ERROR (Lambda's setting) would
		// otherwise log it on every untraced AWS call.
		return
	}
	lvl := slog.LevelWarn
	if level >= xraylog.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "x-ray sdk: "+text)
}
