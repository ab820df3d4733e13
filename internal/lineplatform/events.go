package lineplatform

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Mode values of a LINE event: an active channel answers its events, a
// channel in standby (another module has chat control) only observes them.
const (
	ModeActive  = "active"
	ModeStandby = "standby"
)

// EventOption adjusts one built event.
type EventOption func(*eventSpec)

type eventSpec struct {
	mode      string
	unblocked bool
	noReply   bool
}

func noReply(s *eventSpec) { s.noReply = true }

// Standby builds the event in standby mode, as LINE sends it to a channel
// without chat control: no reply token, and the bot must not answer.
func Standby() EventOption { return func(s *eventSpec) { s.mode = ModeStandby } }

// Unblocked marks a follow event as an unblock (follow.isUnblocked true)
// rather than a new friend.
func Unblocked() EventOption { return func(s *eventSpec) { s.unblocked = true } }

// The wire shapes below keep the field order of LINE's own webhook bodies.
type event struct {
	ReplyToken      string          `json:"replyToken,omitempty"`
	Type            string          `json:"type"`
	Mode            string          `json:"mode"`
	Timestamp       int64           `json:"timestamp"`
	Source          source          `json:"source"`
	WebhookEventID  string          `json:"webhookEventId"`
	DeliveryContext deliveryContext `json:"deliveryContext"`
	Message         *messageContent `json:"message,omitempty"`
	Follow          *followDetail   `json:"follow,omitempty"`
	Postback        *postback       `json:"postback,omitempty"`
}

type source struct {
	Type    string `json:"type"`
	GroupID string `json:"groupId,omitempty"`
	RoomID  string `json:"roomId,omitempty"`
	UserID  string `json:"userId,omitempty"`
}

type deliveryContext struct {
	IsRedelivery bool `json:"isRedelivery"`
}

// messageContent is a message event's message: the fields of LINE's
// text, sticker, image and location contents, in their order; the ones a
// type does not have are left out.
type messageContent struct {
	ID                  string           `json:"id"`
	Type                string           `json:"type"`
	QuoteToken          string           `json:"quoteToken,omitempty"`
	MarkAsReadToken     string           `json:"markAsReadToken,omitempty"`
	Text                string           `json:"text,omitempty"`
	Emojis              []Emoji          `json:"emojis,omitempty"`
	PackageID           string           `json:"packageId,omitempty"`
	StickerID           string           `json:"stickerId,omitempty"`
	StickerResourceType string           `json:"stickerResourceType,omitempty"`
	ContentProvider     *contentProvider `json:"contentProvider,omitempty"`
	Title               string           `json:"title,omitempty"`
	Address             string           `json:"address,omitempty"`
	Latitude            *float64         `json:"latitude,omitempty"`
	Longitude           *float64         `json:"longitude,omitempty"`
}

type contentProvider struct {
	Type string `json:"type"`
}

// Emoji is a LINE emoji in a text a user sent: its placeholder's position
// and length in the text (in UTF-16 code units, as LINE counts), and which
// emoji it is.
type Emoji struct {
	Index     int    `json:"index"`
	Length    int    `json:"length"`
	ProductID string `json:"productId"`
	EmojiID   string `json:"emojiId"`
}

// Source is the chat an event comes from: a one-to-one chat with a user
// (UserID), a group (GroupID) or a multi-person room (RoomID), with the
// UserID of the member who acted when there is one.
type Source struct {
	UserID, GroupID, RoomID string
}

// wire is s as LINE writes it: the type follows from which ID is set.
func (s Source) wire() source {
	switch {
	case s.GroupID != "":
		return source{Type: "group", GroupID: s.GroupID, UserID: s.UserID}
	case s.RoomID != "":
		return source{Type: "room", RoomID: s.RoomID, UserID: s.UserID}
	}
	return source{Type: "user", UserID: s.UserID}
}

type followDetail struct {
	IsUnblocked bool `json:"isUnblocked"`
}

type postback struct {
	Data string `json:"data"`
}

