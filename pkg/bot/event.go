// Package bot is the API a bot author writes against: a router that sends each
// LINE event to the handler registered for it, and an Event that can reply,
// push and show the loading animation without the author thinking about reply
// token expiry, retries or duplicate sends.
package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/lineapi"
)

// SourceType says where an event came from.
type SourceType string

// The chat kinds LINE delivers events from.
const (
	SourceUser  SourceType = "user"
	SourceGroup SourceType = "group"
	SourceRoom  SourceType = "room"
)

// Source is the chat an event came from. ChatID is where a push goes to
// answer in the same chat: the group or room when there is one, else the user.
type Source struct {
	Type    SourceType
	UserID  string // may be empty in groups when the user has not consented
	GroupID string
	RoomID  string
}

// ChatID returns the ID to push to for answering in the same chat.
func (s Source) ChatID() string {
	switch {
	case s.GroupID != "":
		return s.GroupID
	case s.RoomID != "":
		return s.RoomID
	default:
		return s.UserID
	}
}

// Messenger sends messages on behalf of one event; lineapi.Client satisfies
// it. One is created per record: the SDK client is not goroutine-safe.
type Messenger interface {
	Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error)
	Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error
	ShowLoading(ctx context.Context, chatID string, seconds int) error
	MarkAsRead(ctx context.Context, markAsReadToken string) error
}

// ErrNoMessenger is returned by Reply/Push when the event has no messenger
// (a bot run without LINE credentials).
var ErrNoMessenger = errors.New("bot: no LINE messenger configured")

// ErrNoReadToken is returned by MarkAsRead for an event whose message
// carries no markAsReadToken (not a message event, or a body from before
// LINE added the token on 2025-11-05).
var ErrNoReadToken = errors.New("bot: the event carries no markAsReadToken")

// ErrStandby is returned by Reply/Push for an event in standby mode: another
// channel answers in that chat.
var ErrStandby = errors.New("bot: event is in standby mode; not answering")

// Event is one LINE webhook event as a handler sees it.
type Event struct {
	Type           string                 // the event's type: message, follow, postback, … (also unknown, future ones)
	WebhookEventID string                 // stable across LINE redeliveries
	Mode           string                 // active or standby
	Redelivery     bool                   // deliveryContext.isRedelivery
	Timestamp      time.Time              // when LINE says the event happened
	ReceivedAt     time.Time              // when the webhook accepted it
	Source         Source                 // the chat it came from
	ReplyToken     string                 // single use, valid about a minute; Reply uses it for you
	Destination    string                 // the bot's user ID
	Typed          webhook.EventInterface // the SDK's typed event (webhook.MessageEvent, webhook.FollowEvent, …; webhook.UnknownEvent for new types)
	Raw            json.RawMessage        // the event exactly as LINE sent it

	messenger Messenger
	batch     []*Event // BindBatch: a debounced burst, this event last
	sends     atomic.Int32
	steps     Steps        // Once's store; bound by the worker
	sessions  SessionStore // Session's store; bound by the worker
}

// head is the part of the raw event the router needs without the SDK.
type head struct {
	Type            string `json:"type"`
	Mode            string `json:"mode"`
	Timestamp       int64  `json:"timestamp"`
	WebhookEventID  string `json:"webhookEventId"`
	ReplyToken      string `json:"replyToken"`
	DeliveryContext struct {
		IsRedelivery bool `json:"isRedelivery"`
	} `json:"deliveryContext"`
	Source struct {
		Type    string `json:"type"`
		UserID  string `json:"userId"`
		GroupID string `json:"groupId"`
		RoomID  string `json:"roomId"`
	} `json:"source"`
}

// ErrEvent marks a raw event that cannot be decoded: retrying will not help.
var ErrEvent = errors.New("bot: malformed event")

// Head is what can be known of an event without the SDK's full decoding:
// enough to deduplicate it before paying for the rest.
type Head struct {
	Type           string
	WebhookEventID string
	SourceType     SourceType
}

// Peek reads an event's type, webhookEventId and source type with
// encoding/json, without the SDK's full decoding: enough to deduplicate it.
func Peek(raw json.RawMessage) (Head, error) {
	h, err := readHead(raw)
	if err != nil {
		return Head{}, err
	}
	return Head{Type: h.Type, WebhookEventID: h.WebhookEventID, SourceType: SourceType(h.Source.Type)}, nil
}

