// Package mem is an in-memory EventBridge, SQS and SNS that behaves like AWS
// for the calls linegate makes, so `linegate local` runs the whole pipeline
// in one Go process and tests run without an account or an emulator.
//
// A *Cloud has the aws-sdk-go-v2 clients' method signatures for the calls
// linegate makes, so it satisfies every narrow interface a consumer declares
// for the real EventBridge, SQS or SNS client, with the SDK's input, output
// and error types: errors are the SDK's smithy API errors with AWS's codes
// (for example *sqstypes.QueueDoesNotExist), wrapped in
// *smithy.OperationError as the SDK wraps them, so callers use errors.As
// exactly as against AWS. The package cloud/cloudtest pins these semantics
// and runs against both this package and moto_server.
//
// SQS's queue semantics (visibility, receive counts, redrive, moves) live in
// cloud/mem/queue behind a small driver interface; the SDK-shaped methods
// here are thin adapters over it, and every batch call's per-entry handling
// is written once.
//
// Time: timestamps come from the clock (WithClock); every duration the cloud
// waits (visibility timeouts, delays, retention, long polls, SNS-to-function
// retries, the purge cooldown) is divided by the time scale (WithTimeScale).
//
// Deliveries are synchronous: PutEvents returns after every matching target
// has the event; Publish returns after every SQS subscription has the
// notification (function subscriptions run asynchronously, like Lambda's
// asynchronous invocation).
package mem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
	"github.com/linegate/linegate/internal/telemetry"
)

// ErrClosed is returned (inside the operation error) by calls made after Close.
var ErrClosed = errors.New("mem: cloud is closed")

// Option configures a Cloud.
type Option func(*Cloud)

// WithClock sets the source of timestamps and of "now" for visibility and
// delay deadlines. Tests pass a fake clock and advance it instead of sleeping.
func WithClock(now func() time.Time) Option { return func(c *Cloud) { c.now = now } }

// WithTimeScale divides every duration the cloud waits by k (k > 0), so k=60
// makes a 30 s visibility timeout last 0.5 s. Attribute values and
// timestamps are unchanged: only the waiting is compressed.
func WithTimeScale(k float64) Option {
	return func(c *Cloud) {
		if k > 0 {
			c.scale = k
		}
	}
}

// WithAccount sets the AWS account ID used in ARNs, queue URLs and events.
func WithAccount(id string) Option { return func(c *Cloud) { c.account = id } }

// WithRegion sets the region used in ARNs, queue URLs and events.
func WithRegion(r string) Option { return func(c *Cloud) { c.region = r } }

// WithLogger sets the structured logger for delivery problems (dropped
// events, failed function invocations). Message bodies are never logged.
func WithLogger(l *slog.Logger) Option { return func(c *Cloud) { c.log = l } }

// WithMetrics sets the recorder that receives the cloud's counters
// under the names CloudWatch itself uses for the services it emulates
// (NumberOfMessagesSent, NumberOfMessagesReceived, NumberOfMessagesDeleted,
// NumberOfMessagesDeadLettered; PutEventsEntries, PutEventsFailedEntries,
// Invocations, InvocationsSentToDlq, FailedInvocations;
// NumberOfMessagesPublished, NumberOfNotificationsFailed).
func WithMetrics(r telemetry.Recorder) Option { return func(c *Cloud) { c.metrics = r } }

// WithInvokeFailure sets the on-failure destination of SubscribeFunc
// deliveries: it is called once a function has failed every attempt
// (1 + 2 retries, as AWS does for asynchronous Lambda invocations).
// Without it the event is dropped with a log line.
func WithInvokeFailure(fn func(topicArn string, ev events.SNSEvent, err error)) Option {
	return func(c *Cloud) { c.onInvokeFailure = fn }
}

// Defaults for account and region, the ones AWS's documentation uses.
const (
	DefaultAccount = "123456789012"
	DefaultRegion  = "us-east-1"
)

