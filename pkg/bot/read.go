package bot

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/jsonscan"
)

// The keys an event is read by. The head's are matched as encoding/json
// matches struct fields (the exact spelling, else case-insensitively; the
// last occurrence wins), so a Reader reads what json.Unmarshal into the head
// reads. The others are the bodies of the events Reader builds the SDK's
// typed event for without the SDK.
var (
	eventKeys = jsonscan.NewKeys("type", "mode", "timestamp", "webhookEventId", "replyToken", "deliveryContext", "source",
		"message", "postback", "follow")
	deliveryKeys = jsonscan.NewKeys("isRedelivery")
	sourceKeys   = jsonscan.NewKeys("type", "userId", "groupId", "roomId")
	textKeys     = jsonscan.NewKeys("type", "id", "text", "quoteToken", "quotedMessageId", "markAsReadToken", "emojis", "mention")
	postbackKeys = jsonscan.NewKeys("data", "params")
	followKeys   = jsonscan.NewKeys("isUnblocked")
)

// Indexes into eventKeys (sourceKeys and textKeys are read in their order,
// into arrays of destinations).
const (
	keyType = iota
	keyMode
	keyTimestamp
	keyWebhookEventID
	keyReplyToken
	keyDeliveryContext
	keySource
	keyMessage
	keyPostback
	keyFollow
)

// Reader reads a LINE event in one pass: the head the idempotency claim
// needs, and for the common events (text messages and their edits, postbacks,
// follow, unfollow, join, leave, written plainly, as LINE writes them) everything
// the SDK's typed event holds, so that Event builds it without the SDK's
// decoder, which reads an event three to five times over. For anything else
// Event falls back to the SDK. The worker's decode step runs a Reader inside
// its pass over the SQS record (envelope.DecodeRecord); Peek and Parse run
// one over a raw event. The zero value is ready; a Reader is reused by
// reading again.
type Reader struct {
	h    head
	err  error // the first error encoding/json reports decoding the head
	read bool

	// What the SDK reads besides the head, and whether the event is plain
	// enough to build its typed event from them: every key read spelled
	// exactly, none twice, no null, only the fields built below.
	plain    bool
	seen     uint32 // eventKeys seen
	delivery bool   // has a deliveryContext object
	sourceOK bool   // has a source object
	message  *textContent
	postback *webhook.PostbackContent
	follow   *webhook.FollowDetail
}

// textContent is a text message's content as the SDK decodes it.
type textContent struct {
	typ, id, text, quoteToken, quotedMessageID, markAsReadToken string
}

// ReadEvent reads the event object the scanner is at. It reads exactly one
// value; a JSON error stops the scanner, an event that encoding/json would
// not decode is kept for Head and Event to report. The strings it keeps are
// copies: none holds on to the record it came from (an idempotency key is
// kept for days).
func (r *Reader) ReadEvent(s *jsonscan.Scanner) {
	*r = Reader{read: true, plain: true}
	if s.Peek() != jsonscan.Object {
		s.Skip()
		r.fail("not a JSON object")
		return
	}
	s.Object()
	r.members(s, eventKeys, &r.seen, func(i int) {
		switch i {
		case keyType:
			r.str(s, &r.h.Type)
		case keyMode:
			r.str(s, &r.h.Mode)
		case keyTimestamp:
			r.int64(s, &r.h.Timestamp)
		case keyWebhookEventID:
			r.str(s, &r.h.WebhookEventID)
		case keyReplyToken:
			r.str(s, &r.h.ReplyToken)
		case keyDeliveryContext:
			r.deliveryContext(s)
		case keySource:
			r.source(s)
		case keyMessage:
			r.readMessage(s)
		case keyPostback:
			r.readPostback(s)
		case keyFollow:
			r.readFollow(s)
		}
	})
}

// fail records a decoding error (the first one wins, as in encoding/json).
func (r *Reader) fail(what string) {
	r.plain = false
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrEvent, what)
	}
}

// mismatch skips a value encoding/json cannot decode into the field.
func (r *Reader) mismatch(s *jsonscan.Scanner, field string) {
	s.Skip()
	r.fail("cannot read the value of " + field)
}

// value reports whether the next value is of kind want, for the caller to
// read into a field as encoding/json does: null is skipped (the field left
// as it is), any other kind skipped as an error.
func (r *Reader) value(s *jsonscan.Scanner, want jsonscan.Kind, field string) bool {
	switch k := s.Peek(); k {
	case want:
		return true
	case jsonscan.Null:
		s.Skip()
		r.plain = false
	default:
		r.mismatch(s, field)
	}
	return false
}

// expect reports whether the next value, part of the typed event's body
// (not the head), is of kind want; any other is skipped and leaves the event
// to the SDK, which reports it when the event is parsed (a duplicate of it
// is still recognised from its head).
func (r *Reader) expect(s *jsonscan.Scanner, want jsonscan.Kind) bool {
	if s.Peek() == want {
		return true
	}
	s.Skip()
	r.plain = false
	return false
}

