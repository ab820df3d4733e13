// Package pager wires what pages the operators: a LINE client with the
// function's token source and the alert renderer that pushes cards to the
// operators, with signed buttons when a ChatOps key is configured. The
// notifier (internal/compose/notifierfn) and the quota governor
// (internal/compose/quotafn) both page through it; it links no DynamoDB,
// SQS or SNS client.
package pager

import (
	"context"
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linetoken"
	"github.com/linegate/linegate/internal/postback"
)

// Operators says who gets cards and how: the LINE credentials, the
// operator IDs, their time zone, the key that signs the buttons, and the
// region of console links ("" for none).
type Operators struct {
	Auth     config.LineAuth
	IDs      []string
	TimeZone string
	ChatOps  config.ChatOps
	Region   string
}

// Cards builds what pushes cards to the operators (with signed buttons when
// a ChatOps key is configured) and the LINE client it pushes with. The
// notifier and the quota governor both page through it.
func Cards(ctx context.Context, o Operators, c compose.Common, extra ...alert.Option) (*alert.Notifier, *lineapi.Client, error) {
	c = c.WithDefaults()
	tokens, _, err := linetoken.FromConfig(ctx, o.Auth, c.SSM, c.HTTPClient, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("LINE credentials: %w", err)
	}
	line := lineapi.New("", lineapi.WithBaseURL(o.Auth.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens))
	n, err := CardsThrough(ctx, line, o, c, extra...)
	return n, line, err
}

// CardsThrough is Cards pushing through line, a client the caller made
// (of the channel the cards go out through: lineclients); o.Auth is not
// read.
func CardsThrough(ctx context.Context, line *lineapi.Client, o Operators, c compose.Common, extra ...alert.Option) (*alert.Notifier, error) {
	c = c.WithDefaults()
	loc, err := time.LoadLocation(o.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("operator time zone: %w", err)
	}
	opts := []alert.Option{alert.WithTimeZone(loc), alert.WithLogger(c.Logger), alert.WithMetrics(c.Metrics)}
	if o.Region != "" {
		opts = append(opts, alert.WithRegion(o.Region))
	}
	if o.ChatOps.Enabled() {
		signer, err := postback.FromConfig(ctx, o.ChatOps, c.SSM)
		if err != nil {
			return nil, err
		}
		opts = append(opts, alert.WithButtons(signer, o.ChatOps.TTL, o.ChatOps.DLQs))
	}
	return alert.New(line, o.IDs, append(opts, extra...)...)
}
