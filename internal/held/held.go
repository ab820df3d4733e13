// Package held keeps what LINE refused to push because the month's message
// quota is spent (429 "You have reached your monthly limit."), and sends it
// when quota returns. A refused push is not an error of the handler: it is
// written durably to the HeldQueue (SQS) with its recipient, its retry key
// and its messages exactly as they would have been sent, the record that
// made it completes with outcome "held" (no retries, no dead letter, no
// alarm storm), and the operator is told once a month. Resend (the CLI's
// `linegate resend-held`, the "Resend held" button, the quota governor)
// pushes each held item again with its original retry key, so an item is
// delivered once even when a resend is repeated.
package held

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/telemetry"
)

// Item is one held push, the body of one HeldQueue message.
type Item struct {
	// To is the user, group or room the push was for.
	To string `json:"to"`
	// RetryKey is the push's X-Line-Retry-Key; the resend uses it again.
	RetryKey string `json:"retryKey,omitempty"`
	// WebhookEventID names the event whose handler pushed.
	WebhookEventID string `json:"webhookEventId,omitempty"`
	// Messages are the message objects as they would have been sent.
	Messages []json.RawMessage `json:"messages"`
	// HeldAt is when LINE refused the push.
	HeldAt time.Time `json:"heldAt"`
	// Channel is the channel whose quota refused the push and whose token
	// resends it ("" for the default channel).
	Channel string `json:"channel,omitempty"`
}

// ErrMalformed marks a HeldQueue message that is not an Item.
var ErrMalformed = errors.New("held: malformed held item")

// Parse reads a HeldQueue message body.
func Parse(body []byte) (Item, error) {
	var it Item
	if err := json.Unmarshal(body, &it); err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if it.To == "" || len(it.Messages) < 1 || len(it.Messages) > lineapi.MaxMessages {
		return Item{}, fmt.Errorf("%w: want a recipient and 1 to %d messages", ErrMalformed, lineapi.MaxMessages)
	}
	for i, m := range it.Messages {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m, &head) != nil || head.Type == "" {
			return Item{}, fmt.Errorf("%w: message %d has no type", ErrMalformed, i)
		}
	}
	return it, nil
}

// Raw is a message object kept as JSON: it goes back to LINE byte for byte.
type Raw json.RawMessage

// GetType reads the message's type (messaging_api.MessageInterface).
func (r Raw) GetType() string {
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(r, &head)
	return head.Type
}

// MarshalJSON returns the message as it was held.
func (r Raw) MarshalJSON() ([]byte, error) { return json.RawMessage(r).MarshalJSON() }

// messages turns held JSON back into messages to push.
func (it Item) messages() []messaging_api.MessageInterface {
	out := make([]messaging_api.MessageInterface, len(it.Messages))
	for i, m := range it.Messages {
		out[i] = Raw(m)
	}
	return out
}

// queueSender is the one SQS call holding makes.
type queueSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Holder writes refused pushes to the HeldQueue.
type Holder struct {
	q      queueSender
	url    string
	now    func() time.Time
	log    *slog.Logger
	onHeld func(ctx context.Context, it Item)
}

// Option configures a Holder.
type Option func(*Holder)

// WithClock sets the clock of HeldAt (tests).
func WithClock(now func() time.Time) Option { return func(h *Holder) { h.now = now } }

// WithLogger sets the logger (default slog.Default()). Message text is
// never logged.
func WithLogger(l *slog.Logger) Option { return func(h *Holder) { h.log = l } }

// WithOnHeld is called after each item is held: the worker marks the
// record's outcome and tells the operator (once a month).
func WithOnHeld(f func(ctx context.Context, it Item)) Option { return func(h *Holder) { h.onHeld = f } }

// NewHolder returns a Holder writing to the queue at url.
func NewHolder(q queueSender, url string, opts ...Option) *Holder {
	h := &Holder{q: q, url: url, now: time.Now, log: slog.Default(), onHeld: func(context.Context, Item) {}}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Hold writes msgs for to, with retryKey, to the HeldQueue, as a push of
// the default channel. An error means the push is neither sent nor held:
// the caller must fail (and retry).
func (h *Holder) Hold(ctx context.Context, webhookEventID, to, retryKey string, msgs []messaging_api.MessageInterface) error {
	return h.hold(ctx, channel.Default, webhookEventID, to, retryKey, msgs)
}

// hold is Hold for a push of channel ch.
func (h *Holder) hold(ctx context.Context, ch, webhookEventID, to, retryKey string, msgs []messaging_api.MessageInterface) error {
	it := Item{To: to, RetryKey: retryKey, WebhookEventID: webhookEventID, HeldAt: h.now().UTC(), Channel: ch}
	// Encode the messages as the push request would have: the SDK's request
	// type adds each message's type discriminator.
	req, err := json.Marshal(&messaging_api.PushMessageRequest{To: to, Messages: msgs})
	if err != nil {
		return fmt.Errorf("held: encode messages: %w", err)
	}
	var decoded struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(req, &decoded); err != nil {
		return fmt.Errorf("held: encode messages: %w", err)
	}
	it.Messages = decoded.Messages
	body, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("held: %w", err)
	}
	if _, err := h.q.SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{QueueUrl: aws.String(h.url), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("held: write to the held queue: %w", err)
	}
	h.log.WarnContext(ctx, "push held: LINE's monthly message limit is reached", "webhookEventId", webhookEventID,
		"messages", len(msgs), "retryKey", retryKey, "channel", channel.Label(ch))
	h.onHeld(ctx, it)
	return nil
}

// messenger is what a bot handler sends through (bot.Messenger).
type messenger interface {
	Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error)
	Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error
	ShowLoading(ctx context.Context, chatID string, seconds int) error
	MarkAsRead(ctx context.Context, markAsReadToken string) error
}

// Wrap returns a messenger that holds, instead of failing, a push LINE
// refuses for the monthly limit. The held item names the event in the
// context (telemetry.WithEventID). m is the default channel's client.
func (h *Holder) Wrap(m messenger) messenger { return h.WrapChannel(channel.Default, m) }

// WrapChannel is Wrap for m, a client of channel ch: the items it holds
// are ch's, resent through ch's token (Resend's pushers).
func (h *Holder) WrapChannel(ch string, m messenger) messenger {
	return holding{next: m, h: h, channel: ch}
}

type holding struct {
	next    messenger
	h       *Holder
	channel string
}

func (w holding) Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	via, err := w.next.Send(ctx, t, msgs...)
	if !errors.Is(err, lineapi.ErrMonthlyLimit) {
		return via, err
	}
	key := ""
	if t.WebhookEventID != "" {
		key = lineapi.ChannelRetryKey(t.Channel, t.WebhookEventID, t.Index)
	}
	if herr := w.h.hold(ctx, w.channel, telemetry.EventID(ctx), t.To, key, msgs); herr != nil {
		return via, errors.Join(err, herr)
	}
	return lineapi.ViaPush, nil
}

func (w holding) Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error {
	err := w.next.Push(ctx, to, retryKey, msgs...)
	if !errors.Is(err, lineapi.ErrMonthlyLimit) {
		return err
	}
	if herr := w.h.hold(ctx, w.channel, telemetry.EventID(ctx), to, retryKey, msgs); herr != nil {
		return errors.Join(err, herr)
	}
	return nil
}

func (w holding) ShowLoading(ctx context.Context, chatID string, seconds int) error {
	return w.next.ShowLoading(ctx, chatID, seconds)
}

func (w holding) MarkAsRead(ctx context.Context, markAsReadToken string) error {
	return w.next.MarkAsRead(ctx, markAsReadToken)
}
