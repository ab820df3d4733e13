// Package chatops carries out what an operator taps on an alert card:
// Redrive a dead-letter queue, Silence an alarm for an hour, Acknowledge it,
// Resend the results held for the monthly limit. It runs in the worker in
// front of the bot's router and acts only when every check passes:
//
//   - the postback's data was signed by this stack (pkg/postback) and has
//     not expired;
//   - it comes from a user ID in OPERATOR_LINE_IDS (for a named channel,
//     that channel's operators), in a one-to-one chat with the bot (never a
//     group or room, where anyone could tap);
//   - the same signed data was not used before (single use, so a replayed
//     postback does nothing);
//   - the target is one the stack offers (Redrive: a DLQ in CHATOPS_DLQS).
//
// It then replies with the result (a reply: free) and writes one audit log
// line. Postback data that starts with linegate's prefix never reaches the
// bot, whether it acted or refused; refusals get no reply, so a forged tap
// learns nothing. Every other event goes to the bot untouched.
package chatops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/redrive"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/pkg/bot"
)

// Metric names (docs/metrics.md).
const (
	MetricActions = "ChatOpsActionsTaken"     // operator taps carried out (or attempted)
	MetricRefused = "ChatOpsPostbacksRefused" // linegate postbacks refused: forged, expired, used, not an operator
)

// SilenceFor is how long Silence mutes an alarm.
const SilenceFor = time.Hour

// redriveWait is how long Redrive waits for the move before replying.
const redriveWait = 5 * time.Second

// Silencer mutes an alarm's notifications until a time: CloudWatch
// DisableAlarmActions plus a one-time schedule that enables them again in
// AWS (CloudWatchSilencer), the local alarm evaluator in `linegate local`.
type Silencer interface {
	Silence(ctx context.Context, alarm string, until time.Time) error
}

// once is the idempotency store's single-use marker.
type once interface {
	Claim(ctx context.Context, key string, inProgressFor time.Duration) error
	Complete(ctx context.Context, key string, keepFor time.Duration) error
	Release(ctx context.Context, key string) error
}

// Config is what the operator's buttons act on.
type Config struct {
	// Signer verifies the buttons' data (required).
	Signer *postback.Signer
	// Operators are the user IDs allowed to act on the default channel.
	Operators []string
	// ChannelOperators are, by channel name, the user IDs allowed to act
	// on a named channel: a tap arrives through the channel whose card it
	// was on, and is answered there. A channel without an entry has none
	// (its cards went to the default channel's operators, who tap them
	// there).
	ChannelOperators map[string][]string
	// Once makes each signed button single-use (the idempotency store).
	Once once
	// Queues and DLQs: Redrive runs pkg/redrive on Queues, for the queue
	// names in DLQs only. Nil Queues disables Redrive.
	Queues redrive.Queues
	DLQs   []string
	// Silencer mutes alarms; nil disables Silence.
	Silencer Silencer
	// Resend sends the held results; nil disables Resend held.
	Resend  func(ctx context.Context) (held.Report, error)
	Log     *slog.Logger
	Metrics telemetry.Recorder
	Now     func() time.Time
}

// Handler intercepts linegate's postbacks.
type Handler struct{ cfg Config }

// New returns a Handler; it fails without a signer.
func New(cfg Config) (*Handler, error) {
	if cfg.Signer == nil {
		return nil, errors.New("chatops: no signer (CHATOPS_KEY)")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = telemetry.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg}, nil
}

// markerKeep is how long a used button is remembered: longer than any
// button lives (CHATOPS_TTL_HOURS is at most 14 days).
const markerKeep = 15 * 24 * time.Hour