// Cloud is the in-memory cloud. Create it with New; it is safe for
// concurrent use. Call Close to stop background deliveries.
type Cloud struct {
	now             func() time.Time
	scale           float64
	account, region string
	log             *slog.Logger
	metrics         telemetry.Recorder
	onInvokeFailure func(topicArn string, ev events.SNSEvent, err error)

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced whenever a queue gains visible messages
	sqs       queueDriver
	queues    map[string]*sqsQueue
	moveTasks []sqstypes.ListMessageMoveTasksResultEntry
	buses     map[string]*bus
	topics    map[string]*topic
	failPut   func(ebtypes.PutEventsRequestEntry) (string, bool)
	closed    bool
	journal   Journal // set by Persist
	ticket    uint64  // the journal ticket of the call holding mu (0: nothing changed)

	ctx    context.Context // cancelled by Close; parent of background work
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns an empty cloud holding only the "default" event bus.
func New(opts ...Option) *Cloud {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cloud{
		now:     time.Now,
		scale:   1,
		account: DefaultAccount,
		region:  DefaultRegion,
		log:     slog.New(slog.DiscardHandler),
		metrics: telemetry.Discard,
		changed: make(chan struct{}),
		queues:  map[string]*sqsQueue{},
		buses:   map[string]*bus{},
		topics:  map[string]*topic{},
		ctx:     ctx,
		cancel:  cancel,
	}
	for _, o := range opts {
		o(c)
	}
	c.sqs = queue.New(c.now)
	c.buses["default"] = &bus{name: "default", arn: c.busArn("default"), rules: map[string]*rule{}}
	return c
}

// Close stops background work (function deliveries and their retries, long
// polls) and waits for it to end. Calls made after Close fail with ErrClosed.
func (c *Cloud) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.broadcastLocked()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// FailPutEvents installs fault injection for PutEvents: fn sees every entry
// that passed validation and, when it returns fail, that entry is rejected
// with code (for example "InternalFailure" or "ThrottlingException") instead
// of being delivered. Pass nil to remove it.
func (c *Cloud) FailPutEvents(fn func(entry ebtypes.PutEventsRequestEntry) (code string, fail bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failPut = fn
}

// scaled converts a duration of cloud time into the real time to wait.
func (c *Cloud) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}

// broadcastLocked wakes every long poll. c.mu must be held.
func (c *Cloud) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Cloud) busArn(name string) string {
	return fmt.Sprintf("arn:aws:events:%s:%s:event-bus/%s", c.region, c.account, name)
}

// locked runs fn under the cloud lock as operation op of service: after
// Close it fails with ErrClosed, and fn's error comes back wrapped as the SDK
// wraps a service's errors. Every SDK-shaped method runs its body through it
// (SQS's through onQueue, EventBridge's rule calls through onRule). With
// Persist, a call that changed a queue returns only once the change is on
// disk (waited for after the lock is released, so calls share commits).
func locked[O any](c *Cloud, service, op string, fn func() (*O, error)) (*O, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, opErr(service, op, ErrClosed)
	}
	c.ticket = 0
	out, err := fn()
	ticket := c.ticket
	c.mu.Unlock()
	if derr := c.durable(ticket); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return nil, opErr(service, op, err)
	}
	return out, nil
}

// opErr wraps err the way the SDK does, so messages and errors.As behave alike.
func opErr(service, op string, err error) error {
	return &smithy.OperationError{ServiceID: service, OperationName: op, Err: err}
}

// apiErr is an API error without a modeled type (AWS's generic codes).
func apiErr(code, format string, args ...any) error {
	return &smithy.GenericAPIError{Code: code, Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

// required mimics the SDK's client-side validation of a required member.
func required(input, field string) error {
	e := smithy.InvalidParamsError{Context: input}
	e.Add(smithy.NewErrParamRequired(field))
	return e
}

// marshal encodes v as AWS does: no HTML escaping of <, > and &.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
