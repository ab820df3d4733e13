// Package crash describes the crash report a worker publishes to the ops SNS
// topic when a bot handler panics, and scrubs secrets out of it before it
// leaves the process.
//
// The worker recovers the panic, fails that one record, builds a Report with
// New (which scrubs the panic value and the stack) and publishes
// Report.Marshal as the SNS message body with the message attribute
// AttributeKind = KindCrash. The notifier tells a crash report from a
// CloudWatch alarm by that attribute and reads the body back with Parse.
package crash

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// AttributeKind is the SNS message attribute (DataType String) that marks the
// kind of a linegate message on the ops topic. CloudWatch alarm notifications
// carry no such attribute.
const AttributeKind = "linegate-kind"

// KindCrash is the AttributeKind value of a crash report.
const KindCrash = "crash-report"

// Size caps applied by New. An SNS message may be at most 256 KiB; a report
// stays far below that so the publish never fails because a panic value or a
// stack was huge.
const (
	// MaxErrorBytes caps Report.Error.
	MaxErrorBytes = 4 << 10
	// MaxStackBytes caps Report.Stack (the first frames are the useful ones).
	MaxStackBytes = 32 << 10
)

// ErrInvalid marks a message that is not a usable crash report (not JSON, or
// a required field missing). Parse wraps it; callers skip such a message
// instead of retrying it.
var ErrInvalid = errors.New("invalid crash report")

// Report is one recovered panic. Error and Stack have been through Scrub
// before the report leaves the worker. Time and Error are required.
type Report struct {
	// Error is the panic value, formatted with %v and scrubbed.
	Error string `json:"error"`
	// Stack is the goroutine's stack (runtime/debug.Stack), scrubbed.
	Stack string `json:"stack"`
	// Function is the Lambda function (or local process) that crashed.
	Function string `json:"function,omitempty"`
	// EventType is the LINE event's type ("message", "postback", ...).
	EventType string `json:"eventType,omitempty"`
	// WebhookEventID is the LINE event's webhookEventId, to find it in logs.
	WebhookEventID string `json:"webhookEventId,omitempty"`
	// Channel is the named channel (official account) the event came
	// through; empty for the default channel.
	Channel string `json:"channel,omitempty"`
	// TraceID is the trace id of the crashed invocation (telemetry.TraceID:
	// X-Ray's form, whichever backend traced it).
	TraceID string `json:"traceId,omitempty"`
	// Region is the AWS region of the crashed function, for console links.
	Region string `json:"region,omitempty"`
	// Time is when the panic was recovered.
	Time time.Time `json:"time"`
	// ReceiveCount is the SQS ApproximateReceiveCount of the failed record.
	ReceiveCount int `json:"receiveCount,omitempty"`
}

// Option sets an optional field of a Report built by New.
type Option func(*options)

type options struct {
	report  Report
	secrets []string
	now     func() time.Time
}

// WithFunction records the name of the function that crashed.
func WithFunction(name string) Option { return func(o *options) { o.report.Function = name } }

// WithEvent records the LINE event being handled: its type and webhookEventId.
func WithEvent(eventType, webhookEventID string) Option {
	return func(o *options) {
		o.report.EventType = eventType
		o.report.WebhookEventID = webhookEventID
	}
}

// WithTraceID records the trace id of the crashed invocation, as
// telemetry.TraceID gives it.
func WithTraceID(id string) Option {
	return func(o *options) { o.report.TraceID = strings.TrimSpace(id) }
}

// WithChannel records the named channel the event came through ("" for
// the default channel: nothing recorded).
func WithChannel(ch string) Option { return func(o *options) { o.report.Channel = ch } }

// WithRegion records the AWS region of the crashed function.
func WithRegion(region string) Option { return func(o *options) { o.report.Region = region } }

// WithReceiveCount records how many times SQS has delivered the record.
func WithReceiveCount(n int) Option { return func(o *options) { o.report.ReceiveCount = n } }

// WithTime sets the report time instead of the current time (for tests and
// for callers that already hold the recovery time).
func WithTime(t time.Time) Option { return func(o *options) { o.now = func() time.Time { return t } } }

// WithSecrets names values that must never appear in the report (channel
// secret, channel access token, ...). Scrub replaces them in Error and Stack.
func WithSecrets(secrets ...string) Option {
	return func(o *options) { o.secrets = append(o.secrets, secrets...) }
}

// New builds the report of a recovered panic: recovered is the value returned
// by recover() and stack is runtime/debug.Stack() taken in the deferred
// function. Error and Stack are scrubbed (see Scrub) and capped at
// MaxErrorBytes and MaxStackBytes. Time is the current UTC time unless
// WithTime is given.
func New(recovered any, stack []byte, opts ...Option) Report {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	r := o.report
	msg := fmt.Sprintf("%v", recovered)
	if msg == "" {
		msg = fmt.Sprintf("panic(%T)", recovered)
	}
	r.Error = capBytes(Scrub(msg, o.secrets...), MaxErrorBytes)
	r.Stack = capBytes(Scrub(string(stack), o.secrets...), MaxStackBytes)
	r.Time = o.now().UTC()
	return r
}

// Marshal encodes the report as the SNS message body.
func (r Report) Marshal() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("crash: marshal report: %w", err)
	}
	return b, nil
}

// Parse decodes an SNS message body written by Marshal. It fails, wrapping
// ErrInvalid, when the body is not a JSON object or Error or Time is missing.
func Parse(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("crash: parse report: %w: %v", ErrInvalid, err)
	}
	var missing []string
	if strings.TrimSpace(r.Error) == "" {
		missing = append(missing, "error")
	}
	if r.Time.IsZero() {
		missing = append(missing, "time")
	}
	if len(missing) > 0 {
		return Report{}, fmt.Errorf("crash: parse report: %w: missing %s", ErrInvalid, strings.Join(missing, ", "))
	}
	return r, nil
}

// capBytes cuts s to at most n bytes on a rune boundary, marking the cut.
func capBytes(s string, n int) string {
	const mark = "\n…[truncated]"
	if len(s) <= n {
		return s
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
