package lineapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/keepalive"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
)

const (
	token   = "test-channel-token"
	user    = "U0123456789abcdef0123456789abcdef"
	eventID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
)

// env is a linemock behind an httptest.Server and a Client wired to it with a
// fake clock and a sleep that only advances that clock.
type env struct {
	mock    *linemock.Server
	srv     *httptest.Server
	clk     *testclock.Clock
	metrics *testmetrics.Recorder
	logs    *bytes.Buffer

	mu     sync.Mutex
	sleeps []time.Duration
}

func newEnv(t *testing.T, mockOpts ...linemock.Option) *env {
	t.Helper()
	e := &env{
		clk:     testclock.New(time.Now()),
		metrics: &testmetrics.Recorder{},
		logs:    &bytes.Buffer{},
	}
	e.mock = linemock.New(append([]linemock.Option{linemock.WithClock(e.clk.Now)}, mockOpts...)...)
	e.srv = httptest.NewServer(e.mock)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) client(opts ...Option) *Client {
	base := []Option{
		WithBaseURL(e.srv.URL),
		WithClock(e.clk.Now),
		WithSleep(func(ctx context.Context, d time.Duration) error {
			e.mu.Lock()
			e.sleeps = append(e.sleeps, d)
			e.mu.Unlock()
			e.clk.Advance(d)
			return ctx.Err()
		}),
		WithMetrics(e.metrics),
		WithLogger(slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}
	return New(token, append(base, opts...)...)
}

func (e *env) slept() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.sleeps...)
}

func (e *env) calls(path string, status int) int {
	return e.mock.Calls()[linemock.Call{Path: path, Status: status}]
}

func msg(s string) messaging_api.MessageInterface { return messaging_api.TextMessage{Text: s} }

func TestSendFreshTokenReplies(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyTokenTo("reply-1", user, e.clk.Now())
	e.clk.Advance(5 * time.Second)
	via, err := e.client().Send(context.Background(), Target{
		ReplyToken: "reply-1", EventTime: e.clk.Now().Add(-5 * time.Second), To: user, WebhookEventID: eventID,
	}, msg("hello"))
	if err != nil || via != ViaReply {
		t.Fatalf("Send = %q, %v; want reply, nil", via, err)
	}
	recs := e.mock.Messages()
	if len(recs) != 1 || recs[0].Via != linemock.ViaReply || recs[0].ReplyToken != "reply-1" {
		t.Fatalf("records = %+v, want one reply", recs)
	}
	if string(recs[0].Messages[0]) != `{"type":"text","text":"hello"}` {
		t.Errorf("message sent as %s", recs[0].Messages[0])
	}
	if e.metrics.Total(MetricReplies) != 1 || e.metrics.Total(MetricPushes) != 0 {
		t.Errorf("metrics = %v", e.metrics.Counts())
	}
}

func TestSendExpiredTokenPushesWithDerivedKey(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-old", e.clk.Now().Add(-2*time.Minute))
	via, err := e.client().Send(context.Background(), Target{
		ReplyToken: "reply-old", EventTime: e.clk.Now().Add(-2 * time.Minute), To: user,
		WebhookEventID: eventID, Index: 1,
	}, msg("late answer"))
	if err != nil || via != ViaPush {
		t.Fatalf("Send = %q, %v; want push, nil", via, err)
	}
	recs := e.mock.Messages()
	if len(recs) != 1 || recs[0].Via != linemock.ViaPush || recs[0].To != user {
		t.Fatalf("records = %+v, want one push to %s", recs, user)
	}
	if want := RetryKey(eventID, 1); recs[0].RetryKey != want {
		t.Errorf("retry key = %q, want %q", recs[0].RetryKey, want)
	}
	if n := e.calls(linemock.PathReply, 400) + e.calls(linemock.PathReply, 200); n != 0 {
		t.Errorf("a stale token was still tried %d time(s)", n)
	}
	if e.metrics.Total(MetricReplyFallbacks) != 1 {
		t.Errorf("fallbacks = %v", e.metrics.Total(MetricReplyFallbacks))
	}
}

