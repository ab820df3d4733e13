// Package quotafn wires the quota governor: a LINE client with the
// function's token source and the alert renderer that pushes its cards to
// the operators (both as the notifier builds them, with the signed Resend
// held button when CHATOPS_KEY is set), and the HeldQueue's depth. functions/quota and `linegate local` both
// build the governor here. It links no DynamoDB, SNS or EventBridge client.
package quotafn

import (
	"context"
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/pager"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/quota"
)

// New builds the governor; held may be nil (no HeldQueue). Its cards go
// out the way the notifier's do (pager.Cards).
func New(ctx context.Context, cfg config.Quota, held quota.HeldQueue, c compose.Common) (*quota.Governor, error) {
	c = c.WithDefaults()
	cards, line, err := pager.Cards(ctx, pager.Operators{Auth: cfg.Auth, IDs: cfg.Operators, TimeZone: cfg.TimeZone, ChatOps: cfg.ChatOps}, c)
	if err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	loc, _ := time.LoadLocation(cfg.TimeZone) // Cards loaded it already
	g := &quota.Governor{Line: line, Cards: cards, HeldURL: cfg.HeldQueueURL, WarnPercent: cfg.WarnPercent,
		AlarmPercent: cfg.AlarmPercent, Loc: loc, Log: c.Logger, Metrics: c.Metrics}
	if held != nil {
		g.Held = held
	}
	return g, nil
}