// Intercept handles e when it is a postback carrying linegate's data and
// reports whether it did; the worker runs the bot's router only when it did
// not. Its error fails the record (only a failed reply or marker does).
func (h *Handler) Intercept(ctx context.Context, e *bot.Event) (bool, error) {
	data, ok := e.PostbackData()
	if !ok {
		return false, nil
	}
	cmd, err := h.cfg.Signer.Verify(data)
	if errors.Is(err, postback.ErrNotOurs) {
		return false, nil
	}
	who := telemetry.HashUserID(e.Source.UserID)
	if err != nil {
		h.refuse(ctx, cmd, who, err.Error())
		return true, nil
	}
	if e.Source.Type != bot.SourceUser || !slices.Contains(h.operators(e.Channel), e.Source.UserID) {
		h.refuse(ctx, cmd, who, "not an operator in a one-to-one chat with the bot")
		return true, nil
	}
	key := "chatops#" + cmd.ID
	if h.cfg.Once != nil {
		switch err := h.cfg.Once.Claim(ctx, key, time.Minute); {
		case errors.Is(err, idempotency.ErrCompleted), errors.Is(err, idempotency.ErrInProgress):
			h.refuse(ctx, cmd, who, "button already used")
			return true, nil
		case err != nil:
			return true, fmt.Errorf("chatops: claim %s: %w", key, err)
		}
	}
	result, aerr := h.act(ctx, cmd)
	h.cfg.Metrics.Count(MetricActions, 1)
	outcome := "done"
	if aerr != nil {
		outcome = "failed"
		result = fmt.Sprintf("%s failed: %v", actionName(cmd.Action), aerr)
	}
	h.cfg.Log.InfoContext(ctx, "chatops audit", "operator", who, "action", cmd.Action, "target", cmd.Target,
		"outcome", outcome, "result", result)
	if h.cfg.Once != nil {
		if aerr != nil {
			_ = h.cfg.Once.Release(context.WithoutCancel(ctx), key) // a failed action may be tapped again
		} else if err := h.cfg.Once.Complete(context.WithoutCancel(ctx), key, markerKeep); err != nil {
			h.cfg.Log.WarnContext(ctx, "chatops marker not completed", "error", err.Error())
		}
	}
	if err := e.ReplyText(ctx, result); err != nil {
		return true, fmt.Errorf("chatops: reply: %w", err)
	}
	return true, nil
}

// operators are who may act on the channel named ch.
func (h *Handler) operators(ch string) []string {
	if ch == channel.Default {
		return h.cfg.Operators
	}
	return h.cfg.ChannelOperators[ch]
}

func (h *Handler) refuse(ctx context.Context, cmd postback.Command, who, why string) {
	h.cfg.Metrics.Count(MetricRefused, 1)
	h.cfg.Log.WarnContext(ctx, "chatops audit", "operator", who, "action", cmd.Action, "target", cmd.Target,
		"outcome", "refused", "reason", why)
}

// act carries the command out and describes the result for the reply.
func (h *Handler) act(ctx context.Context, cmd postback.Command) (string, error) {
	switch cmd.Action {
	case postback.Redrive:
		if h.cfg.Queues == nil || !slices.Contains(h.cfg.DLQs, cmd.Target) {
			return "", fmt.Errorf("%s is not a dead-letter queue this stack redrives", cmd.Target)
		}
		// Wait a little for the move to finish, so the reply can say so; a
		// long move goes on after the reply.
		wctx, cancel := context.WithTimeout(ctx, redriveWait)
		defer cancel()
		res, err := redrive.Run(wctx, h.cfg.Queues, cmd.Target, redrive.Options{Wait: true, PollEvery: 200 * time.Millisecond})
		switch {
		case err == nil:
			return fmt.Sprintf("Redrive of %s done: %d message(s) moved back to their source queue.", cmd.Target, res.Moved), nil
		case res.Status == "RUNNING" && errors.Is(err, context.DeadlineExceeded):
			return fmt.Sprintf("Redrive of %s started: its messages are moving back to their source queue.", cmd.Target), nil
		}
		return "", err
	case postback.Silence:
		if h.cfg.Silencer == nil {
			return "", errors.New("silencing is not available here")
		}
		until := h.cfg.Now().Add(SilenceFor)
		if err := h.cfg.Silencer.Silence(ctx, cmd.Target, until); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s silenced until %s UTC: its notifications resume then.", cmd.Target, until.UTC().Format("15:04")), nil
	case postback.Ack:
		return fmt.Sprintf("%s acknowledged at %s UTC.", cmd.Target, h.cfg.Now().UTC().Format("15:04")), nil
	case postback.ResendHeld:
		if h.cfg.Resend == nil {
			return "", errors.New("no held queue here")
		}
		rep, err := h.cfg.Resend(ctx)
		if err != nil && !errors.Is(err, held.ErrQuotaSpent) {
			return "", err
		}
		return "Resend held: " + rep.String() + ".", nil
	}
	return "", fmt.Errorf("unknown action %q", cmd.Action)
}

func actionName(a string) string {
	switch a {
	case postback.Redrive:
		return "Redrive"
	case postback.Silence:
		return "Silence"
	case postback.Ack:
		return "Acknowledge"
	case postback.ResendHeld:
		return "Resend held"
	}
	return a
}