// TextFrom builds a text message event from src; emojis are the LINE emoji
// the text carries (nil for none).
func (p *Platform) TextFrom(src Source, text string, emojis []Emoji, opts ...EventOption) json.RawMessage {
	return p.build("message", src.wire(), opts, func(e *event, _ *eventSpec) {
		e.Message = p.textMessage(text)
		e.Message.Emojis = emojis
	})
}

// StickerFrom builds a sticker message event from src (a STATIC sticker of
// the package).
func (p *Platform) StickerFrom(src Source, packageID, stickerID string, opts ...EventOption) json.RawMessage {
	return p.build("message", src.wire(), opts, func(e *event, _ *eventSpec) {
		e.Message = &messageContent{ID: p.entropy.messageID(), Type: "sticker", QuoteToken: p.entropy.base64(32),
			PackageID: packageID, StickerID: stickerID, StickerResourceType: "STATIC"}
	})
}

// ImageFrom builds an image message event from src, as LINE sends a photo
// taken in the app: its content is on LINE's servers (contentProvider line).
func (p *Platform) ImageFrom(src Source, opts ...EventOption) json.RawMessage {
	return p.build("message", src.wire(), opts, func(e *event, _ *eventSpec) {
		e.Message = &messageContent{ID: p.entropy.messageID(), Type: "image", QuoteToken: p.entropy.base64(32),
			ContentProvider: &contentProvider{Type: "line"}}
	})
}

// LocationFrom builds a location message event from src.
func (p *Platform) LocationFrom(src Source, title, address string, latitude, longitude float64, opts ...EventOption) json.RawMessage {
	return p.build("message", src.wire(), opts, func(e *event, _ *eventSpec) {
		e.Message = &messageContent{ID: p.entropy.messageID(), Type: "location", Title: title, Address: address,
			Latitude: &latitude, Longitude: &longitude}
	})
}

// PostbackFrom builds the event LINE sends when a member of src taps a
// postback action carrying data.
func (p *Platform) PostbackFrom(src Source, data string, opts ...EventOption) json.RawMessage {
	return p.build("postback", src.wire(), opts, func(e *event, _ *eventSpec) {
		e.Postback = &postback{Data: data}
	})
}

// Join builds the event LINE sends when the bot joins the group or room of
// src.
func (p *Platform) Join(src Source, opts ...EventOption) json.RawMessage {
	w := src.wire()
	w.UserID = "" // LINE's join events name the chat only
	return p.build("join", w, opts, func(*event, *eventSpec) {})
}

// Leave builds the event LINE sends when the bot is removed from the group
// or room of src. It carries no reply token.
func (p *Platform) Leave(src Source, opts ...EventOption) json.RawMessage {
	w := src.wire()
	w.UserID = ""
	return p.build("leave", w, append([]EventOption{noReply}, opts...), func(*event, *eventSpec) {})
}

// Text builds a text message event from a user in a one-to-one chat.
func (p *Platform) Text(userID, text string, opts ...EventOption) json.RawMessage {
	return p.build("message", source{Type: "user", UserID: userID}, opts, func(e *event, _ *eventSpec) {
		e.Message = p.textMessage(text)
	})
}

// GroupText builds a text message event sent by userID in group groupID.
func (p *Platform) GroupText(groupID, userID, text string, opts ...EventOption) json.RawMessage {
	return p.build("message", source{Type: "group", GroupID: groupID, UserID: userID}, opts, func(e *event, _ *eventSpec) {
		e.Message = p.textMessage(text)
	})
}

// Follow builds the event LINE sends when userID adds the bot as a friend
// (or unblocks it, with Unblocked).
func (p *Platform) Follow(userID string, opts ...EventOption) json.RawMessage {
	return p.build("follow", source{Type: "user", UserID: userID}, opts, func(e *event, s *eventSpec) {
		e.Follow = &followDetail{IsUnblocked: s.unblocked}
	})
}

// Unfollow builds the event LINE sends when userID blocks the bot. It
// carries no reply token: there is no one left to reply to.
func (p *Platform) Unfollow(userID string, opts ...EventOption) json.RawMessage {
	return p.build("unfollow", source{Type: "user", UserID: userID}, append([]EventOption{noReply}, opts...), func(*event, *eventSpec) {})
}

