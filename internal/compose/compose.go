// Package compose is what every linegate function shares at start-up: the
// observability of one process (JSON logs, EMF metrics and traces flushed
// per invocation, the tracing backend TRACING names: the X-Ray SDK or
// OpenTelemetry), the SSM client secrets are fetched with, and Main, the
// whole of a function's main.go. Each function's own wiring lives in a
// subpackage (webhookfn, workerfn, notifierfn) so that each Lambda binary
// links only the clients it calls: the webhook links no DynamoDB, SNS or LINE
// client. `linegate local` builds the same cores through the same
// subpackages, so what runs on a laptop is what runs in AWS.
package compose

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/keepalive"
	"github.com/linegate/linegate/internal/secrets"
	"github.com/linegate/linegate/internal/telemetry"
)

// transport is the process's keep-alive pool for LINE calls, shared by
// every record (keepalive.Conns idle connections per host).
var transport = sync.OnceValue(func() *http.Transport { return keepalive.Transport(keepalive.Conns) })

// httpClient is a traced client over the process's pool.
func httpClient() *http.Client { return telemetry.HTTPClient(&http.Client{Transport: transport()}) }

// ParameterGetter is the one SSM call secrets are fetched with
// (*secrets.SSM in Lambda).
type ParameterGetter interface {
	GetParameters(ctx context.Context, names []string) (values map[string]string, invalid []string, err error)
}

// Common is what every function's core gets besides its own ports.
type Common struct {
	Logger  *slog.Logger
	Metrics telemetry.Recorder
	// SSM resolves secrets named by parameter; nil when every secret is a
	// plain (local) value.
	SSM ParameterGetter
	// HTTPClient carries LINE calls (traced by telemetry.HTTPClient); nil
	// means a traced default client.
	HTTPClient *http.Client
}

// WithDefaults fills what was left unset: slog's default logger, metrics
// discarded, a traced HTTP client over the process's keep-alive pool.
func (c Common) WithDefaults() Common {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = telemetry.Discard
	}
	if c.HTTPClient == nil {
		c.HTTPClient = httpClient()
	}
	return c
}

// Observability is the telemetry of one function: Common's logger and
// metrics, plus the EMF metrics to flush after each invocation.
type Observability struct {
	Common
	EMF *telemetry.Metrics
}

// NewObservability builds a function's observability: logs through log,
// EMF metrics written to metricsOut under namespace with the Function
// dimension, and a traced HTTP client over the process's keep-alive pool.
// While the logs are JSON (telemetry.FoldingLogs), a record's log line may
// carry its invocation's metrics (telemetry.Metrics.Fold): log must then
// write JSON to the stream CloudWatch reads metricsOut from, as Lambda's
// stdout and linegate local's log output are.
func NewObservability(log *slog.Logger, metricsOut io.Writer, namespace, function string) Observability {
	m := telemetry.NewMetrics(metricsOut, namespace, telemetry.WithFolding(telemetry.FoldingLogs()))
	if function != "" {
		m.SetDimension("Function", function)
	}
	return Observability{
		Common: Common{Logger: log, Metrics: m, HTTPClient: httpClient()},
		EMF:    m,
	}
}

// Flushing wraps a Lambda handler so each invocation is traced and its
// telemetry leaves before the sandbox can freeze: the invocation's span
// (telemetry.StartInvocation, under Lambda's own segment; the SDK's facade
// under X-Ray) records an API Gateway answer's status, the handler's error
// or panic, and flushes the tracing backend when it ends; the metrics are
// written when the handler returns. A panic is recorded and re-raised.
func Flushing[In, Out any](m *telemetry.Metrics, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (out Out, err error) {
		ctx, span := telemetry.StartInvocation(ctx, lambdacontext.FunctionName)
		defer func() {
			if v := recover(); v != nil {
				span.Panic(v, debug.Stack())
				_ = m.Flush()
				panic(v)
			}
			if r, ok := any(out).(events.APIGatewayProxyResponse); ok {
				span.SetHTTPStatus(r.StatusCode)
			}
			span.End(err)
			_ = m.Flush()
		}()
		return h(ctx, in)
	}
}

// Config is a function's configuration as Main needs it.
type Config interface {
	// MetricsNamespace is the CloudWatch namespace of the function's metrics.
	MetricsNamespace() string
}

// Env is what Main hands a function's build step.
type Env struct {
	Observability
	// AWS is the SDK configuration from the Lambda environment, with its
	// clients instrumented by the tracing backend.
	AWS aws.Config
	// Function is AWS_LAMBDA_FUNCTION_NAME ("" outside Lambda).
	Function string
}

// Main is the whole of a function's main: Build, then lambda.Start with
// the handler. Every problem before the start is logged as one JSON line
// naming the function, and the process exits 1, so a misconfigured
// function fails its INIT loudly instead of answering with half a
// configuration.
func Main[C Config, H any](name string, load func(config.Getenv) (C, error), build func(ctx context.Context, cfg C, env Env) (H, error)) {
	h, err := Build(context.Background(), name, load, build)
	if err != nil {
		telemetry.NewLambdaLogger().Error(name+" cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}

// Build is a function's start-up without the start: it reads the
// configuration with load, loads the AWS configuration, sets up logs
// (following the function's LoggingConfig), EMF metrics and the tracing
// backend TRACING names (the process default of the seam, instrumenting
// the AWS clients), and calls build for the handler. Every problem is in
// the error, prefixed with the function's name.
func Build[C Config, H any](ctx context.Context, name string, load func(config.Getenv) (C, error), build func(ctx context.Context, cfg C, env Env) (H, error)) (H, error) {
	var zero H
	cfg, cfgErr := load(os.Getenv)
	tracing, tracingErr := config.LoadTracing(os.Getenv)
	// The SDK clients share one pool per process too, sized like LINE's.
	awsCfg, awsErr := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithHTTPClient(keepalive.AWSHTTPClient(keepalive.Conns)))
	if err := errors.Join(cfgErr, awsErr, tracingErr); err != nil {
		return zero, err
	}
	env := Env{AWS: awsCfg, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	env.Observability = NewObservability(telemetry.NewLambdaLogger(), os.Stdout, cfg.MetricsNamespace(), env.Function)
	tracer, err := NewTracing(tracing.Backend, TracingOptions{Daemon: tracing.DaemonAddress, Service: env.Function,
		Region: env.AWS.Region, Version: lambdacontext.FunctionVersion, Logger: env.Logger})
	if err != nil {
		return zero, err
	}
	telemetry.SetDefault(tracer)
	tracer.InstrumentAWS(&env.AWS)
	env.SSM = secrets.NewSSM(env.AWS)
	return build(ctx, cfg, env)
}
