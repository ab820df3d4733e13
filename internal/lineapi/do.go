package lineapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
)

// Sentinel errors callers branch on; an *APIError wraps the matching one.
var (
	// ErrInvalidReplyToken: LINE rejected the reply token (used, expired or
	// unknown). Send falls back to push on it.
	ErrInvalidReplyToken = errors.New("lineapi: invalid reply token")
	// ErrRateLimited: LINE answered 429 (rate limit, or the monthly message
	// quota) on the last attempt.
	ErrRateLimited = errors.New("lineapi: rate limited")
	// ErrMonthlyLimit: LINE refused a push because the month's message quota
	// is spent (429 "You have reached your monthly limit."). It also matches
	// ErrRateLimited. It is never retried within a call: the push is held
	// (pkg/held) and sent again when quota returns.
	ErrMonthlyLimit = errors.New("lineapi: monthly message limit reached")
	// ErrUnauthorized: the channel access token is missing or not accepted.
	ErrUnauthorized = errors.New("lineapi: unauthorized")
	// ErrInvalidRequest: the call was refused before reaching LINE (no
	// recipient, no messages, more than 5, bad retry key). It is permanent:
	// the same call can never succeed.
	ErrInvalidRequest error = permanentError("lineapi: invalid request")
)

// permanentError is a sentinel that can never succeed on a retry: it
// satisfies the contract shared with the worker (an error is permanent when
// errors.As finds a value whose Permanent method returns true).
type permanentError string

func (e permanentError) Error() string { return string(e) }

// Permanent reports true: retrying cannot help.
func (permanentError) Permanent() bool { return true }

// Headers LINE answers with.
const (
	headerRequestID         = "X-Line-Request-Id"
	headerAcceptedRequestID = "X-Line-Accepted-Request-Id"
	headerRetryKey          = "X-Line-Retry-Key"
)

// LINE's messages that change how an answer is handled.
const (
	msgInvalidReplyToken = "Invalid reply token"
	msgMonthlyLimit      = "You have reached your monthly limit."
)

// APIError is a non-2xx answer from the Messaging API. It wraps
// ErrInvalidReplyToken, ErrRateLimited or ErrUnauthorized when one applies,
// so callers can use errors.Is as well as errors.As.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is LINE's "message" field.
	Message string
	// RequestID is the x-line-request-id of the answer (quote it to LINE).
	RequestID string
	// AcceptedRequestID is x-line-accepted-request-id on a 409: the request
	// that first used the retry key.
	AcceptedRequestID string
	// Details are LINE's per-property validation details, if any.
	Details []ErrorDetail

	retryAfter time.Duration
	kinds      []error
	// refreshed: the token was refreshed (or could not be) before this 401,
	// so another attempt with it cannot succeed.
	refreshed bool
}

// ErrorDetail is one entry of LINE's error details.
type ErrorDetail struct {
	Message  string `json:"message"`
	Property string `json:"property"`
}