// expectObject enters the object s is at, part of the typed event's body,
// or skips what is there instead, as expect does, and reports false.
func (r *Reader) expectObject(s *jsonscan.Scanner) bool {
	if !r.expect(s, jsonscan.Object) {
		return false
	}
	s.Object()
	return true
}

func (r *Reader) str(s *jsonscan.Scanner, dst *string) {
	if r.value(s, jsonscan.String, "a string field") {
		s.ReadString()
		*dst = s.Last().String()
	}
}

func (r *Reader) int64(s *jsonscan.Scanner, dst *int64) {
	if !r.value(s, jsonscan.Number, "timestamp") {
		return
	}
	if lit, ok := s.Literal(); ok {
		n, err := strconv.ParseInt(string(lit), 10, 64)
		if err != nil {
			r.fail("timestamp is not an int64")
			return
		}
		*dst = n
	}
}

func (r *Reader) bool(s *jsonscan.Scanner, dst *bool) {
	if r.value(s, jsonscan.Bool, "a bool field") {
		readBool(s, dst)
	}
}

func readBool(s *jsonscan.Scanner, dst *bool) {
	if lit, ok := s.Literal(); ok {
		*dst = lit[0] == 't'
	}
}

// object starts reading a nested struct: an object is read (true), null
// leaves the struct, anything else is an error.
func (r *Reader) object(s *jsonscan.Scanner, field string) bool {
	if r.value(s, jsonscan.Object, field) {
		s.Object()
		return true
	}
	return false
}

// members reads the object the scanner is in, calling field with the index
// of each key in keys (exact or case-insensitive) and skipping the others;
// seen gets bit i for keys[i]. A key not spelled exactly, or given twice,
// makes the event not plain.
func (r *Reader) members(s *jsonscan.Scanner, keys *jsonscan.Keys, seen *uint32, field func(i int)) {
	for {
		i, exact, ok := s.Member(keys)
		if !ok {
			return
		}
		if i < 0 {
			s.Skip()
			continue
		}
		if !exact || *seen&(1<<i) != 0 {
			r.plain = false
		}
		*seen |= 1 << i
		field(i)
	}
}

func (r *Reader) deliveryContext(s *jsonscan.Scanner) {
	if !r.object(s, "deliveryContext") {
		return
	}
	r.delivery = true
	r.members(s, deliveryKeys, new(uint32), func(int) { r.bool(s, &r.h.DeliveryContext.IsRedelivery) })
}

func (r *Reader) source(s *jsonscan.Scanner) {
	if !r.object(s, "source") {
		return
	}
	r.sourceOK = true
	dst := [...]*string{&r.h.Source.Type, &r.h.Source.UserID, &r.h.Source.GroupID, &r.h.Source.RoomID}
	r.members(s, sourceKeys, new(uint32), func(i int) { r.str(s, dst[i]) })
}

// part reads a string of the typed event's body (see expect).
func (r *Reader) part(s *jsonscan.Scanner, dst *string) {
	if r.expect(s, jsonscan.String) {
		s.ReadString()
		*dst = s.Last().String()
	}
}

// readMessage reads a "message" for the typed event (the head has none).
func (r *Reader) readMessage(s *jsonscan.Scanner) {
	if !r.expectObject(s) {
		return
	}
	m := &textContent{}
	dst := [...]*string{&m.typ, &m.id, &m.text, &m.quoteToken, &m.quotedMessageID, &m.markAsReadToken}
	r.members(s, textKeys, new(uint32), func(i int) {
		if i >= len(dst) { // emojis, mention: left to the SDK
			s.Skip()
			r.plain = false
			return
		}
		r.part(s, dst[i])
	})
	r.message = m
}

func (r *Reader) readPostback(s *jsonscan.Scanner) {
	if !r.expectObject(s) {
		return
	}
	p := &webhook.PostbackContent{}
	r.members(s, postbackKeys, new(uint32), func(i int) {
		if i == 0 {
			r.part(s, &p.Data)
			return
		}
		r.params(s, p)
	})
	r.postback = p
}

// params reads a postback's params: an object of strings.
func (r *Reader) params(s *jsonscan.Scanner, p *webhook.PostbackContent) {
	if !r.expectObject(s) {
		return
	}
	p.Params = map[string]string{}
	n := 0
	for {
		k, ok := s.Key()
		if !ok {
			break
		}
		n++
		if !r.expect(s, jsonscan.String) {
			continue
		}
		key := k.String()
		s.ReadString()
		p.Params[key] = s.Last().String()
	}
	if len(p.Params) != n { // a key given twice
		r.plain = false
	}
}