func TestSendZeroEventTimePushes(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-1", e.clk.Now())
	via, err := e.client().Send(context.Background(), Target{ReplyToken: "reply-1", To: user, WebhookEventID: eventID}, msg("x"))
	if err != nil || via != ViaPush {
		t.Fatalf("Send = %q, %v; want push (unknown event time is not fresh)", via, err)
	}
}

func TestSendUsedTokenFallsBackToPush(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-1", e.clk.Now())
	c := e.client()
	if err := c.Reply(context.Background(), "reply-1", msg("first")); err != nil {
		t.Fatal(err)
	}
	err := c.Reply(context.Background(), "reply-1", msg("again"))
	if !errors.Is(err, ErrInvalidReplyToken) {
		t.Fatalf("Reply with a used token = %v, want ErrInvalidReplyToken", err)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.RequestID == "" {
		t.Fatalf("error %v is not a 400 *APIError with a request id", err)
	}

	via, err := c.Send(context.Background(), Target{
		ReplyToken: "reply-1", EventTime: e.clk.Now(), To: user, WebhookEventID: eventID,
	}, msg("second"))
	if err != nil || via != ViaPush {
		t.Fatalf("Send = %q, %v; want push fallback", via, err)
	}
	recs := e.mock.Messages()
	if len(recs) != 2 || recs[1].Via != linemock.ViaPush || recs[1].RetryKey != RetryKey(eventID, 0) {
		t.Fatalf("records = %+v", recs)
	}
	if e.calls(linemock.PathReply, 400) != 2 {
		t.Errorf("invalid token retried: %v", e.mock.Calls())
	}
	if e.metrics.Total(MetricReplyFallbacks) != 1 {
		t.Errorf("fallbacks = %v", e.metrics.Total(MetricReplyFallbacks))
	}
	// Only the direct Reply that returned an error counts; the recovered
	// fallback inside Send does not.
	if e.metrics.Total(MetricErrors) != 1 {
		t.Errorf("errors = %v, want 1", e.metrics.Total(MetricErrors))
	}
}

func TestPushRepeatIsSuccess(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	key := RetryKey(eventID, 0)
	for i := range 2 {
		if err := c.Push(context.Background(), user, key, msg("once")); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if n := len(e.mock.Messages()); n != 1 {
		t.Fatalf("records = %d, want exactly 1", n)
	}
	if e.calls(linemock.PathPush, 409) != 1 {
		t.Errorf("calls = %v, want one 409", e.mock.Calls())
	}
	if e.metrics.Total(MetricDuplicatePushes) != 1 || e.metrics.Total(MetricPushes) != 1 || e.metrics.Total(MetricErrors) != 0 {
		t.Errorf("metrics = %v", e.metrics.Counts())
	}
}

func TestPushLostResponseRetriedOnce(t *testing.T) {
	e := newEnv(t)
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 500, Accept: true})
	if err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), msg("once")); err != nil {
		t.Fatalf("Push = %v, want nil (409 after a lost 200)", err)
	}
	if n := len(e.mock.Messages()); n != 1 {
		t.Fatalf("records = %d, want 1", n)
	}
	if e.calls(linemock.PathPush, 500) != 1 || e.calls(linemock.PathPush, 409) != 1 || len(e.slept()) != 1 {
		t.Errorf("calls = %v sleeps = %v", e.mock.Calls(), e.slept())
	}
}

