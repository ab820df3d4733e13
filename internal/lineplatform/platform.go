// Package lineplatform plays the LINE platform's side of a webhook, locally:
// it builds webhook events in LINE's exact shape, signs request bodies,
// delivers them to a webhook URL with LINE's timeout, redelivers failed
// requests as LINE does when redelivery is on, and records every attempt.
//
// linegate local, the bench and the end-to-end tests use it to drive the
// webhook exactly as production traffic would.
package lineplatform

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/telemetry"
)

// Defaults of a Platform.
const (
	// DefaultTimeout is how long LINE waits for a 2xx before it counts a
	// webhook request as failed.
	DefaultTimeout = 2 * time.Second
	// DefaultDestination is the bot user ID bodies are addressed to unless
	// WithDestination says otherwise.
	DefaultDestination = "U00000000000000000000000000000000"
	// UserAgent is the User-Agent LINE's webhook requests carry.
	UserAgent = "LineBotWebhook/2.0"
)

// ErrNotDelivered is returned by Deliver when no attempt got a 2xx in time.
// The Delivery returned with it records every attempt.
var ErrNotDelivered = errors.New("lineplatform: webhook not delivered")

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	// Status is the HTTP status, or 0 when no response came back in time.
	Status int
	// Latency is the wall time until the response headers (or the failure).
	Latency time.Duration
	// Err says why the attempt failed; empty for a 2xx.
	Err string
	// Redelivery reports whether the body had isRedelivery true.
	Redelivery bool
	// Timeout reports whether the attempt failed by exceeding the timeout.
	Timeout bool
}

// Delivery is the outcome of one Deliver call.
type Delivery struct {
	// Attempts holds every request made, the first one included.
	Attempts []Attempt
	// Delivered reports whether an attempt got a 2xx in time.
	Delivered bool
	// WebhookEventIDs are the events' webhookEventIds, in body order ("" for
	// an event without one); redeliveries keep them.
	WebhookEventIDs []string
}

// Stats summarises every delivery the platform made.
type Stats struct {
	Deliveries   int // Deliver calls recorded
	Delivered    int // deliveries that got a 2xx
	Attempts     int // HTTP requests made
	Failures     int // attempts without a 2xx in time (timeouts included)
	Timeouts     int // attempts that exceeded the timeout
	Redeliveries int // attempts that were redeliveries
}

// Platform is a local LINE platform for one webhook URL and channel secret.
// It is safe for concurrent use.
type Platform struct {
	url          string
	secret       []byte
	client       *http.Client
	timeout      time.Duration
	redeliveries int
	interval     time.Duration
	destination  string
	now          func() time.Time
	sleep        func(context.Context, time.Duration) error
	onReplyToken func(token string, issuedAt time.Time)
	metrics      telemetry.Recorder
	entropySrc   io.Reader
	entropy      *entropy

	mu         sync.Mutex
	deliveries []Delivery
}

// Option configures a Platform.
type Option func(*Platform)

// WithHTTPClient sets the client requests go through (default: a plain
// client; the per-attempt timeout comes from WithTimeout).
func WithHTTPClient(c *http.Client) Option {
	return func(p *Platform) {
		if c != nil {
			p.client = c
		}
	}
}

// WithTimeout sets how long an attempt may take before it counts as failed
// (default DefaultTimeout, LINE's).
func WithTimeout(d time.Duration) Option {
	return func(p *Platform) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// WithRedelivery turns LINE's webhook redelivery on: a failed request is
// sent again after interval, with every event marked isRedelivery, up to
// count more times. The default, count 0, is LINE's default: off.
func WithRedelivery(count int, interval time.Duration) Option {
	return func(p *Platform) {
		p.redeliveries = max(count, 0)
		p.interval = max(interval, 0)
	}
}

// WithDestination sets the bot user ID bodies are addressed to (default
// DefaultDestination).
func WithDestination(botUserID string) Option {
	return func(p *Platform) { p.destination = botUserID }
}

// WithClock sets the clock event timestamps and ULIDs are taken from
// (default time.Now). Latencies are always measured on the wall clock.
func WithClock(now func() time.Time) Option {
	return func(p *Platform) {
		if now != nil {
			p.now = now
		}
	}
}

// WithReplyTokenHook registers a function called with every reply token the
// builders mint and the time it was issued, so a local Messaging API mock
// can accept exactly those tokens (and expire them like LINE, after a
// minute). It is called synchronously from the builder.
func WithReplyTokenHook(hook func(token string, issuedAt time.Time)) Option {
	return func(p *Platform) { p.onReplyToken = hook }
}

// WithEntropy sets the random source of event IDs, reply tokens, message IDs
// and quote tokens (default crypto/rand). With a deterministic source and
// clock the builders' output is reproducible, for golden tests.
func WithEntropy(r io.Reader) Option {
	return func(p *Platform) {
		if r != nil {
			p.entropySrc = r
		}
	}
}

// WithSleeper replaces the wait between redeliveries (default: a timer that
// honours ctx), so tests need not sleep for real.
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(p *Platform) {
		if sleep != nil {
			p.sleep = sleep
		}
	}
}

// WithMetrics sends counters (lineplatform.attempt, .failure, .timeout,
// .redelivery) and attempt latencies (lineplatform.latency) to r.
func WithMetrics(r telemetry.Recorder) Option {
	return func(p *Platform) {
		if r != nil {
			p.metrics = r
		}
	}
}

