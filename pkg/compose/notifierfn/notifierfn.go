// Package notifierfn wires the notifier function: the access token from
// SSM, a LINE client, and the alert core that turns ops queue batches into cards
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
	"github.com/linegate/linegate/pkg/secrets"
)

// New resolves the access token and builds the notifier; region makes the
// cards' console links point at the right CloudWatch and X-Ray consoles.
func New(ctx context.Context, cfg config.Notifier, region string, c compose.Common) (*alert.Notifier, error) {
	c = c.WithDefaults()
	vals, err := secrets.Resolve(ctx, c.SSM, cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("notifier secrets: %w", err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("notifier time zone: %w", err)
	}
	line := lineapi.New(vals[0], lineapi.WithBaseURL(cfg.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient))
	opts := []alert.Option{alert.WithTimeZone(loc), alert.WithLogger(c.Logger), alert.WithMetrics(c.Metrics)}
	if region != "" {
		opts = append(opts, alert.WithRegion(region))
	}
	return alert.New(line, cfg.Operators, opts...)
}
