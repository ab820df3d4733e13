package botproc

import (
	"context"
	"errors"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/pkg/bot"
)

// wireError is an error as it crosses between the processes: its text,
// whether it is permanent (bot.IsPermanent), and the sentinels it matches
// by name (classes), so the other side can branch on it as on the error
// itself.
type wireError struct {
	Message   string   `json:"message"`
	Permanent bool     `json:"permanent,omitempty"`
	Classes   []string `json:"classes,omitempty"`
}

// classes are the sentinels that keep their identity across the process
// boundary: every one the worker, the LINE client's callers and bot
// authors branch on. A new sentinel someone branches on belongs here
// (TestEveryClassCrosses lists them).
var classes = []struct {
	name string
	err  error
}{
	{"deadline", context.DeadlineExceeded},
	{"canceled", context.Canceled},
	{"event", bot.ErrEvent},
	{"malformed", envelope.ErrMalformed},
	{"standby", bot.ErrStandby},
	{"no-messenger", bot.ErrNoMessenger},
	{"no-steps", bot.ErrNoSteps},
	{"step-in-progress", bot.ErrStepInProgress},
	{"step-result", bot.ErrStepResult},
	{"no-sessions", bot.ErrNoSessions},
	{"no-chat", bot.ErrNoChat},
	{"session-conflict", bot.ErrSessionConflict},
	{"in-progress", idempotency.ErrInProgress},
	{"completed", idempotency.ErrCompleted},
	{"not-claimed", idempotency.ErrNotClaimed},
	{"conflict", idempotency.ErrConflict},
	{"too-large", idempotency.ErrTooLarge},
	{"attempted", idempotency.ErrAttempted},
	{"invalid-reply-token", lineapi.ErrInvalidReplyToken},
	{"rate-limited", lineapi.ErrRateLimited},
	{"monthly-limit", lineapi.ErrMonthlyLimit},
	{"unauthorized", lineapi.ErrUnauthorized},
	{"invalid-request", lineapi.ErrInvalidRequest},
	{"no-bot", ErrNoBot},
}

// encodeError is err for the wire (nil for nil).
func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Message: err.Error(), Permanent: bot.IsPermanent(err)}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			w.Classes = append(w.Classes, c.name)
		}
	}
	return w
}

// decode is the error w stands for (nil for nil): it reads as the original,
// matches the same sentinels with errors.Is, and is permanent when the
// original was.
func (w *wireError) decode() error {
	if w == nil {
		return nil
	}
	e := &remoteError{msg: w.Message, permanent: w.Permanent}
	for _, name := range w.Classes {
		for _, c := range classes {
			if c.name == name {
				e.matches = append(e.matches, c.err)
			}
		}
	}
	return e
}

// remoteError is an error that happened in the other process.
type remoteError struct {
	msg       string
	permanent bool
	matches   []error
}

func (e *remoteError) Error() string { return e.msg }

// Unwrap returns the sentinels the original error matched.
func (e *remoteError) Unwrap() []error { return e.matches }

// Permanent reports whether the original error was permanent (see
// bot.IsPermanent).
func (e *remoteError) Permanent() bool { return e.permanent }
