package lineapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/linetoken"
)

// isPermanent is the contract shared with the worker: an error is permanent
// when errors.As finds a value whose Permanent method returns true.
func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// LINE's answers, with the messages its reference documents, are told
// apart by status and body: the rate limit is retried with backoff, the
// monthly limit is held (never retried in the call, not permanent), and
// other 4xx are permanent.
func TestAnswersToldApartByStatusAndBody(t *testing.T) {
	tests := []struct {
		name      string
		fault     linemock.Fault
		wantCalls int // attempts made
		monthly   bool
		rate      bool
		permanent bool
		ok        bool
	}{
		{name: "rate limit retried then sent", fault: linemock.Fault{Status: 429, Message: linemock.MsgRateLimited}, wantCalls: 2, ok: true},
		{name: "rate limit on every attempt", fault: linemock.Fault{Status: 429, Times: 9, Message: linemock.MsgRateLimited}, wantCalls: DefaultMaxAttempts, rate: true},
		{name: "monthly limit held", fault: linemock.Fault{Status: 429, Times: 9, Message: linemock.MsgMonthlyLimit}, wantCalls: 1, rate: true, monthly: true},
		{name: "bad request permanent", fault: linemock.Fault{Status: 400, Message: "The request body has 1 error(s)"}, wantCalls: 1, permanent: true},
		{name: "forbidden permanent", fault: linemock.Fault{Status: 403, Message: "Access to this API is not available for your account"}, wantCalls: 1, permanent: true},
		{name: "payload too large permanent", fault: linemock.Fault{Status: 413, Message: "Request entity too large"}, wantCalls: 1, permanent: true},
		{name: "server error retried", fault: linemock.Fault{Status: 500, Times: 9}, wantCalls: DefaultMaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			f := tt.fault
			f.Path = linemock.PathPush
			e.mock.Inject(f)
			err := e.client().Push(context.Background(), user, RetryKey(eventID, 0), msg("x"))
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			calls := 0
			for c, n := range e.mock.Calls() {
				if c.Path == linemock.PathPush {
					calls += n
				}
			}
			if calls != tt.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tt.wantCalls)
			}
			if errors.Is(err, ErrMonthlyLimit) != tt.monthly || errors.Is(err, ErrRateLimited) != tt.rate || isPermanent(err) != tt.permanent {
				t.Errorf("err %v: monthly %v rate %v permanent %v; want %v %v %v",
					err, errors.Is(err, ErrMonthlyLimit), errors.Is(err, ErrRateLimited), isPermanent(err), tt.monthly, tt.rate, tt.permanent)
			}
		})
	}
}

// The quota the mock keeps is what LINE enforces: a push beyond the limit
// gets the monthly-limit 429, replies stay free, and Quota reads it back.
func TestQuotaEnforcedAndRead(t *testing.T) {
	e := newEnv(t)
	e.mock.SetQuota(linemock.Quota{Limit: 2, Used: 1})
	c := e.client()
	ctx := context.Background()
	if err := c.Push(ctx, user, RetryKey(eventID, 0), msg("a"), msg("b")); err != nil {
		t.Fatal(err)
	}
	err := c.Push(ctx, user, RetryKey(eventID, 1), msg("c"))
	if !errors.Is(err, ErrMonthlyLimit) || isPermanent(err) {
		t.Fatalf("push beyond the limit: %v, want ErrMonthlyLimit (not permanent)", err)
	}
	e.mock.IssueReplyTokenTo("r", user, e.clk.Now())
	if err := c.Reply(ctx, "r", msg("free")); err != nil {
		t.Fatalf("reply with the quota spent: %v", err)
	}
	q, err := c.Quota(ctx)
	if err != nil || !q.Limited || q.Limit != 2 || q.Used != 2 || q.Remaining() != 0 {
		t.Fatalf("Quota = %+v, %v; want limit 2, used 2", q, err)
	}
	e.mock.SetQuota(linemock.Quota{Limit: -1, Used: 7})
	if q, _ := c.Quota(ctx); q.Limited || q.Used != 7 || q.Remaining() != -1 {
		t.Fatalf("unlimited Quota = %+v", q)
	}
}