// New returns a platform that delivers to webhookURL, signing with secret.
func New(webhookURL string, secret []byte, opts ...Option) *Platform {
	p := &Platform{
		url:         webhookURL,
		secret:      bytes.Clone(secret),
		client:      &http.Client{},
		timeout:     DefaultTimeout,
		destination: DefaultDestination,
		now:         time.Now,
		sleep:       backoff.Sleep,
		metrics:     telemetry.Discard,
		entropySrc:  rand.Reader,
	}
	for _, o := range opts {
		o(p)
	}
	p.entropy = newEntropy(p.entropySrc)
	return p
}

// Destination returns the bot user ID bodies are addressed to.
func (p *Platform) Destination() string { return p.destination }

// Deliver sends the events in one signed webhook request, as LINE does, and
// records the outcome. A non-2xx or no response within the timeout is a
// failed attempt; with redelivery on, the request is sent again after the
// interval with every event's deliveryContext.isRedelivery set to true,
// until an attempt succeeds or the redeliveries are used up.
//
// The error is nil when an attempt got a 2xx; it wraps ErrNotDelivered when
// none did (or when an event is not a JSON object that could be marked for
// redelivery), and the context's error when ctx ended first. The Delivery is
// returned (and recorded) in every case.
func (p *Platform) Deliver(ctx context.Context, events ...json.RawMessage) (Delivery, error) {
	d := Delivery{WebhookEventIDs: eventIDs(events)}
	defer func() { p.record(d) }()

	body := Body(p.destination, events...)
	for n := 0; ; n++ {
		redelivery := n > 0
		if redelivery {
			if err := p.sleep(ctx, p.interval); err != nil {
				return d, fmt.Errorf("lineplatform: wait to redeliver: %w", err)
			}
			if n == 1 {
				marked, err := markAll(events)
				if err != nil {
					return d, fmt.Errorf("%w: cannot mark events for redelivery: %w", ErrNotDelivered, err)
				}
				body = Body(p.destination, marked...)
			}
		}
		a := p.attempt(ctx, body, redelivery)
		d.Attempts = append(d.Attempts, a)
		if a.Err == "" {
			d.Delivered = true
			return d, nil
		}
		if err := ctx.Err(); err != nil {
			return d, fmt.Errorf("lineplatform: deliver: %w", err)
		}
		if n >= p.redeliveries {
			return d, fmt.Errorf("%w after %d attempt(s): %s", ErrNotDelivered, len(d.Attempts), a.Err)
		}
	}
}

// attempt makes one signed POST and classifies the outcome.
func (p *Platform) attempt(ctx context.Context, body []byte, redelivery bool) (a Attempt) {
	a.Redelivery = redelivery
	p.metrics.Count("WebhookAttempts", 1)
	if redelivery {
		p.metrics.Count("WebhookRedeliveries", 1)
	}
	actx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		if a.Latency == 0 {
			a.Latency = time.Since(start)
		}
		p.metrics.Duration("WebhookLatency", a.Latency)
	}()

	req, err := http.NewRequestWithContext(actx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		a.Err = fmt.Sprintf("build request: %v", err)
		p.metrics.Count("WebhookFailures", 1)
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(signature.Header, signature.Sign(p.secret, body))

	resp, err := p.client.Do(req)
	a.Latency = time.Since(start)
	if err != nil {
		p.metrics.Count("WebhookFailures", 1)
		if errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			a.Timeout = true
			a.Err = fmt.Sprintf("timeout: no response within %s", p.timeout)
			p.metrics.Count("WebhookTimeouts", 1)
			return a
		}
		a.Err = fmt.Sprintf("request failed: %v", err)
		return a
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	a.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Err = fmt.Sprintf("status %d", resp.StatusCode)
		p.metrics.Count("WebhookFailures", 1)
	}
	return a
}

func (p *Platform) record(d Delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deliveries = append(p.deliveries, d)
}

// Deliveries returns a copy of every delivery recorded so far, oldest first.
func (p *Platform) Deliveries() []Delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Delivery, len(p.deliveries))
	for i, d := range p.deliveries {
		out[i] = Delivery{
			Attempts:        append([]Attempt(nil), d.Attempts...),
			Delivered:       d.Delivered,
			WebhookEventIDs: append([]string(nil), d.WebhookEventIDs...),
		}
	}
	return out
}

// Stats summarises every delivery recorded so far.
func (p *Platform) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Stats
	for _, d := range p.deliveries {
		s.Deliveries++
		if d.Delivered {
			s.Delivered++
		}
		for _, a := range d.Attempts {
			s.Attempts++
			if a.Err != "" {
				s.Failures++
			}
			if a.Timeout {
				s.Timeouts++
			}
			if a.Redelivery {
				s.Redeliveries++
			}
		}
	}
	return s
}

func markAll(events []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(events))
	for i, e := range events {
		m, err := MarkRedelivery(e)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}

// eventIDs reads each event's webhookEventId; "" for an event without one
// (or one that is not JSON).
func eventIDs(events []json.RawMessage) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		var h struct {
			WebhookEventID string `json:"webhookEventId"`
		}
		if json.Unmarshal(e, &h) == nil {
			ids[i] = h.WebhookEventID
		}
	}
	return ids
}
