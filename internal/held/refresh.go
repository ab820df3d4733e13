package held

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// RefreshAge is how old a held item may get before Refresh writes it anew:
// well inside SQS's 14-day retention, while a month's quota can stay spent
// for up to a month.
const RefreshAge = 7 * 24 * time.Hour

// RefreshQueue is the SQS calls a refresh makes.
type RefreshQueue interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Refresh keeps held items alive past SQS's retention: every item in the
// queue at url older than olderThan is written again (same body, a new
// message) and only then deleted, so a result held at the start of a month
// still exists at its end. It looks at up to max items per call (each seen
// item stays invisible for a minute, so one call sees each item once) and
// returns how many it refreshed. The quota governor calls it on each run.
func Refresh(ctx context.Context, q RefreshQueue, url string, olderThan time.Duration, max int, now time.Time) (int, error) {
	refreshed, seen := 0, 0
	for seen < max {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: int32(min(10, max-seen)),
			VisibilityTimeout: 60, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
		if err != nil {
			return refreshed, fmt.Errorf("held: refresh: receive: %w", err)
		}
		if len(out.Messages) == 0 {
			return refreshed, nil
		}
		for _, m := range out.Messages {
			seen++
			ms, _ := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
			if now.Sub(time.UnixMilli(ms)) < olderThan {
				continue // visible again in a minute, for a resend
			}
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: m.Body}); err != nil {
				return refreshed, fmt.Errorf("held: refresh: write anew: %w", err)
			}
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				// Two copies now: a resend pushes both with one retry key,
				// and LINE answers 409 to the second.
				return refreshed, fmt.Errorf("held: refresh: delete the old copy: %w", err)
			}
			refreshed++
		}
	}
	return refreshed, nil
}