func TestPushWithoutKeyNotRetriedOnAmbiguousFailure(t *testing.T) {
	e := newEnv(t)
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 500, Times: 3})
	err := e.client().Push(context.Background(), user, "", msg("x"))
	if err == nil {
		t.Fatal("Push = nil, want the 500")
	}
	if n := e.calls(linemock.PathPush, 500); n != 1 {
		t.Errorf("500 without retry key retried: %d calls", n)
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	t.Run("Retry-After honoured", func(t *testing.T) {
		e := newEnv(t)
		e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 429, RetryAfter: time.Second})
		if err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), msg("x")); err != nil {
			t.Fatal(err)
		}
		if got := e.slept(); len(got) != 1 || got[0] != time.Second {
			t.Errorf("sleeps = %v, want [1s]", got)
		}
		if len(e.mock.Messages()) != 1 || e.metrics.Total(MetricRateLimited) != 1 {
			t.Errorf("records %d, rate limited %v", len(e.mock.Messages()), e.metrics.Total(MetricRateLimited))
		}
	})
	t.Run("backoff without Retry-After", func(t *testing.T) {
		e := newEnv(t)
		e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 429})
		if err := e.client(WithBackoff(100*time.Millisecond, time.Second)).Push(context.Background(), user, "", msg("x")); err != nil {
			t.Fatal(err)
		}
		if got := e.slept(); len(got) != 1 || got[0] < 0 || got[0] > 100*time.Millisecond {
			t.Errorf("sleeps = %v, want one in [0, 100ms]", got)
		}
		if len(e.mock.Messages()) != 1 {
			t.Errorf("records = %d", len(e.mock.Messages()))
		}
	})
	t.Run("Retry-After beyond cap stops", func(t *testing.T) {
		e := newEnv(t)
		e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 429, RetryAfter: time.Minute})
		err := e.client(WithRetryAfterCap(5*time.Second)).Push(context.Background(), user, "", msg("x"))
		if !errors.Is(err, ErrRateLimited) || len(e.slept()) != 0 {
			t.Fatalf("err = %v sleeps = %v", err, e.slept())
		}
	})
	t.Run("monthly limit not retried", func(t *testing.T) {
		e := newEnv(t)
		e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 429, Times: 4, Message: "You have reached your monthly limit."})
		err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), msg("x"))
		if !errors.Is(err, ErrRateLimited) || e.calls(linemock.PathPush, 429) != 1 {
			t.Fatalf("err = %v calls = %v", err, e.mock.Calls())
		}
	})
}

func TestServerErrorsExhaustAttempts(t *testing.T) {
	e := newEnv(t)
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 500, Times: 10})
	const base, maxWait = 100 * time.Millisecond, 250 * time.Millisecond
	err := e.client(WithMaxAttempts(4), WithBackoff(base, maxWait)).Push(context.Background(), user, RetryKey(eventID, 0), msg("x"))
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 500 {
		t.Fatalf("err = %v, want a 500 *APIError", err)
	}
	if n := e.calls(linemock.PathPush, 500); n != 4 {
		t.Errorf("attempts = %d, want 4", n)
	}
	sleeps := e.slept()
	if len(sleeps) != 3 {
		t.Fatalf("sleeps = %v, want 3", sleeps)
	}
	for i, d := range sleeps {
		ceiling := min(maxWait, base<<i)
		if d < 0 || d > ceiling {
			t.Errorf("sleep %d = %v, outside [0, %v]", i, d, ceiling)
		}
	}
	if len(e.mock.Messages()) != 0 || e.metrics.Total(MetricErrors) != 1 || e.metrics.Total(MetricRetries) != 3 {
		t.Errorf("records %d metrics %v", len(e.mock.Messages()), e.metrics.Counts())
	}
}

func TestBackoffNeverPassesDeadline(t *testing.T) {
	e := newEnv(t)
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 503, Times: 100})
	c := e.client(WithMaxAttempts(50), WithBackoff(time.Second, time.Second))
	c.backoff.Jitter = backoff.None // always the full wait
	deadline := e.clk.Now().Add(3500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := c.Push(ctx, user, RetryKey(eventID, 0), msg("x"))
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 503 {
		t.Fatalf("err = %v, want the last 503 wrapped", err)
	}
	if e.clk.Now().After(deadline) {
		t.Errorf("waited until %v, past the deadline %v", e.clk.Now(), deadline)
	}
	// Waits of 1 s fit three times in 3.5 s: four attempts, then it stops.
	if n := e.calls(linemock.PathPush, 503); n != 4 {
		t.Errorf("attempts = %d, want 4", n)
	}
}

func TestContextDeadlineCutsSlowCall(t *testing.T) {
	e := newEnv(t)
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Delay: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := New(token, WithBaseURL(e.srv.URL), WithLogger(slog.New(slog.DiscardHandler))).
		Push(ctx, user, RetryKey(eventID, 0), msg("x"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("returned after %v", took)
	}
	if len(e.mock.Messages()) != 0 {
		t.Error("a message was recorded")
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t, linemock.WithTokens("the-real-token"))
	err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), msg("x"))
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if n := e.calls(linemock.PathPush, 401); n != 1 {
		t.Errorf("401 retried: %d calls", n)
	}
	err = New("", WithBaseURL(e.srv.URL), WithLogger(slog.New(slog.DiscardHandler))).Reply(context.Background(), "r", msg("x"))
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("empty token: err = %v, want ErrUnauthorized", err)
	}
}

