package held

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/lineapi"
)

// queue is the SQS calls a resend makes on the HeldQueue.
type queue interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Pusher is the one LINE call a resend makes (lineapi.Client).
type Pusher interface {
	Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error
}

// Pushers gives the client a channel's held items are resent through (its
// own token: a channel's pushes count against its own quota); false for a
// channel the caller has no client for.
type Pushers func(ch string) (Pusher, bool)

// Report is what one resend did.
type Report struct {
	// Sent items were pushed (or LINE already had them: 409) and deleted.
	Sent int
	// Kept items stay held: the quota is still spent, or the push failed.
	Kept int
	// Malformed items could not be read; they stay in the queue for a person.
	Malformed int
	// QuotaSpent is true when LINE still refused for the monthly limit: the
	// resend stopped there (for that channel).
	QuotaSpent bool
	// Spent names the channels whose limit LINE still answered with
	// (channel.Label: "default" for the default channel).
	Spent []string
}

// String is the one-line summary the CLI and the ChatOps reply print.
func (r Report) String() string {
	s := fmt.Sprintf("%d held result(s) sent, %d still held", r.Sent, r.Kept)
	if r.Malformed > 0 {
		s += fmt.Sprintf(", %d unreadable", r.Malformed)
	}
	if r.QuotaSpent {
		s += " (LINE still answers: monthly limit reached"
		if len(r.Spent) > 1 || (len(r.Spent) == 1 && r.Spent[0] != channel.DefaultLabel) {
			s += " for " + strings.Join(r.Spent, ", ")
		}
		s += ")"
	}
	return s
}

// ErrQuotaSpent is returned by Resend when LINE refused a held push for the
// monthly limit again: nothing more is tried until quota returns.
var ErrQuotaSpent = errors.New("held: the monthly message limit is still reached")

// Resend pushes up to max held items (0: all that can be received) from the
// queue at url through p, oldest first as SQS hands them out: the default
// channel's items (ResendChannels for a stack with several channels). Each
// sent item is deleted; an item LINE refuses again for the monthly limit is
// put back at once and the resend stops (ErrQuotaSpent); an item that fails
// otherwise stays held (it becomes visible again after the queue's
// visibility timeout). Nothing is ever deleted unsent.
func Resend(ctx context.Context, q queue, url string, p Pusher, max int, log *slog.Logger) (Report, error) {
	return ResendChannels(ctx, q, url, func(ch string) (Pusher, bool) { return p, ch == channel.Default }, max, log)
}

// ResendChannels is Resend for the held items of every channel, each
// pushed through its channel's client (pushers). A channel whose limit LINE
// still answers with is spent for the rest of the run: its items are put
// back at the run's end, untried, and the others' go on (those received
// in the same batch as a spent channel's included); the run stops after a
// batch that brought no channel it had not met while every channel it met
// is spent. An item of a channel pushers has no client for stays held, as
// a failed push does.
func ResendChannels(ctx context.Context, q queue, url string, pushers Pushers, max int, log *slog.Logger) (Report, error) {
	if log == nil {
		log = slog.Default()
	}
	var rep Report
	var failures []error
	spent := map[string]bool{}
	met := map[string]bool{}
	var putBack []sqstypes.Message // a spent channel's items: released when the run ends
	defer func() { release(ctx, q, url, putBack...) }()
	done := func() int { return rep.Sent + rep.Kept + rep.Malformed }
	allSpent := func() bool { return len(spent) > 0 && len(spent) == len(met) }
	for max <= 0 || done() < max {
		n := int32(10)
		if max > 0 {
			n = int32(min(10, max-done()))
		}
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: n, WaitTimeSeconds: 0})
		if err != nil {
			return rep, fmt.Errorf("held: receive from the held queue: %w", err)
		}
		if len(out.Messages) == 0 {
			break
		}
		newChannel := false // the batch held an item of a channel not met before
		for _, m := range out.Messages {
			it, err := Parse([]byte(aws.ToString(m.Body)))
			if err != nil {
				rep.Malformed++
				log.ErrorContext(ctx, "held item unreadable; left in the queue", "messageId", aws.ToString(m.MessageId), "error", err.Error())
				continue
			}
			if !met[it.Channel] {
				met[it.Channel], newChannel = true, true
			}
			if spent[it.Channel] {
				rep.Kept++
				putBack = append(putBack, m)
				continue
			}
			p, ok := pushers(it.Channel)
			if !ok {
				rep.Kept++
				failures = append(failures, fmt.Errorf("held item for event %s: %w: %q", it.WebhookEventID, channel.ErrUnknown, it.Channel))
				continue
			}
			err = p.Push(ctx, it.To, it.RetryKey, it.messages()...)
			switch {
			case errors.Is(err, lineapi.ErrMonthlyLimit):
				spent[it.Channel] = true
				rep.QuotaSpent = true
				rep.Spent = append(rep.Spent, channel.Label(it.Channel))
				rep.Kept++
				putBack = append(putBack, m)
			case err != nil:
				rep.Kept++
				failures = append(failures, fmt.Errorf("held item for event %s: %w", it.WebhookEventID, err))
			default:
				if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
					// Sent but not deleted: the next resend pushes it with the
					// same retry key, which LINE answers 409 within 24 h.
					failures = append(failures, fmt.Errorf("delete sent held item: %w", err))
				}
				rep.Sent++
				log.InfoContext(ctx, "held result sent", "webhookEventId", it.WebhookEventID, "retryKey", it.RetryKey, "channel", channel.Label(it.Channel))
			}
		}
		if allSpent() && !newChannel {
			break // a batch of spent channels' items only: the rest of the queue is likely theirs too
		}
	}
	if rep.QuotaSpent {
		return rep, ErrQuotaSpent
	}
	return rep, errors.Join(failures...)
}

// release makes received messages visible again at once.
func release(ctx context.Context, q queue, url string, msgs ...sqstypes.Message) {
	for _, m := range msgs {
		_, _ = q.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
}
