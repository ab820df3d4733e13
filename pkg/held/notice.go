package held

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/linegate/linegate/pkg/idempotency"
)

// KindHeld is the linegate-kind message attribute of a held notice on the
// ops topic. The notifier renders it as a card with a "Resend held" button;
// the AlertEmail subscription's filter policy lets exactly these notices
// (and quota notices) through, because LINE itself cannot carry them while
// the quota is spent.
const KindHeld = "held-results"

// AttributeKind is the SNS message attribute naming an ops message's kind
// (the same attribute crash reports carry).
const AttributeKind = "linegate-kind"

// publisher is the one SNS call a notice makes.
type publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// claimer is the idempotency store's once-only marker: the notice of a
// month is published by the first worker that claims it.
type claimer interface {
	Claim(ctx context.Context, key string, inProgressFor time.Duration) error
	Complete(ctx context.Context, key string, keepFor time.Duration) error
}

// noticeKeep is how long a month's marker lives: past the month's end.
const noticeKeep = 40 * 24 * time.Hour

// Notice tells the operator, once per month, that results are being held.
type Notice struct {
	Pub   publisher
	Topic string
	Once  claimer
	Log   *slog.Logger
}

// Tell publishes the month's held notice unless it was published already
// (marker "held-notice#YYYY-MM" in the idempotency table). Failures are
// logged: the held item itself is safe whatever happens here.
func (n Notice) Tell(ctx context.Context, it Item) {
	if n.Pub == nil || n.Topic == "" {
		return
	}
	log := n.Log
	if log == nil {
		log = slog.Default()
	}
	ctx = context.WithoutCancel(ctx)
	key := "held-notice#" + it.HeldAt.UTC().Format("2006-01")
	if n.Once != nil {
		switch err := n.Once.Claim(ctx, key, noticeKeep); {
		case errors.Is(err, idempotency.ErrCompleted), errors.Is(err, idempotency.ErrInProgress):
			return // told already this month
		case err != nil:
			log.ErrorContext(ctx, "held notice marker not claimed; notice not sent", "error", err.Error())
			return
		}
	}
	_, err := n.Pub.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(n.Topic),
		Subject:  aws.String("linegate: LINE's monthly message limit is reached; results are held"),
		Message:  aws.String(NoticeText(it.HeldAt)),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			AttributeKind: {DataType: aws.String("String"), StringValue: aws.String(KindHeld)},
		},
	})
	if err != nil {
		log.ErrorContext(ctx, "held notice not published", "error", err.Error())
		return
	}
	if n.Once != nil {
		if err := n.Once.Complete(ctx, key, noticeKeep); err != nil {
			log.WarnContext(ctx, "held notice marker not completed", "error", err.Error())
		}
	}
}

// NoticeText is the held notice, readable as an email and parsed by the
// notifier only for its kind.
func NoticeText(first time.Time) string {
	return fmt.Sprintf("LINE refused a push at %s: the channel's monthly message limit is reached.\n"+
		"The bot's pushed results are being held in the HeldQueue, not lost; replies still work.\n"+
		"When quota returns (raise the limit in LINE Official Account Manager, or wait for the new month), "+
		"run `linegate resend-held --stack STACK` or tap \"Resend held\" on the card in LINE.",
		first.UTC().Format(time.RFC3339))
}
