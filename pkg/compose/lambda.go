package compose

import (
	"context"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/pkg/telemetry"
	"github.com/linegate/linegate/pkg/worker"
)

// Observability is the telemetry of one process: JSON logs, EMF metrics
// flushed once per invocation, and X-Ray through pkg/telemetry.
type Observability struct {
	Common
	Metrics *telemetry.Metrics
}

// NewObservability sets up logs (through aws-lambda-go's lambdacontext
// handler, following the function's LoggingConfig) and EMF metrics on w
// (stdout in Lambda, where CloudWatch Logs picks up EMF lines), instruments
// awsCfg's clients for X-Ray, and fills Common's tracing hooks. function
// becomes the metrics' Function dimension.
func NewObservability(w io.Writer, namespace, function string, awsCfg *aws.Config) Observability {
	log := telemetry.NewLambdaLogger()
	m := telemetry.NewMetrics(w, namespace)
	if function != "" {
		m.SetDimension("Function", function)
	}
	if awsCfg != nil {
		telemetry.InstrumentAWS(awsCfg)
	}
	return Observability{
		Common: Common{
			Logger:      log,
			Metrics:     m,
			TraceHeader: telemetry.TraceHeader,
			StartSpan:   RecordSpan,
			TraceID:     telemetry.TraceID,
			EventID:     telemetry.WithEventID,
			HTTPClient:  telemetry.HTTPClient(&http.Client{}),
		},
		Metrics: m,
	}
}

// RecordSpan traces one worker record as a subsegment of the invocation,
// linked (not merged) to the webhook's trace named by the record's
// AWSTraceHeader.
func RecordSpan(ctx context.Context, name, upstream string) (context.Context, worker.Span) {
	ctx, s := telemetry.StartSubsegment(ctx, name)
	if h, err := telemetry.ParseTraceHeader(upstream); err == nil {
		s.Link(h)
	}
	return ctx, s
}

// Flushing wraps a Lambda handler so the metrics of each invocation are
// written when it returns.
func Flushing[In, Out any](m *telemetry.Metrics, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer func() { _ = m.Flush() }()
		return h(ctx, in)
	}
}

// FunctionName is the Lambda function's name, or "" outside Lambda.
func FunctionName() string { return os.Getenv("AWS_LAMBDA_FUNCTION_NAME") }
