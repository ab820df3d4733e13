package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/lineplatform"
)

// ErrBadSend marks a send request the console cannot turn into a LINE
// event; the message says what is wrong.
var ErrBadSend = errors.New("bad send request")

// Limits of a send request, LINE's where LINE has one.
const (
	maxSendBody  = 64 << 10
	maxTextUTF16 = 5000 // a text message's limit
	maxEmojis    = 20
	maxData      = 300 // a postback's data
	maxTitle     = 100
)

// The kinds of event the console sends.
const (
	KindText     = "text"
	KindSticker  = "sticker"
	KindImage    = "image"
	KindLocation = "location"
	KindPostback = "postback"
	KindFollow   = "follow"
	KindUnfollow = "unfollow"
	KindJoin     = "join"
	KindLeave    = "leave"
)

// SendRequest is what the page asks POST /_local/send to deliver: one
// event from a chat, built as LINE builds it, signed with the channel
// secret and posted to the webhook.
type SendRequest struct {
	// Chat is who sends: a user's one-to-one chat (userId), or a group or
	// room (groupId / roomId) with the member who acts (userId).
	Chat struct {
		UserID  string `json:"userId"`
		GroupID string `json:"groupId,omitempty"`
		RoomID  string `json:"roomId,omitempty"`
	} `json:"chat"`
	// Channel is the named channel the chat is with ("" for the default
	// one): the event is signed with its secret and posted to its webhook.
	Channel   string               `json:"channel,omitempty"`
	Kind      string               `json:"kind"`
	Text      string               `json:"text,omitempty"`
	Emojis    []lineplatform.Emoji `json:"emojis,omitempty"`
	PackageID string               `json:"packageId,omitempty"`
	StickerID string               `json:"stickerId,omitempty"`
	Title     string               `json:"title,omitempty"`
	Address   string               `json:"address,omitempty"`
	Latitude  float64              `json:"latitude,omitempty"`
	Longitude float64              `json:"longitude,omitempty"`
	Data      string               `json:"data,omitempty"`
}

var (
	userID  = regexp.MustCompile(`^U[0-9a-z]{32}$`)
	groupID = regexp.MustCompile(`^C[0-9a-z]{32}$`)
	roomID  = regexp.MustCompile(`^R[0-9a-z]{32}$`)
	digits  = regexp.MustCompile(`^[0-9]{1,20}$`)
	emojiID = regexp.MustCompile(`^[0-9a-zA-Z]{1,40}$`)
)

// ParseSend reads and checks a send request (at most 64 KiB of JSON, no
// unknown members). Every error wraps ErrBadSend.
func ParseSend(r io.Reader) (SendRequest, error) {
	var req SendRequest
	body, err := io.ReadAll(io.LimitReader(r, maxSendBody+1))
	if err != nil {
		return req, fmt.Errorf("%w: read: %v", ErrBadSend, err)
	}
	if len(body) > maxSendBody {
		return req, fmt.Errorf("%w: over %d bytes", ErrBadSend, maxSendBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: %v", ErrBadSend, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: more than one JSON value", ErrBadSend)
	}
	return req, req.check()
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSend}, args...)...)
}

// check applies LINE's rules: IDs in LINE's shape, each kind from the
// chats it can come from, texts within LINE's limits.
func (q SendRequest) check() error {
	c := q.Chat
	if q.Channel != "" {
		if err := channel.Valid(q.Channel); err != nil {
			return bad("channel: %v", err)
		}
	}
	switch {
	case c.GroupID != "" && c.RoomID != "":
		return bad("a chat is a group or a room, not both")
	case c.GroupID != "" && !groupID.MatchString(c.GroupID):
		return bad("groupId must be C and 32 lowercase letters or digits")
	case c.RoomID != "" && !roomID.MatchString(c.RoomID):
		return bad("roomId must be R and 32 lowercase letters or digits")
	case c.UserID != "" && !userID.MatchString(c.UserID):
		return bad("userId must be U and 32 lowercase letters or digits")
	}
	shared := c.GroupID != "" || c.RoomID != ""
	if c.UserID == "" && !(shared && (q.Kind == KindJoin || q.Kind == KindLeave)) {
		return bad("userId is required (who sends)")
	}
	switch q.Kind {
	case KindText:
		return q.checkText()
	case KindSticker:
		if !digits.MatchString(q.PackageID) || !digits.MatchString(q.StickerID) {
			return bad("a sticker needs a numeric packageId and stickerId")
		}
	case KindLocation:
		if q.Latitude < -90 || q.Latitude > 90 || q.Longitude < -180 || q.Longitude > 180 {
			return bad("latitude must be within ±90 and longitude within ±180")
		}
		if utf8.RuneCountInString(q.Title) > maxTitle || utf8.RuneCountInString(q.Address) > maxTitle {
			return bad("title and address are at most %d characters", maxTitle)
		}
	case KindPostback:
		if q.Data == "" || utf8.RuneCountInString(q.Data) > maxData {
			return bad("postback data must be 1 to %d characters", maxData)
		}
	case KindImage:
	case KindFollow, KindUnfollow:
		if shared {
			return bad("%s comes from a one-to-one chat, not a group or room", q.Kind)
		}
	case KindJoin, KindLeave:
		if !shared {
			return bad("%s comes from a group or a room", q.Kind)
		}
	default:
		return bad("kind must be one of text, sticker, image, location, postback, follow, unfollow, join, leave")
	}
	return nil
}

// checkText: 1 to 5000 UTF-16 code units of valid UTF-8; each emoji's
// placeholder inside the text, in order, without overlaps.
func (q SendRequest) checkText() error {
	if !utf8.ValidString(q.Text) {
		return bad("text is not valid UTF-8")
	}
	units := len(utf16.Encode([]rune(q.Text)))
	if units == 0 || units > maxTextUTF16 {
		return bad("text must be 1 to %d characters", maxTextUTF16)
	}
	if len(q.Emojis) > maxEmojis {
		return bad("at most %d emoji", maxEmojis)
	}
	end := 0
	for i, e := range q.Emojis {
		if e.Index < end || e.Length < 1 || e.Index+e.Length > units {
			return bad("emoji %d is not a placeholder inside the text after the one before", i)
		}
		if !emojiID.MatchString(e.ProductID) || !emojiID.MatchString(e.EmojiID) {
			return bad("emoji %d needs a productId and an emojiId", i)
		}
		end = e.Index + e.Length
	}
	return nil
}

// Source is the request's chat as the platform's builders take it.
func (q SendRequest) Source() lineplatform.Source {
	return lineplatform.Source{UserID: q.Chat.UserID, GroupID: q.Chat.GroupID, RoomID: q.Chat.RoomID}
}

// Event builds the request's event with p's builders, as LINE would send it.
func (q SendRequest) Event(p *lineplatform.Platform) json.RawMessage {
	src := q.Source()
	switch q.Kind {
	case KindText:
		return p.TextFrom(src, q.Text, q.Emojis)
	case KindSticker:
		return p.StickerFrom(src, q.PackageID, q.StickerID)
	case KindImage:
		return p.ImageFrom(src)
	case KindLocation:
		return p.LocationFrom(src, q.Title, q.Address, q.Latitude, q.Longitude)
	case KindPostback:
		return p.PostbackFrom(src, q.Data)
	case KindFollow:
		return p.Follow(q.Chat.UserID)
	case KindUnfollow:
		return p.Unfollow(q.Chat.UserID)
	case KindJoin:
		return p.Join(src)
	default:
		return p.Leave(src)
	}
}
