// Package compose builds each function's core from its configuration and the
// ports it talks to. The Lambda mains pass real AWS clients; `linegate local`
// passes the in-memory cloud. Both get the same wiring, so what runs locally
// is what runs in AWS.
package compose

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/alert"
	"github.com/linegate/linegate/pkg/app"
	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/eventbus"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/ingress"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/secrets"
	"github.com/linegate/linegate/pkg/worker"
)

// Recorder is the metrics sink every core accepts.
type Recorder interface {
	Count(name string, n float64)
	Duration(name string, d time.Duration)
}

type nopRecorder struct{}

func (nopRecorder) Count(string, float64)          {}
func (nopRecorder) Duration(string, time.Duration) {}

type eventPutter interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

type parameterGetter interface {
	GetParameters(ctx context.Context, in *ssm.GetParametersInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersOutput, error)
}

type topicPublisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Common holds what every function gets: logging, metrics, tracing, secrets.
type Common struct {
	Logger  *slog.Logger
	Metrics Recorder
	SSM     parameterGetter // nil when every secret is a plain local value
	// TraceHeader returns the trace header to propagate from ctx (webhook).
	TraceHeader func(ctx context.Context) string
	// StartSpan and TraceID trace each worker record.
	StartSpan worker.StartSpan
	TraceID   func(ctx context.Context) string
	// EventID puts a webhookEventId into ctx so every log line of a record
	// carries it.
	EventID func(ctx context.Context, id string) context.Context
	// HTTPClient is used for LINE calls (wrapped for tracing by the caller).
	HTTPClient *http.Client
}

func (c *Common) defaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = nopRecorder{}
	}
}

// Webhook builds the webhook core publishing to bus.
func Webhook(ctx context.Context, cfg config.Webhook, bus eventPutter, c Common, extra ...eventbus.Option) (*ingress.Handler, error) {
	c.defaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.Secret, cfg.PreviousSecret)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	opts := []eventbus.Option{eventbus.WithSource(cfg.Source), eventbus.WithDeadline(cfg.PublishDeadline),
		eventbus.WithLogger(c.Logger), eventbus.WithMetrics(c.Metrics)}
	pub := eventbus.NewPublisher(bus, cfg.BusName, append(opts, extra...)...)
	hopts := []ingress.Option{
		ingress.WithSecrets(vals...), ingress.WithMaxBodyBytes(cfg.MaxBodyBytes), ingress.WithBotUserID(cfg.BotUserID),
		ingress.WithLogger(c.Logger), ingress.WithMetrics(c.Metrics),
	}
	if c.TraceHeader != nil {
		hopts = append(hopts, ingress.WithTraceHeader(c.TraceHeader))
	}
	return ingress.New(pub, hopts...)
}

// WorkerDeps are the worker's ports.
type WorkerDeps struct {
	Store    idempotency.Store // DynamoDB in AWS, memory locally
	Ops      topicPublisher    // crash reports; nil disables them
	Router   *bot.Router       // nil: the example bot in pkg/app
	Observer func(worker.Result)
	Function string
	Region   string
	Options  []worker.Option // appended last (tests, local tweaks)
}

// Worker builds the SQS batch processor.
func Worker(ctx context.Context, cfg config.Worker, d WorkerDeps, c Common) (*worker.Processor, error) {
	c.defaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("worker secrets: %w", err)
	}
	token := vals[0]
	router := d.Router
	if router == nil {
		router = app.New(app.Config{Probes: cfg.Probes})
	}
	lineOpts := []lineapi.Option{lineapi.WithBaseURL(cfg.APIBaseURL), lineapi.WithLogger(c.Logger), lineapi.WithMetrics(c.Metrics)}
	if c.HTTPClient != nil {
		lineOpts = append(lineOpts, lineapi.WithHTTPClient(c.HTTPClient))
	}
	opts := []worker.Option{
		worker.WithMessenger(func() bot.Messenger { return lineapi.New(token, lineOpts...) }),
		worker.WithConcurrency(cfg.Concurrency),
		worker.WithFunctionTimeout(cfg.FunctionTimeout),
		worker.WithIdentity(d.Function, d.Region),
		worker.WithSecrets(token),
		worker.WithLogger(c.Logger),
		worker.WithMetrics(c.Metrics),
	}
	if d.Ops != nil && cfg.OpsTopicARN != "" {
		opts = append(opts, worker.WithCrashReports(d.Ops, cfg.OpsTopicARN))
	}
	if d.Observer != nil {
		opts = append(opts, worker.WithObserver(d.Observer))
	}
	if c.StartSpan != nil && c.TraceID != nil {
		opts = append(opts, worker.WithTracing(c.StartSpan, c.TraceID))
	}
	if c.EventID != nil {
		opts = append(opts, worker.WithEventContext(c.EventID))
	}
	return worker.New(router, d.Store, append(opts, d.Options...)...)
}

// Notifier builds the alert notifier: SNS records in, LINE pushes to the
// operators out.
func Notifier(ctx context.Context, cfg config.Notifier, region string, c Common) (*alert.Notifier, error) {
	c.defaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("notifier secrets: %w", err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("notifier time zone: %w", err)
	}
	lineOpts := []lineapi.Option{lineapi.WithBaseURL(cfg.APIBaseURL), lineapi.WithLogger(c.Logger), lineapi.WithMetrics(c.Metrics)}
	if c.HTTPClient != nil {
		lineOpts = append(lineOpts, lineapi.WithHTTPClient(c.HTTPClient))
	}
	opts := []alert.Option{alert.WithTimeZone(loc), alert.WithLogger(c.Logger), alert.WithMetrics(c.Metrics)}
	if region != "" {
		opts = append(opts, alert.WithRegion(region))
	}
	return alert.New(lineapi.New(vals[0], lineOpts...), cfg.Operators, opts...)
}