func (r *Reader) readFollow(s *jsonscan.Scanner) {
	if !r.expectObject(s) {
		return
	}
	f := &webhook.FollowDetail{}
	r.members(s, followKeys, new(uint32), func(int) {
		if r.expect(s, jsonscan.Bool) {
			readBool(s, &f.IsUnblocked)
		}
	})
	r.follow = f
}

// Head is the event's head, or an ErrEvent error when encoding/json could
// not decode it (or it has no type).
func (r *Reader) Head() (Head, error) {
	if err := r.check(); err != nil {
		return Head{}, err
	}
	return Head{Type: r.h.Type, WebhookEventID: r.h.WebhookEventID, SourceType: SourceType(r.h.Source.Type)}, nil
}

func (r *Reader) check() error {
	if !r.read {
		return fmt.Errorf("%w: not read", ErrEvent)
	}
	if r.err != nil {
		return r.err
	}
	if r.h.Type == "" {
		return fmt.Errorf("%w: no type", ErrEvent)
	}
	return nil
}

// Event builds the event the Reader read, raw being its bytes, bound to m
// (which may be nil). A Reader that has not read reads raw first.
func (r *Reader) Event(raw json.RawMessage, destination string, receivedAt time.Time, m Messenger) (*Event, error) {
	if !r.read {
		r.readRaw(raw)
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	typed, ok := r.typed()
	if !ok {
		var err error
		if typed, err = webhook.UnmarshalEvent(raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrEvent, r.h.Type, err)
		}
	}
	h := &r.h
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

// readRaw reads a raw event on its own (Peek, Parse).
func (r *Reader) readRaw(raw []byte) {
	var s jsonscan.Scanner
	s.Reset(raw, jsonscan.MaxDepth, false)
	r.ReadEvent(&s)
	s.Finish()
	if err := s.Err(); err != nil {
		*r = Reader{read: true, err: fmt.Errorf("%w: %v", ErrEvent, err)}
	}
}

// typed builds the SDK's typed event from what was read, exactly as
// webhook.UnmarshalEvent would decode it, when the event is plain and of a
// kind built here; false otherwise.
func (r *Reader) typed() (webhook.EventInterface, bool) {
	if !r.plain {
		return nil, false
	}
	var src webhook.SourceInterface
	if r.sourceOK {
		s := r.h.Source
		switch s.Type {
		case "user":
			src = webhook.UserSource{Source: webhook.Source{Type: s.Type}, UserId: s.UserID}
		case "group":
			src = webhook.GroupSource{Source: webhook.Source{Type: s.Type}, GroupId: s.GroupID, UserId: s.UserID}
		case "room":
			src = webhook.RoomSource{Source: webhook.Source{Type: s.Type}, UserId: s.UserID, RoomId: s.RoomID}
		default:
			return nil, false
		}
	} else if r.seen&(1<<keySource) != 0 {
		return nil, false
	}
	var delivery *webhook.DeliveryContext
	if r.delivery {
		delivery = &webhook.DeliveryContext{IsRedelivery: r.h.DeliveryContext.IsRedelivery}
	}
	h := &r.h
	ev := webhook.Event{Type: h.Type}
	mode := webhook.EventMode(h.Mode)
	switch h.Type {
	case "message", "messageEdited":
		var content webhook.MessageContentInterface
		if r.seen&(1<<keyMessage) != 0 {
			m := r.message
			if m == nil || m.typ != "text" {
				return nil, false
			}
			content = webhook.TextMessageContent{MessageContent: webhook.MessageContent{Type: m.typ}, Id: m.id, Text: m.text,
				QuoteToken: m.quoteToken, QuotedMessageId: m.quotedMessageID, MarkAsReadToken: m.markAsReadToken}
		}
		if h.Type == "messageEdited" {
			return webhook.MessageEditedEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
				DeliveryContext: delivery, ReplyToken: h.ReplyToken, Message: content}, true
		}
		return webhook.MessageEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery, ReplyToken: h.ReplyToken, Message: content}, true
	case "postback":
		if r.seen&(1<<keyPostback) != 0 && r.postback == nil {
			return nil, false
		}
		return webhook.PostbackEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery, ReplyToken: h.ReplyToken, Postback: r.postback}, true
	case "follow":
		if r.seen&(1<<keyFollow) != 0 && r.follow == nil {
			return nil, false
		}
		return webhook.FollowEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery, ReplyToken: h.ReplyToken, Follow: r.follow}, true
	case "unfollow":
		return webhook.UnfollowEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery}, true
	case "join":
		return webhook.JoinEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery, ReplyToken: h.ReplyToken}, true
	case "leave":
		return webhook.LeaveEvent{Event: ev, Source: src, Timestamp: h.Timestamp, Mode: mode, WebhookEventId: h.WebhookEventID,
			DeliveryContext: delivery}, true
	}
	return nil, false
}