// readHead decodes the head of a raw event, which must have a type.
func readHead(raw json.RawMessage) (head, error) {
	var h head
	if err := json.Unmarshal(raw, &h); err != nil {
		return head{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	if h.Type == "" {
		return head{}, fmt.Errorf("%w: no type", ErrEvent)
	}
	return h, nil
}

// Parse decodes a raw LINE event into an Event bound to m (which may be
// nil): its head with encoding/json, its typed event with the SDK
// (webhook.UnmarshalEvent; webhook.UnknownEvent for types the SDK does not
// know). Every error wraps ErrEvent.
func Parse(raw json.RawMessage, destination string, receivedAt time.Time, m Messenger) (*Event, error) {
	h, err := readHead(raw)
	if err != nil {
		return nil, err
	}
	typed, err := webhook.UnmarshalEvent(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrEvent, h.Type, err)
	}
	return &Event{
		Type:           h.Type,
		WebhookEventID: h.WebhookEventID,
		Mode:           h.Mode,
		Redelivery:     h.DeliveryContext.IsRedelivery,
		Timestamp:      time.UnixMilli(h.Timestamp),
		ReceivedAt:     receivedAt,
		Source:         Source{Type: SourceType(h.Source.Type), UserID: h.Source.UserID, GroupID: h.Source.GroupID, RoomID: h.Source.RoomID},
		ReplyToken:     h.ReplyToken,
		Destination:    destination,
		Typed:          typed,
		Raw:            raw,
		messenger:      m,
	}, nil
}

// Bind attaches the messenger Reply, Push and ShowLoading use. The worker
// binds one per record after the record's claim, so duplicates never build a
// LINE client.
func (e *Event) Bind(m Messenger) { e.messenger = m }

// Batch returns the events this handler call handles, oldest first, the
// last being e itself: for a route registered with Debounce, every event
// of the chat's burst; for any other, e alone. A handler answers the batch
// through e (the newest: its reply token is the freshest); the others'
// texts, sources and timestamps are theirs.
func (e *Event) Batch() []*Event {
	if len(e.batch) == 0 {
		return []*Event{e}
	}
	return slices.Clone(e.batch)
}

// BindBatch makes events the batch e handles (Batch). The worker binds a
// debounced burst to its newest event, which must be events' last; an
// empty events unbinds.
func (e *Event) BindBatch(events []*Event) { e.batch = slices.Clone(events) }

// Standby reports whether another channel is answering in this chat.
func (e *Event) Standby() bool { return e.Mode == "standby" }

// Text returns the text of a text message event.
func (e *Event) Text() (string, bool) {
	if m, ok := e.Typed.(webhook.MessageEvent); ok {
		if t, ok := m.Message.(webhook.TextMessageContent); ok {
			return t.Text, true
		}
	}
	return "", false
}

// editedText is the text of an edited text message (messageEdited).
func (e *Event) editedText() string {
	if m, ok := e.Typed.(webhook.MessageEditedEvent); ok {
		if t, ok := m.Message.(webhook.TextMessageContent); ok {
			return t.Text
		}
	}
	return ""
}

// PostbackData returns the data of a postback event.
func (e *Event) PostbackData() (string, bool) {
	if p, ok := e.Typed.(webhook.PostbackEvent); ok && p.Postback != nil {
		return p.Postback.Data, true
	}
	return "", false
}

// Reply answers in the chat the event came from: with the reply token while
// it is fresh, otherwise (or when LINE refuses the token) with a push whose
// retry key is derived from the webhookEventId and how many sends this event
// made before, so a retried record never sends the same message twice.
// Replies are free and pushes count against the month's quota, so messages
// are packed five to a request: more than five go as one reply (while the
// token is fresh) and then pushes of up to five each.
func (e *Event) Reply(ctx context.Context, msgs ...messaging_api.MessageInterface) error {
	if err := e.canSend(); err != nil {
		return err
	}
	for _, pack := range packs(msgs) {
		idx := int(e.sends.Add(1) - 1)
		_, err := e.messenger.Send(ctx, lineapi.Target{
			ReplyToken: e.ReplyToken, EventTime: e.Timestamp, To: e.Source.ChatID(),
			WebhookEventID: e.WebhookEventID, Index: idx,
		}, pack...)
		if err != nil {
			return fmt.Errorf("reply: %w", err)
		}
		// A reply token is single use: later sends of this event must push.
		e.ReplyToken = ""
	}
	return nil
}

// packs splits msgs into requests of at most lineapi.MaxMessages (one
// empty pack for no messages, which the client refuses).
func packs(msgs []messaging_api.MessageInterface) [][]messaging_api.MessageInterface {
	if len(msgs) <= lineapi.MaxMessages {
		return [][]messaging_api.MessageInterface{msgs}
	}
	var out [][]messaging_api.MessageInterface
	for i := 0; i < len(msgs); i += lineapi.MaxMessages {
		out = append(out, msgs[i:min(i+lineapi.MaxMessages, len(msgs))])
	}
	return out
}

// ReplyText is Reply with text messages.
func (e *Event) ReplyText(ctx context.Context, texts ...string) error {
	return e.Reply(ctx, textMessages(texts)...)
}

func textMessages(texts []string) []messaging_api.MessageInterface {
	msgs := make([]messaging_api.MessageInterface, len(texts))
	for i, t := range texts {
		msgs[i] = messaging_api.TextMessage{Text: t}
	}
	return msgs
}

// Push sends to any user, group or room, with a retry key derived from this
// event, so a retried record does not send twice. Up to five messages go in
// one push (a push counts once against the quota whatever it carries);
// more are packed five to a push.
func (e *Event) Push(ctx context.Context, to string, msgs ...messaging_api.MessageInterface) error {
	if err := e.canSend(); err != nil {
		return err
	}
	for _, pack := range packs(msgs) {
		idx := int(e.sends.Add(1) - 1)
		if err := e.messenger.Push(ctx, to, lineapi.RetryKey(e.WebhookEventID, idx), pack...); err != nil {
			return fmt.Errorf("push: %w", err)
		}
	}
	return nil
}

// PushText is Push with text messages.
func (e *Event) PushText(ctx context.Context, to string, texts ...string) error {
	return e.Push(ctx, to, textMessages(texts)...)
}

// ShowLoading shows the loading animation in a one-to-one chat for up to
// seconds (5–60). LINE shows it only in chats with users; elsewhere it is a
// no-op.
func (e *Event) ShowLoading(ctx context.Context, seconds int) error {
	if err := e.canSend(); err != nil {
		return err
	}
	if e.Source.Type != SourceUser || e.Source.UserID == "" {
		return nil
	}
	if err := e.messenger.ShowLoading(ctx, e.Source.UserID, seconds); err != nil {
		return fmt.Errorf("show loading: %w", err)
	}
	return nil
}

// MarkAsRead shows "Read" on the user's messages in this event's chat, up
// to and including this event's message, by the message's markAsReadToken
// (POST /v2/bot/chat/markAsRead). LINE marks messages read by itself unless
// the channel's Chat setting is on; with it on, a bot that has seen a
// message says so with MarkAsRead. It fails with ErrNoReadToken when the
// event carries no token, ErrStandby in standby, ErrNoMessenger without a
// LINE client. Marking again changes nothing, so a retried handler may call
// it again.
func (e *Event) MarkAsRead(ctx context.Context) error {
	if err := e.canSend(); err != nil {
		return err
	}
	tok := e.readToken()
	if tok == "" {
		return ErrNoReadToken
	}
	if err := e.messenger.MarkAsRead(ctx, tok); err != nil {
		return fmt.Errorf("mark as read: %w", err)
	}
	return nil
}

// readToken is the markAsReadToken of the event's message: the typed
// event's for a text, else read from the raw event (LINE puts one in every
// message content type).
func (e *Event) readToken() string {
	if m, ok := e.Typed.(webhook.MessageEvent); ok {
		if t, ok := m.Message.(webhook.TextMessageContent); ok {
			return t.MarkAsReadToken
		}
	}
	var raw struct {
		Message struct {
			MarkAsReadToken string `json:"markAsReadToken"`
		} `json:"message"`
	}
	if json.Unmarshal(e.Raw, &raw) != nil {
		return ""
	}
	return raw.Message.MarkAsReadToken
}

// Answered reports whether a Reply or Push of this event has been sent (or
// tried): the worker stops refreshing the loading animation of long work
// then, since LINE hides it when a message arrives.
func (e *Event) Answered() bool { return e.sends.Load() > 0 }

func (e *Event) canSend() error {
	if e.Standby() {
		return ErrStandby
	}
	if e.messenger == nil {
		return ErrNoMessenger
	}
	return nil
}
