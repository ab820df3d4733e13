// Package quotafn wires the quota governor: for each channel, a LINE
// client with the channel's token source and the alert renderer that
// pushes its cards to the operators (both as the notifier builds them,
// with the signed Resend held button when CHATOPS_KEY is set), and, for
// the default channel, the HeldQueue's depth. functions/quota and
// `linegate local` both build the governor here. It links no DynamoDB, SNS
// or EventBridge client.
package quotafn

import (
	"context"
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/lineclients"
	"github.com/linegate/linegate/internal/compose/pager"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/quota"
	"github.com/linegate/linegate/internal/telemetry"
)

// New builds a governor per channel; held may be nil (no HeldQueue). Their
// cards go out the way the notifier's do (pager.Cards): the default
// channel's to OPERATOR_LINE_IDS, a named channel's to its own operators
// through its own token, or, when it has none, to OPERATOR_LINE_IDS
// through the default channel. A named channel's metrics carry the
// Channel dimension, and its QuotaExhausted also counts in the stack's
// (the quota-exhausted alarm takes the maximum: any channel's spent
// quota escalates).
func New(ctx context.Context, cfg config.Quota, held quota.HeldQueue, c compose.Common) (*quota.Governors, error) {
	c = c.WithDefaults()
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("quota: operator time zone: %w", err)
	}
	clients, _, err := lineclients.New(ctx, cfg.Auth, cfg.Channels, c)
	if err != nil {
		return nil, fmt.Errorf("quota: LINE credentials: %w", err)
	}
	operators, err := lineclients.Operators(ctx, cfg.Channels, c.SSM)
	if err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	stackOperators := pager.Operators{IDs: cfg.Operators, TimeZone: cfg.TimeZone, ChatOps: cfg.ChatOps}
	govern := func(ch string, m telemetry.Recorder) (*quota.Governor, error) {
		// The channel's quota is read with its own token; its cards go to
		// its own operators through it, else to the stack's through the
		// default channel.
		reader, _ := clients.For(ch)
		through, o := clients.Default(), stackOperators
		if ids := operators[ch]; len(ids) > 0 {
			through, o = reader, pager.Operators{IDs: ids, TimeZone: cfg.TimeZone, ChatOps: cfg.ChatOps}
		}
		cards, err := pager.CardsThrough(ctx, through, o, c)
		if err != nil {
			if ch != "" {
				return nil, fmt.Errorf("quota: channel %s: %w", ch, err)
			}
			return nil, fmt.Errorf("quota: %w", err)
		}
		return &quota.Governor{Channel: ch, Line: reader, Cards: cards, WarnPercent: cfg.WarnPercent,
			AlarmPercent: cfg.AlarmPercent, Loc: loc, Log: c.Logger, Metrics: m}, nil
	}
	def, err := govern("", c.Metrics)
	if err != nil {
		return nil, err
	}
	def.HeldURL = cfg.HeldQueueURL
	if held != nil {
		def.Held = held
	}
	gs := &quota.Governors{Default: def}
	for _, name := range clients.Named() {
		g, err := govern(name, channelMetrics(c.Metrics, name))
		if err != nil {
			return nil, err
		}
		gs.Named = append(gs.Named, g)
	}
	return gs, nil
}

// channelMetrics records a named channel's quota metrics under the
// Channel dimension (when stack records EMF), and its QuotaExhausted in
// stack's as well.
func channelMetrics(stack telemetry.Recorder, ch string) telemetry.Recorder {
	own := stack
	if m, ok := stack.(*telemetry.Metrics); ok {
		own = m.With("Channel", ch)
	}
	return exhaustedToo{Recorder: own, stack: stack}
}

// exhaustedToo is a channel's recorder that also counts QuotaExhausted in
// the stack's metrics.
type exhaustedToo struct {
	telemetry.Recorder
	stack telemetry.Recorder
}

func (r exhaustedToo) Count(name string, n float64) {
	r.Recorder.Count(name, n)
	if name == quota.MetricExhausted && r.Recorder != r.stack {
		r.stack.Count(name, n)
	}
}