func TestAmbiguousReplyIsNotPushedAgain(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-1", e.clk.Now())
	e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 500, Accept: true})
	via, err := e.client().Send(context.Background(), Target{
		ReplyToken: "reply-1", EventTime: e.clk.Now(), To: user, WebhookEventID: eventID,
	}, msg("once"))
	if err != nil || via != ViaReply {
		t.Fatalf("Send = %q, %v; want reply, nil", via, err)
	}
	if n := len(e.mock.Messages()); n != 1 {
		t.Fatalf("records = %d, want 1 (no push after the token was used by a lost reply)", n)
	}
	if e.calls(linemock.PathPush, 200) != 0 {
		t.Error("pushed after an ambiguous reply")
	}
}

func TestSendReplyServerErrorDoesNotPush(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-1", e.clk.Now())
	e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 500, Times: 10})
	via, err := e.client(WithMaxAttempts(2)).Send(context.Background(), Target{
		ReplyToken: "reply-1", EventTime: e.clk.Now(), To: user, WebhookEventID: eventID,
	}, msg("x"))
	if err == nil || via != ViaReply {
		t.Fatalf("Send = %q, %v; want reply and an error", via, err)
	}
	if len(e.mock.Messages()) != 0 || e.calls(linemock.PathPush, 200) != 0 {
		t.Error("fell back to push on a 5xx")
	}
}

// flakyTransport fails the first n round trips with a transport error.
type flakyTransport struct {
	mu       sync.Mutex
	n        int
	keySeen  []bool
	delegate http.RoundTripper
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	_, has := r.Header[http.CanonicalHeaderKey("X-Line-Retry-Key")]
	f.keySeen = append(f.keySeen, has)
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return f.delegate.RoundTrip(r)
}

func TestTransportErrorsRetried(t *testing.T) {
	e := newEnv(t)
	ft := &flakyTransport{n: 2, delegate: http.DefaultTransport}
	c := e.client(WithHTTPClient(&http.Client{Transport: ft}))
	if err := c.Push(context.Background(), user, RetryKey(eventID, 0), msg("x")); err != nil {
		t.Fatalf("Push = %v", err)
	}
	if len(e.slept()) != 2 || len(e.mock.Messages()) != 1 {
		t.Errorf("sleeps %v records %d", e.slept(), len(e.mock.Messages()))
	}

	// Without a retry key the SDK sets an empty header; it must not reach LINE.
	ft2 := &flakyTransport{delegate: http.DefaultTransport}
	c2 := e.client(WithHTTPClient(&http.Client{Transport: ft2}))
	if err := c2.Push(context.Background(), user, "", msg("x")); err != nil {
		t.Fatal(err)
	}
	if len(ft2.keySeen) != 1 || ft2.keySeen[0] {
		t.Errorf("empty X-Line-Retry-Key header sent: %v", ft2.keySeen)
	}
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	six := []messaging_api.MessageInterface{msg("1"), msg("2"), msg("3"), msg("4"), msg("5"), msg("6")}
	cases := []struct {
		name string
		call func() error
	}{
		{"reply no token", func() error { return c.Reply(context.Background(), "", msg("x")) }},
		{"reply no messages", func() error { return c.Reply(context.Background(), "r") }},
		{"push six messages", func() error { return c.Push(context.Background(), user, "", six...) }},
		{"push nil message", func() error { return c.Push(context.Background(), user, "", nil) }},
		{"push no recipient", func() error { return c.Push(context.Background(), "", "", msg("x")) }},
		{"push bad retry key", func() error { return c.Push(context.Background(), user, "not-a-uuid", msg("x")) }},
		{"loading no chat", func() error { return c.ShowLoading(context.Background(), "", 5) }},
		{"mark as read no token", func() error { return c.MarkAsRead(context.Background(), "") }},
		{"send nowhere", func() error {
			_, err := c.Send(context.Background(), Target{ReplyToken: "r", EventTime: e.clk.Now().Add(-time.Hour)}, msg("x"))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
	if calls := e.mock.Calls(); len(calls) != 0 {
		t.Errorf("invalid requests reached the API: %v", calls)
	}
}

func TestValidationErrorNotRetried(t *testing.T) {
	e := newEnv(t)
	err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), messaging_api.TextMessage{Text: ""})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Fatalf("err = %v, want 400", err)
	}
	if len(apiErr.Details) != 1 || apiErr.Details[0].Property != "messages[0].text" {
		t.Errorf("details = %+v", apiErr.Details)
	}
	if errors.Is(err, ErrInvalidReplyToken) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrUnauthorized) {
		t.Errorf("validation error matches a sentinel: %v", err)
	}
	if e.calls(linemock.PathPush, 400) != 1 || len(e.slept()) != 0 {
		t.Errorf("400 retried: %v", e.mock.Calls())
	}
}

