// Package linetoken supplies LINE channel access tokens to pkg/lineapi: the
// long-lived token kept in SSM (re-read when LINE refuses it, so a rotated
// token takes effect without a redeploy), stateless channel access tokens
// minted from the channel ID and secret (valid 15 minutes), and channel
// access tokens v2.1 minted with a JWT signed by the channel's assertion
// signing key. A source is made once per container and shared by every LINE
// client in it: a token is cached, refreshed before it expires, and minted
// again when LINE answers 401 to it.
package linetoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Token modes, the values of the ChannelAccessTokenMode template parameter
// and of LINE_TOKEN_MODE.
const (
	ModeLongLived = "long-lived" // the token in SSM, as issued in the LINE Developers console
	ModeStateless = "stateless"  // minted from channel ID + secret, 15 minutes
	ModeV21       = "v2.1"       // minted with a JWT signed by the assertion signing key
)

// Token endpoints (LINE's channel access token API).
const (
	PathStateless = "/oauth2/v3/token"   // POST: issue a stateless channel access token
	PathV21       = "/oauth2/v2.1/token" // POST: issue a channel access token v2.1
)

// ErrCredentials marks a refusal by LINE's token endpoint of the channel's
// credentials (400/401: wrong channel ID, secret, key or JWT): minting again
// cannot help until the configuration is fixed.
var ErrCredentials = errors.New("linetoken: LINE refused the channel credentials")

// Permanent reports that a credentials refusal cannot succeed on a retry.
func (e *Error) Permanent() bool {
	return e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized
}

// Error is a non-2xx answer of a token endpoint.
type Error struct {
	Status      int
	Code        string // LINE's "error"
	Description string // LINE's "error_description"
}

func (e *Error) Error() string {
	return fmt.Sprintf("LINE token endpoint status %d: %s %s", e.Status, e.Code, e.Description)
}

// Unwrap matches ErrCredentials for a refused credential.
func (e *Error) Unwrap() error {
	if e.Permanent() {
		return ErrCredentials
	}
	return nil
}

// Fixed is a token that never changes (tests, a plain local token): Refresh
// returns it again.
type Fixed string

// Token returns the token.
func (f Fixed) Token(context.Context) (string, error) { return string(f), nil }

// Refresh returns the same token: there is nothing to refresh it from.
func (f Fixed) Refresh(context.Context, string) (string, error) { return string(f), nil }

// Reread caches a token read from a store (the long-lived token's SSM
// parameter) and reads it again when LINE refuses it, so a token rotated
// in SSM is picked up by running containers on their next 401.
type Reread struct {
	read func(ctx context.Context) (string, error)
	mu   sync.Mutex
	cur  string
}

// NewReread returns a source reading its token with read.
func NewReread(read func(ctx context.Context) (string, error)) *Reread { return &Reread{read: read} }

// Token returns the cached token, reading it the first time.
func (r *Reread) Token(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == "" {
		return r.load(ctx)
	}
	return r.cur, nil
}

// Refresh reads the token again if stale is still the cached one (another
// client may have re-read it already).
func (r *Reread) Refresh(ctx context.Context, stale string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != stale && r.cur != "" {
		return r.cur, nil
	}
	return r.load(ctx)
}

func (r *Reread) load(ctx context.Context) (string, error) {
	t, err := r.read(ctx)
	if err != nil {
		return "", fmt.Errorf("linetoken: read token: %w", err)
	}
	if t == "" {
		return "", errors.New("linetoken: the stored token is empty")
	}
	r.cur = t
	return t, nil
}

// Minter mints a new token and says how long it lives.
type Minter func(ctx context.Context) (token string, ttl time.Duration, err error)

// Minted caches minted tokens: one is minted on first use, again once the
// cached one is within its refresh margin of expiry (a fifth of its life,
// at most two minutes), and again when LINE refuses it.
type Minted struct {
	mint Minter
	now  func() time.Time
	mu   sync.Mutex
	tok  string
	exp  time.Time
	due  time.Time
}

// NewMinted returns a caching source over mint; now is the clock (nil:
// time.Now).
func NewMinted(mint Minter, now func() time.Time) *Minted {
	if now == nil {
		now = time.Now
	}
	return &Minted{mint: mint, now: now}
}

// Token returns the cached token while it is fresh, else a new one.
func (m *Minted) Token(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok != "" && m.now().Before(m.due) {
		return m.tok, nil
	}
	return m.renew(ctx)
}

// Refresh mints a new token unless another client already replaced stale.
func (m *Minted) Refresh(ctx context.Context, stale string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok != "" && m.tok != stale && m.now().Before(m.due) {
		return m.tok, nil
	}
	return m.renew(ctx)
}

// Expiry is when the cached token expires (zero before the first mint).
func (m *Minted) Expiry() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exp
}

func (m *Minted) renew(ctx context.Context) (string, error) {
	tok, ttl, err := m.mint(ctx)
	if err != nil {
		return "", err
	}
	if tok == "" || ttl <= 0 {
		return "", fmt.Errorf("linetoken: minted an empty token or a non-positive lifetime (%v)", ttl)
	}
	now := m.now()
	margin := min(ttl/5, 2*time.Minute)
	m.tok, m.exp, m.due = tok, now.Add(ttl), now.Add(ttl-margin)
	return tok, nil
}