// A token that expires mid-flight: LINE answers 401, the client refreshes
// the token once and the same call succeeds; a second 401 after the refresh
// is permanent and not refreshed again.
func TestTokenRefreshedOnceOn401MidFlight(t *testing.T) {
	e := newEnv(t, linemock.WithChannel("1234567890", "secret"))
	src := linetoken.NewMinted(linetoken.Endpoint{BaseURL: e.srv.URL}.Stateless("1234567890", "secret"), e.clk.Now)
	c := e.client(WithTokenSource(src))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a refresh loop fails here, not the suite
	defer cancel()
	if err := c.Push(ctx, user, RetryKey(eventID, 0), msg("before")); err != nil {
		t.Fatal(err)
	}
	e.mock.ExpireTokens() // revoked or expired while the container holds it
	if err := c.Push(ctx, user, RetryKey(eventID, 1), msg("after")); err != nil {
		t.Fatalf("push after the token expired: %v", err)
	}
	if n := e.calls(linemock.PathPush, 401); n != 1 {
		t.Errorf("%d answers 401, want exactly 1 before the refresh", n)
	}
	if e.mock.IssuedTokens() != 2 || len(e.mock.Messages()) != 2 {
		t.Errorf("%d tokens issued, %d messages; want 2 and 2", e.mock.IssuedTokens(), len(e.mock.Messages()))
	}

	// A source whose refreshed token is refused too: one refresh, then a
	// permanent ErrUnauthorized.
	bad := New("", WithBaseURL(e.srv.URL), WithTokenSource(linetoken.Fixed("never-issued")), WithLogger(e.client().log))
	err := bad.Push(ctx, user, RetryKey(eventID, 2), msg("x"))
	if !errors.Is(err, ErrUnauthorized) || !isPermanent(err) {
		t.Fatalf("err = %v, want a permanent ErrUnauthorized", err)
	}
	if n := e.calls(linemock.PathPush, 401); n != 3 {
		t.Errorf("%d answers 401 in all, want 3 (1 earlier + 2: one refresh only)", n)
	}
}

// refusedSource hands out tokens LINE never issued and counts its
// refreshes; past maxRefreshes it fails, so a client that refreshes on
// every 401 ends (and this test names the fault) instead of looping.
type refusedSource struct {
	mu        sync.Mutex
	refreshes int
}

const maxRefreshes = 5

func (s *refusedSource) Token(context.Context) (string, error) { return "never-issued-0", nil }

func (s *refusedSource) Refresh(_ context.Context, stale string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshes++
	if s.refreshes > maxRefreshes {
		return "", fmt.Errorf("refreshed %d times for one call (the last stale token %s)", s.refreshes, stale)
	}
	return fmt.Sprintf("never-issued-%d", s.refreshes), nil
}

// A 401 is answered by one refresh per call, never one per 401: when the
// refreshed token is refused too, the call fails at once with a permanent
// ErrUnauthorized after exactly two attempts. (A client refreshing on
// every 401 would loop while LINE refuses; the source stops it after a few
// and the deadline bounds it, so it fails here by name.)
func TestSecond401IsNotRefreshedAgain(t *testing.T) {
	e := newEnv(t, linemock.WithTokens("the-only-token-LINE-issued"))
	src := &refusedSource{}
	c := New("", WithBaseURL(e.srv.URL), WithTokenSource(src), WithLogger(e.client().log))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Push(ctx, user, RetryKey(eventID, 0), msg("x"))
	src.mu.Lock()
	refreshes := src.refreshes
	src.mu.Unlock()
	if refreshes != 1 {
		t.Fatalf("%d refreshes for one call whose every token LINE refused; want exactly 1 (err %v)", refreshes, err)
	}
	if n := e.calls(linemock.PathPush, 401); n != 2 {
		t.Errorf("%d push attempts answered 401, want 2 (the first token, then the refreshed one)", n)
	}
	if !errors.Is(err, ErrUnauthorized) || !isPermanent(err) {
		t.Errorf("err = %v, want a permanent ErrUnauthorized", err)
	}
}

// Client-side refusals are permanent too: the same call can never succeed.
func TestInvalidRequestIsPermanent(t *testing.T) {
	e := newEnv(t)
	err := e.client().Push(context.Background(), "", "", msg("x"))
	if !errors.Is(err, ErrInvalidRequest) || !isPermanent(err) {
		t.Fatalf("err = %v, want a permanent ErrInvalidRequest", err)
	}
	if isPermanent(context.DeadlineExceeded) {
		t.Fatal("a deadline is not permanent")
	}
}