func TestShowLoading(t *testing.T) {
	cases := []struct{ in, want int }{
		{-3, 5}, {0, 5}, {5, 5}, {6, 10}, {10, 10}, {21, 25}, {59, 60}, {60, 60}, {600, 60},
	}
	e := newEnv(t)
	c := e.client()
	for _, tc := range cases {
		if got := LoadingSeconds(tc.in); got != tc.want {
			t.Errorf("LoadingSeconds(%d) = %d, want %d", tc.in, got, tc.want)
		}
		if err := c.ShowLoading(context.Background(), user, tc.in); err != nil {
			t.Fatalf("ShowLoading(%d): %v", tc.in, err)
		}
	}
	got := e.mock.Loading()
	if len(got) != len(cases) {
		t.Fatalf("loading calls = %d, want %d", len(got), len(cases))
	}
	for i, tc := range cases {
		if got[i].Seconds != tc.want || got[i].ChatID != user {
			t.Errorf("call %d = %+v, want %d s", i, got[i], tc.want)
		}
	}
}

// MarkAsRead posts the event's markAsReadToken: a token the API issued is
// accepted; a 5xx is retried (marking read twice changes nothing); a token
// LINE refuses is a permanent failure, never retried.
func TestMarkAsRead(t *testing.T) {
	tests := []struct {
		name      string
		token     string
		fault     *linemock.Fault
		wantErr   bool
		permanent bool
		wantCalls map[int]int // status → requests
	}{
		{name: "issued token", token: "read-1", wantCalls: map[int]int{200: 1}},
		{name: "5xx then accepted", token: "read-1", fault: &linemock.Fault{Path: linemock.PathMarkAsRead, Status: 503},
			wantCalls: map[int]int{503: 1, 200: 1}},
		{name: "refused token", token: "never-issued", wantErr: true, permanent: true, wantCalls: map[int]int{400: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.mock.IssueMarkAsReadToken("read-1", user, "1001")
			if tt.fault != nil {
				e.mock.Inject(*tt.fault)
			}
			err := e.client().MarkAsRead(context.Background(), tt.token)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			var apiErr *APIError
			if tt.permanent && (!errors.As(err, &apiErr) || !apiErr.Permanent() || apiErr.Message != linemock.MsgInvalidReadToken) {
				t.Fatalf("err = %v, want LINE's permanent 400", err)
			}
			for status, n := range tt.wantCalls {
				if got := e.calls(linemock.PathMarkAsRead, status); got != n {
					t.Errorf("%d answers: %d, want %d", status, got, n)
				}
			}
			if reads := e.mock.Reads(); !tt.wantErr && (len(reads) != 1 || reads[0].Chat != user || reads[0].MessageID != "1001") {
				t.Errorf("reads = %+v", reads)
			}
		})
	}
}