// Error describes the answer without any request content.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "LINE API status %d: %s", e.Status, e.Message)
	for _, d := range e.Details {
		fmt.Fprintf(&b, "; %s: %s", d.Property, d.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the sentinels the error matches, if any.
func (e *APIError) Unwrap() []error { return e.kinds }

// Permanent reports whether the same request can never succeed: a 4xx
// answer other than 429 (rate or monthly limit: retried or held), 409 (a
// repeated retry key: success) and a 401 that a token refresh may still cure.
// The worker dead-letters a permanent failure at once instead of retrying it.
func (e *APIError) Permanent() bool {
	switch {
	case e.Status < 400 || e.Status >= 500:
		return false
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusConflict:
		return false
	case e.Status == http.StatusUnauthorized:
		return e.refreshed
	}
	return true
}

// MonthlyLimit reports whether e is LINE's refusal of a push for the spent
// monthly quota: status 429 with LINE's documented message.
func (e *APIError) MonthlyLimit() bool {
	return e.Status == http.StatusTooManyRequests && e.Message == msgMonthlyLimit
}

// callResult is what do learned across attempts.
type callResult struct {
	requestID string
	// ambiguous: some attempt failed without a clear answer (5xx or a
	// transport error): LINE may have acted on it.
	ambiguous bool
}

type sdkCall func(api *messaging_api.MessagingApiAPI) (*http.Response, error)

// do runs call with retries. idempotent says whether an ambiguous failure may
// be retried (a push without retry key may not). It never waits past ctx's
// deadline: when the next wait would cross it, do stops and returns the last
// error.
func (c *Client) do(ctx context.Context, op string, idempotent bool, call sdkCall) (callResult, error) {
	var res callResult
	token, err := c.tokens.Token(ctx)
	if err != nil {
		return res, fmt.Errorf("lineapi: %s: %w: %w", op, ErrUnauthorized, err)
	}
	if token == "" {
		return res, fmt.Errorf("lineapi: %s: %w: empty channel access token", op, ErrUnauthorized)
	}
	refreshed := false
	var last error
	for attempt := 1; ; attempt++ {
		reqID, err := c.once(ctx, token, call)
		res.requestID = reqID
		if err == nil {
			return res, nil
		}
		last = err
		if apiErr, ok := errors.AsType[*APIError](err); ok && apiErr.Status == http.StatusUnauthorized {
			// One refresh per call: a token that expired or was rotated
			// mid-flight is replaced; a second 401 is the credentials' fault.
			if refreshed || !c.tokens.CanRefresh() {
				apiErr.refreshed = true
				return res, c.fail(ctx, op, attempt, last)
			}
			refreshed = true
			fresh, rerr := c.tokens.Refresh(ctx, token)
			if rerr != nil {
				apiErr.refreshed = true
				return res, c.fail(ctx, op, attempt, errors.Join(last, fmt.Errorf("refresh token: %w", rerr)))
			}
			c.metrics.Count(MetricRetries, 1)
			c.log.InfoContext(ctx, "line api answered 401; token refreshed, retrying once", "op", op, "attempt", attempt)
			token = fresh
			continue
		}
		retry, wait := c.classify(err, attempt)
		if isAmbiguous(err) {
			res.ambiguous = true
			if !idempotent {
				retry = false
			}
		}
		stop := !retry || attempt >= c.maxAttempts || ctx.Err() != nil
		if !stop {
			if dl, ok := ctx.Deadline(); ok && !c.now().Add(wait).Before(dl) {
				stop = true // waiting would outlive the caller's deadline
			}
		}
		if stop {
			return res, c.fail(ctx, op, attempt, last)
		}
		c.metrics.Count(MetricRetries, 1)
		c.log.WarnContext(ctx, "line api call failed; retrying", "op", op, "attempt", attempt,
			"wait", wait.String(), "error", err.Error())
		if serr := c.sleep(ctx, wait); serr != nil {
			return res, c.fail(ctx, op, attempt, errors.Join(last, serr))
		}
	}
}

func (c *Client) fail(ctx context.Context, op string, attempts int, err error) error {
	c.log.DebugContext(ctx, "line api call gave up", "op", op, "attempts", attempts, "error", err.Error())
	return fmt.Errorf("lineapi: %s after %d attempt(s): %w", op, attempts, err)
}

// once makes one attempt with a fresh SDK client bound to ctx.
func (c *Client) once(ctx context.Context, token string, call sdkCall) (string, error) {
	api, err := messaging_api.NewMessagingApiAPI(token,
		messaging_api.WithEndpoint(c.baseURL), messaging_api.WithHTTPClient(c.httpClient))
	if err != nil {
		return "", fmt.Errorf("%w: building SDK client: %w", ErrInvalidRequest, err)
	}
	api.WithContext(ctx)
	start := c.now()
	httpRes, err := call(api)
	c.metrics.Duration(MetricLatency, c.now().Sub(start))
	if httpRes == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return "", err
	}
	reqID := httpRes.Header.Get(headerRequestID)
	if httpRes.StatusCode/100 == 2 {
		// Accepted. A body the SDK could not decode does not undo that.
		return reqID, nil
	}
	body, _ := io.ReadAll(io.LimitReader(httpRes.Body, 64<<10))
	_ = httpRes.Body.Close()
	return reqID, newAPIError(httpRes, reqID, body, c.now())
}

func newAPIError(res *http.Response, reqID string, body []byte, now time.Time) *APIError {
	var parsed struct {
		Message string        `json:"message"`
		Details []ErrorDetail `json:"details"`
	}
	_ = json.Unmarshal(body, &parsed)
	e := &APIError{
		Status:            res.StatusCode,
		Message:           parsed.Message,
		RequestID:         reqID,
		AcceptedRequestID: res.Header.Get(headerAcceptedRequestID),
		Details:           parsed.Details,
		retryAfter:        parseRetryAfter(res.Header.Get("Retry-After"), now),
	}
	if e.Message == "" {
		e.Message = http.StatusText(res.StatusCode)
	}
	if e.Message == "" {
		e.Message = "status " + strconv.Itoa(res.StatusCode)
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		e.kinds = []error{ErrUnauthorized}
	case e.MonthlyLimit():
		e.kinds = []error{ErrRateLimited, ErrMonthlyLimit}
	case res.StatusCode == http.StatusTooManyRequests:
		e.kinds = []error{ErrRateLimited}
	case res.StatusCode == http.StatusBadRequest && parsed.Message == msgInvalidReplyToken:
		e.kinds = []error{ErrInvalidReplyToken}
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		const maxSecs = 365 * 24 * 60 * 60 // longer is "too long" all the same; no overflow
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// classify says whether err is worth another attempt and how long to wait.
func (c *Client) classify(err error, attempt int) (bool, time.Duration) {
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		switch {
		case apiErr.Status == http.StatusTooManyRequests:
			c.metrics.Count(MetricRateLimited, 1)
			if apiErr.MonthlyLimit() {
				return false, 0 // the quota does not come back within a call: held instead
			}
			if apiErr.retryAfter > 0 {
				if apiErr.retryAfter > c.retryAfterCap {
					return false, 0
				}
				return true, apiErr.retryAfter
			}
			return true, c.backoff.Delay(attempt)
		case apiErr.Status >= 500:
			return true, c.backoff.Delay(attempt)
		default:
			return false, 0
		}
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return true, c.backoff.Delay(attempt) // transport failure or timeout
	}
	return false, 0
}

// isAmbiguous reports whether LINE may have acted on a failed attempt.
func isAmbiguous(err error) bool {
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		return apiErr.Status >= 500
	}
	_, ok := errors.AsType[*url.Error](err)
	return ok
}
