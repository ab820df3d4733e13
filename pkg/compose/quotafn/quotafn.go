// Package quotafn wires the quota governor: a LINE client with the
// function's token source, the alert renderer that pushes its cards to the
// operators (with the signed Resend held button when CHATOPS_KEY is set),
// and the HeldQueue's depth. functions/quota and `linegate local` both
// build the governor here. It links no DynamoDB, SNS or EventBridge client.
package quotafn

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/pkg/alert"
	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/linetoken"
	"github.com/linegate/linegate/pkg/postback"
	"github.com/linegate/linegate/pkg/quota"
)

// QueueDepth is the one SQS call the governor makes: the HeldQueue's depth.
type QueueDepth interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// New builds the governor; held may be nil (no HeldQueue).
func New(ctx context.Context, cfg config.Quota, held QueueDepth, c compose.Common) (*quota.Governor, error) {
	c = c.WithDefaults()
	tokens, _, err := linetoken.FromConfig(ctx, cfg.Auth, c.SSM, c.HTTPClient, nil)
	if err != nil {
		return nil, fmt.Errorf("quota secrets: %w", err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("quota time zone: %w", err)
	}
	line := lineapi.New("", lineapi.WithBaseURL(cfg.Auth.APIBaseURL), lineapi.WithLogger(c.Logger),
		lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens))
	opts := []alert.Option{alert.WithTimeZone(loc), alert.WithLogger(c.Logger), alert.WithMetrics(c.Metrics)}
	if cfg.ChatOps.Enabled() {
		signer, err := postback.FromConfig(ctx, cfg.ChatOps, c.SSM)
		if err != nil {
			return nil, err
		}
		opts = append(opts, alert.WithButtons(signer, cfg.ChatOps.TTL, cfg.ChatOps.DLQs))
	}
	cards, err := alert.New(line, cfg.Operators, opts...)
	if err != nil {
		return nil, err
	}
	g := &quota.Governor{Line: line, Cards: cards, HeldURL: cfg.HeldQueueURL, WarnPercent: cfg.WarnPercent,
		AlarmPercent: cfg.AlarmPercent, Loc: loc, Log: c.Logger, Metrics: c.Metrics}
	if held != nil {
		g.Held = held
	}
	return g, nil
}
