package lineapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
)

// fakeLedger is a ReplyLedger in memory that counts its calls and can be
// told to fail.
type fakeLedger struct {
	mu                        *sync.Mutex
	on                        bool // an attempt is on record
	begins, lookups, clears   int
	beginErr, lookErr, clrErr error
}

func (l *fakeLedger) Begin(context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.begins++
	if l.beginErr != nil {
		return false, l.beginErr
	}
	earlier := l.on
	l.on = true
	return earlier, nil
}

func (l *fakeLedger) Attempted(context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lookups++
	return l.on, l.lookErr
}

func (l *fakeLedger) Clear(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clears++
	if l.clrErr != nil {
		return l.clrErr
	}
	l.on = false
	return nil
}

// With a ledger, Send records the reply's attempt before it uses the
// token, and an attempt on record from an earlier run (a crash after the
// reply, before the event's completion) turns LINE's refusal of the used
// token into "delivered": never a push of the same answer. A first attempt
// that LINE refused with a clear answer is forgotten, so the push (or the
// retry) goes ahead; one LINE may have acted on is kept.
func TestSendWithLedger(t *testing.T) {
	const tok = "reply-1"
	tests := []struct {
		name string
		// setUp issues the token (or not), uses it, injects faults; it
		// returns the event's time.
		setUp  func(e *env) time.Time
		ledger fakeLedger
		opts   []Option
		// want
		via           Via
		wantErr       error // nil: success; errAny: some error
		replies       int   // replies LINE recorded
		pushes        int   // pushes LINE recorded
		assumed       int   // MetricRepliesAssumed
		begins        int
		lookups       int
		clears        int
		onAfter       bool // an attempt on record after the send
		replyRequests int  // requests to the reply endpoint, any answer
	}{
		{
			name:  "first attempt delivers by reply and stays on record",
			setUp: func(e *env) time.Time { e.mock.IssueReplyToken(tok, e.clk.Now()); return e.clk.Now() },
			via:   ViaReply, replies: 1, begins: 1, onAfter: true, replyRequests: 1,
		},
		{
			name: "first attempt with a token used elsewhere: cleared, then pushed",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				useToken(e, tok)
				return e.clk.Now()
			},
			via: ViaPush, replies: 1, pushes: 1, begins: 1, clears: 1, onAfter: false, replyRequests: 2,
		},
		{
			name: "an earlier attempt used the token: delivered, no push",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				useToken(e, tok) // the killed run's reply, which LINE recorded
				return e.clk.Now()
			},
			ledger: fakeLedger{on: true},
			via:    ViaReply, replies: 1, assumed: 1, begins: 1, onAfter: true, replyRequests: 2,
		},
		{
			name:   "an earlier attempt never left: the retry's reply delivers",
			setUp:  func(e *env) time.Time { e.mock.IssueReplyToken(tok, e.clk.Now()); return e.clk.Now() },
			ledger: fakeLedger{on: true},
			via:    ViaReply, replies: 1, begins: 1, onAfter: true, replyRequests: 1,
		},
		{
			name: "an earlier attempt and a token too old to trust: still no push",
			setUp: func(e *env) time.Time {
				at := e.clk.Now().Add(-2 * time.Minute)
				e.mock.IssueReplyToken(tok, at) // expired at LINE too
				return at
			},
			ledger: fakeLedger{on: true},
			via:    ViaReply, assumed: 1, lookups: 1, onAfter: true, replyRequests: 1,
		},
		{
			name: "no earlier attempt and a token too old: pushed, nothing recorded",
			setUp: func(e *env) time.Time {
				at := e.clk.Now().Add(-2 * time.Minute)
				e.mock.IssueReplyToken(tok, at)
				return at
			},
			via: ViaPush, pushes: 1, lookups: 1,
		},
		{
			name: "a reply LINE may have taken (5xx) stays on record and fails",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 500, Times: 10})
				return e.clk.Now()
			},
			opts: []Option{WithMaxAttempts(2)},
			via:  ViaReply, wantErr: errAny, begins: 1, onAfter: true, replyRequests: 2,
		},
		{
			name: "a reply LINE clearly refused (429) is forgotten and fails",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 429, Times: 10})
				return e.clk.Now()
			},
			opts: []Option{WithMaxAttempts(2)},
			via:  ViaReply, wantErr: ErrRateLimited, begins: 1, clears: 1, onAfter: false, replyRequests: 2,
		},
		{
			name: "a clear refusal after an earlier attempt keeps the record",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				e.mock.Inject(linemock.Fault{Path: linemock.PathReply, Status: 429, Times: 10})
				return e.clk.Now()
			},
			ledger: fakeLedger{on: true},
			opts:   []Option{WithMaxAttempts(1)},
			via:    ViaReply, wantErr: ErrRateLimited, begins: 1, onAfter: true, replyRequests: 1,
		},
		{
			name:   "a ledger that cannot record fails the send before anything is sent",
			setUp:  func(e *env) time.Time { e.mock.IssueReplyToken(tok, e.clk.Now()); return e.clk.Now() },
			ledger: fakeLedger{beginErr: errPlanted},
			via:    ViaReply, wantErr: errPlanted, begins: 1,
		},
		{
			name: "a ledger that cannot be read for an old token fails the send",
			setUp: func(e *env) time.Time {
				return e.clk.Now().Add(-2 * time.Minute)
			},
			ledger: fakeLedger{lookErr: errPlanted},
			via:    ViaReply, wantErr: errPlanted, lookups: 1,
		},
		{
			name: "a record that cannot be cleared does not stop the push",
			setUp: func(e *env) time.Time {
				e.mock.IssueReplyToken(tok, e.clk.Now())
				useToken(e, tok)
				return e.clk.Now()
			},
			ledger: fakeLedger{clrErr: errPlanted},
			via:    ViaPush, replies: 1, pushes: 1, begins: 1, clears: 1, onAfter: true, replyRequests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			at := tt.setUp(e)
			l := &tt.ledger
			l.mu = &sync.Mutex{}
			via, err := e.client(tt.opts...).Send(context.Background(), Target{
				ReplyToken: tok, EventTime: at, To: user, WebhookEventID: eventID, Ledger: l,
			}, msg("the answer"))
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Send = %q, %v; want %q, nil", via, err, tt.via)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("Send = %q, %v; want an error matching %v", via, err, tt.wantErr)
			}
			if via != tt.via {
				t.Errorf("via = %q, want %q", via, tt.via)
			}
			replies, pushes := 0, 0
			for _, r := range e.mock.Messages() {
				switch r.Via {
				case linemock.ViaReply:
					replies++
				case linemock.ViaPush:
					pushes++
					if r.RetryKey != RetryKey(eventID, 0) {
						t.Errorf("push retry key %q, want %q", r.RetryKey, RetryKey(eventID, 0))
					}
				}
			}
			if replies != tt.replies || pushes != tt.pushes {
				t.Errorf("LINE recorded %d replies and %d pushes, want %d and %d", replies, pushes, tt.replies, tt.pushes)
			}
			reqs := 0
			for c, n := range e.mock.Calls() {
				if c.Path == linemock.PathReply {
					reqs += n
				}
			}
			if reqs != tt.replyRequests {
				t.Errorf("%d reply requests, want %d", reqs, tt.replyRequests)
			}
			if got := int(e.metrics.Total(MetricRepliesAssumed)); got != tt.assumed {
				t.Errorf("%s = %d, want %d", MetricRepliesAssumed, got, tt.assumed)
			}
			if l.begins != tt.begins || l.lookups != tt.lookups || l.clears != tt.clears || l.on != tt.onAfter {
				t.Errorf("ledger: %d begins, %d lookups, %d clears, on record %v; want %d, %d, %d, %v",
					l.begins, l.lookups, l.clears, l.on, tt.begins, tt.lookups, tt.clears, tt.onAfter)
			}
		})
	}
}

var (
	errPlanted = errors.New("planted ledger failure")
	errAny     = errors.New("any error")
)

// useToken spends a reply token as another reply would have.
func useToken(e *env, token string) {
	if err := New(token, WithBaseURL(e.srv.URL)).Reply(context.Background(), token, msg("the answer")); err != nil {
		panic(err)
	}
}
