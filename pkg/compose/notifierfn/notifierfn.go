// Package notifierfn wires the notifier function: the access token from
// SSM, a LINE client, and the alert core that turns SNS records into cards
// for the operators. functions/notifier and `linegate local` both build the
// notifier here.
package notifierfn

import (
	"context"
	"fmt"
	"time"

	"github.com/linegate/linegate/pkg/alert"
	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/linetoken"
	"github.com/linegate/linegate/pkg/postback"
)

// New resolves the access token and builds the notifier; region makes the
// cards' console links point at the right CloudWatch and X-Ray consoles.
func New(ctx context.Context, cfg config.Notifier, region string, c compose.Common) (*alert.Notifier, error) {
	c = c.WithDefaults()
	tokens, _, err := linetoken.FromConfig(ctx, cfg.Auth, c.SSM, c.HTTPClient, nil)
	if err != nil {
		return nil, fmt.Errorf("notifier secrets: %w", err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("notifier time zone: %w", err)
	}
	line := lineapi.New("", lineapi.WithBaseURL(cfg.Auth.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens))
	opts := []alert.Option{alert.WithTimeZone(loc), alert.WithLogger(c.Logger), alert.WithMetrics(c.Metrics)}
	if region != "" {
		opts = append(opts, alert.WithRegion(region))
	}
	if cfg.ChatOps.Enabled() {
		signer, err := postback.FromConfig(ctx, cfg.ChatOps, c.SSM)
		if err != nil {
			return nil, err
		}
		opts = append(opts, alert.WithButtons(signer, cfg.ChatOps.TTL, cfg.ChatOps.DLQs))
	}
	return alert.New(line, cfg.Operators, opts...)
}

