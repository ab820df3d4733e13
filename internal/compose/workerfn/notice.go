package workerfn

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/idempotency"
)

// noticeKeep is how long a month's marker lives: past the month's end.
const noticeKeep = 40 * 24 * time.Hour

// heldNotice tells the operator, once per month and channel, that results
// are being held: it publishes held.NoticeText on the ops topic (attribute
// linegate-kind = held.KindHeld) after claiming the month's marker in the
// idempotency table, so however many workers hold results, one notice goes.
type heldNotice struct {
	pub   TopicPublisher
	topic string
	once  idempotency.Store
	log   *slog.Logger
}

// tell publishes the month's notice unless it was published already.
// Failures are logged: the held item itself is safe whatever happens here.
func (n heldNotice) tell(ctx context.Context, it held.Item) {
	if n.pub == nil || n.topic == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	key := held.ChannelNoticeKey(it.Channel, it.HeldAt)
	if n.once != nil {
		switch err := n.once.Claim(ctx, key, noticeKeep); {
		case errors.Is(err, idempotency.ErrCompleted), errors.Is(err, idempotency.ErrInProgress):
			return // told already this month
		case err != nil:
			n.log.ErrorContext(ctx, "held notice marker not claimed; notice not sent", "error", err.Error())
			return
		}
	}
	_, err := n.pub.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(n.topic),
		Subject:  aws.String("linegate: LINE's monthly message limit is reached; results are held"),
		Message:  aws.String(held.ChannelNoticeText(it.Channel, it.HeldAt)),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			held.AttributeKind: {DataType: aws.String("String"), StringValue: aws.String(held.KindHeld)},
		},
	})
	if err != nil {
		n.log.ErrorContext(ctx, "held notice not published", "error", err.Error())
		return
	}
	if n.once != nil {
		if err := n.once.Complete(ctx, key, noticeKeep); err != nil {
			n.log.WarnContext(ctx, "held notice marker not completed", "error", err.Error())
		}
	}
}