// Postback builds the event LINE sends when userID taps a postback action
// carrying data.
func (p *Platform) Postback(userID, data string, opts ...EventOption) json.RawMessage {
	return p.build("postback", source{Type: "user", UserID: userID}, opts, func(e *event, _ *eventSpec) {
		e.Postback = &postback{Data: data}
	})
}

func (p *Platform) build(typ string, src source, opts []EventOption, fill func(*event, *eventSpec)) json.RawMessage {
	spec := eventSpec{mode: ModeActive}
	for _, o := range opts {
		o(&spec)
	}
	now := p.now()
	e := event{
		Type:           typ,
		Mode:           spec.mode,
		Timestamp:      now.UnixMilli(),
		Source:         src,
		WebhookEventID: p.entropy.eventID(now),
	}
	if spec.mode == ModeActive && !spec.noReply {
		e.ReplyToken = p.entropy.hex(16)
	}
	fill(&e, &spec)
	if e.Message != nil {
		e.Message.MarkAsReadToken = readToken(e.Message.ID)
	}
	if e.ReplyToken != "" && p.onReplyToken != nil {
		p.onReplyToken(e.ReplyToken, now)
	}
	return marshal(e)
}

// readToken is the markAsReadToken of the message id: every message event
// carries one since 2025-11-05 (https://developers.line.biz/en/docs/messaging-api/mark-as-read).
// It is derived from the id rather than drawn, so adding it changed no
// other value a seeded platform builds.
func readToken(messageID string) string {
	sum := sha256.Sum256([]byte("markAsReadToken:" + messageID))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}

func (p *Platform) textMessage(text string) *messageContent {
	return &messageContent{
		ID:         p.entropy.messageID(),
		Type:       "text",
		QuoteToken: p.entropy.base64(32),
		Text:       text,
	}
}

// marshal encodes v compactly without escaping <, > and &, as LINE does.
// The wire structs hold only strings, numbers and bools, so it cannot fail.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Body returns a webhook request body, {"destination":…,"events":[…]},
// with the events copied in verbatim (so a test can also send malformed
// ones). No events makes LINE's verification request, "events":[].
func Body(destination string, events ...json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"destination":`)
	b.Write(marshal(destination))
	b.WriteString(`,"events":[`)
	for i, e := range events {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// entropy mints event IDs and tokens from one reader, safely for concurrent
// use. Event IDs are monotonic ULIDs, so they are unique and sort by time
// even when many are minted in one millisecond.
type entropy struct {
	mu  sync.Mutex
	r   io.Reader
	ids *ulid.LockedMonotonicReader
}

func newEntropy(r io.Reader) *entropy {
	e := &entropy{r: r}
	e.ids = &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(lockedReader{e}, 0)}
	return e
}

// lockedReader serialises reads of the shared source between the ULID
// reader and the token minting.
type lockedReader struct{ e *entropy }

func (l lockedReader) Read(p []byte) (int, error) {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return io.ReadFull(l.e.r, p)
}

func (e *entropy) read(n int) []byte {
	b := make([]byte, n)
	if _, err := (lockedReader{e}).Read(b); err != nil {
		// A failing custom source must not make two events share an
		// identity: fall back to the system's source.
		_, _ = rand.Read(b)
	}
	return b
}

func (e *entropy) eventID(t time.Time) string {
	id, err := ulid.New(ulid.Timestamp(t), e.ids)
	if err != nil {
		// Monotonic overflow within one millisecond (about 2^48 IDs) or a
		// failing source: a non-monotonic random ULID is still unique.
		id, err = ulid.New(ulid.Timestamp(t), rand.Reader)
		if err != nil {
			// The clock is outside ULID's range (after year 10889).
			_, _ = rand.Read(id[:])
		}
	}
	return id.String()
}

func (e *entropy) hex(n int) string { return hex.EncodeToString(e.read(n)) }

func (e *entropy) base64(n int) string { return base64.RawURLEncoding.EncodeToString(e.read(n)) }

// messageID returns an 18-digit decimal ID, the shape of LINE message IDs.
func (e *entropy) messageID() string {
	const lo, span = 100_000_000_000_000_000, 900_000_000_000_000_000
	return strconv.FormatUint(lo+binary.BigEndian.Uint64(e.read(8))%span, 10)
}