func TestRetryKey(t *testing.T) {
	cases := []struct {
		a, b   string
		ai, bi int
		same   bool
	}{
		{eventID, eventID, 0, 0, true},
		{eventID, eventID, 0, 1, false},
		{eventID, "01HZZZZZZZZZZZZZZZZZZZZZZY", 0, 0, false},
		{"a1", "a", 0, 10, false}, // the separator keeps (id, index) pairs apart
		{"", "", 3, 3, true},
	}
	for _, tc := range cases {
		ka, kb := RetryKey(tc.a, tc.ai), RetryKey(tc.b, tc.bi)
		if (ka == kb) != tc.same {
			t.Errorf("RetryKey(%q,%d)=%s RetryKey(%q,%d)=%s; same=%v", tc.a, tc.ai, ka, tc.b, tc.bi, kb, tc.same)
		}
		u, err := uuid.Parse(ka)
		if err != nil || u.Version() != 5 || len(ka) != 36 {
			t.Errorf("RetryKey(%q,%d) = %q is not a v5 UUID", tc.a, tc.ai, ka)
		}
	}
}

func TestLogsHoldNoSecrets(t *testing.T) {
	e := newEnv(t)
	e.mock.IssueReplyToken("reply-secret-token", e.clk.Now())
	e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 500, Times: 2})
	e.mock.Inject(linemock.Fault{Path: linemock.PathPush, Status: 500, Times: 10})
	c := e.client(WithMaxAttempts(2))
	_, _ = c.Send(context.Background(), Target{ReplyToken: "reply-secret-token", EventTime: e.clk.Now(), To: user, WebhookEventID: eventID}, msg("private user text"))
	_, _ = c.Send(context.Background(), Target{ReplyToken: "reply-secret-token", EventTime: e.clk.Now().Add(-time.Hour), To: user, WebhookEventID: eventID}, msg("private user text"))
	logs := e.logs.String()
	if !strings.Contains(logs, "retrying") {
		t.Fatalf("expected retry logs, got %q", logs)
	}
	for _, secret := range []string{token, "reply-secret-token", "private user text"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
}

// FuzzNewAPIError feeds arbitrary LINE error answers (status, body,
// Retry-After) to the response parser: it must never panic, must keep the
// status, and must map sentinels only from the status (and, for 400, the
// exact invalid-reply-token message).
func FuzzNewAPIError(f *testing.F) {
	f.Add(400, []byte(`{"message":"Invalid reply token"}`), "")
	f.Add(429, []byte(`{"message":"The API rate limit has been exceeded. Try again later."}`), "3")
	f.Add(429, []byte(`{"message":"You have reached your monthly limit."}`), "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(401, []byte(`{"message":"Authentication failed"}`), "-1")
	f.Add(400, []byte(`{"message":"The request body has 1 error(s)","details":[{"message":"May not be empty","property":"messages[0].text"}]}`), "")
	f.Add(500, []byte(`<html>oops</html>`), "99999999999999999999")
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		if status < 100 || status > 999 {
			status = 100 + (status%900+900)%900
		}
		res := &http.Response{StatusCode: status, Header: http.Header{}}
		res.Header.Set("Retry-After", retryAfter)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		e := newAPIError(res, "req", body, now)
		if e.Status != status || e.Message == "" || e.Error() == "" {
			t.Fatalf("bad APIError %+v", e)
		}
		if e.retryAfter < 0 {
			t.Fatalf("negative Retry-After %v from %q", e.retryAfter, retryAfter)
		}
		if errors.Is(e, ErrUnauthorized) != (status == 401) || errors.Is(e, ErrRateLimited) != (status == 429) {
			t.Fatalf("status %d mapped to %v", status, e.kinds)
		}
		if errors.Is(e, ErrInvalidReplyToken) && (status != 400 || e.Message != msgInvalidReplyToken) {
			t.Fatalf("invalid reply token from status %d message %q", status, e.Message)
		}
	})
}

// Clients made per record without WithHTTPClient share one keep-alive pool.
func TestClientsWithoutHTTPClientSharePool(t *testing.T) {
	pool := func(c *Client) *http.Transport {
		t.Helper()
		tr, ok := c.httpClient.Transport.(dropEmptyRetryKey).next.(*http.Transport)
		if !ok {
			t.Fatalf("transport %T", c.httpClient.Transport)
		}
		return tr
	}
	a, b := pool(New("t")), pool(New("t"))
	if a != b || a.MaxIdleConnsPerHost != keepalive.Conns {
		t.Fatalf("pools %p and %p, %d idle per host; want one shared pool of %d", a, b, a.MaxIdleConnsPerHost, keepalive.Conns)
	}
}
