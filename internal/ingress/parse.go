package ingress

import (
	"errors"
	"fmt"
	"strings"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/jsonscan"
)

// body is what the webhook learns from a signed body: the destination and,
// per event in body order, its raw bytes and the few fields that route it.
type body struct {
	destination string
	events      []event
}

// event is one event of a body. raw is the event's bytes exactly as LINE
// sent them, a slice of the body.
type event struct {
	raw            []byte
	typ            string
	webhookEventID string
	chat           string        // the group, the room, else the user; "" for none
	dedup          string        // its chat queue message's deduplication ID (handOffs; "" when it has none)
	item           envelope.Item // what handOffs writes around raw, measured once

	// The strings above as read, until parser.finish makes them.
	typText, idText, chatText text
}

// text is a string value read from the body: decoded at once when it has
// escapes (s), else only located (off, n), so that parser.finish makes all
// of a body's strings with one allocation.
type text struct {
	s      string
	off, n int32 // a body is at most a few MiB
}

func (t text) empty() bool { return t.s == "" && t.n == 0 }

// Keys the webhook and the worker read without the LINE SDK. Their spelling
// is exact: a key that differs only in case ("EVENTS", "TYPE") is refused,
// because Go's encoding/json (the worker, the SDK) would match it
// case-insensitively and read something this parser did not. A repeated key
// is refused for the same reason: parsers disagree on which one wins.
var (
	bodyKeys   = jsonscan.NewKeys("destination", "events")
	eventKeys  = jsonscan.NewKeys("type", "webhookEventId", "source", "mode", "timestamp", "replyToken", "deliveryContext")
	sourceKeys = jsonscan.NewKeys("type", "userId", "groupId", "roomId")
)

// Indexes into bodyKeys, eventKeys and sourceKeys.
const (
	keyDestination = 0
	keyEvents      = 1

	keyType           = 0
	keyWebhookEventID = 1
	keySource         = 2

	keyUserID  = 1
	keyGroupID = 2
	keyRoomID  = 3
)

// parseBody is the webhook's whole reading of a signed body, kept in one
// function so it can be optimised without touching the contract around it.
// It reads the body once, front to back (jsonscan), checking as it goes:
// strict UTF-8, nesting depth (MaxDepth), JSON syntax, a top-level object
// with exactly-spelled keys and an "events" array of at most maxEvents
// objects, each with a non-empty string "type" of at most 128 bytes; and it
// reads each event's webhookEventId and chat. Every error wraps ErrBody and
// never quotes the input.
func parseBody(b []byte, maxEvents int) (body, error) {
	return parseBodyInto(nil, b, maxEvents)
}

// parseBodyInto is parseBody appending the events to events[:0], so a
// request can read into a slice an earlier one left (the body's events
// slice is events when it has room enough).
func parseBodyInto(events []event, b []byte, maxEvents int) (body, error) {
	p := parser{b: b, maxEvents: maxEvents, event: -1, out: body{events: events[:0]}}
	p.s.Reset(b, MaxDepth, true)
	if p.s.Peek() != jsonscan.Object {
		if p.s.Err() == nil {
			return body{}, fmt.Errorf("%w: not a JSON object", ErrBody)
		}
	} else {
		p.body()
	}
	p.s.Finish()
	if err := p.s.Err(); err != nil {
		return body{}, fmt.Errorf("%w: %v", ErrBody, describe(err))
	}
	if !p.hasEvents {
		return body{}, fmt.Errorf("%w: no \"events\" array", ErrBody)
	}
	p.finish()
	return p.out, nil
}

// describe says what is wrong with a body without quoting it.
func describe(err error) string {
	var se *jsonscan.Error
	switch {
	case errors.Is(err, jsonscan.ErrUTF8):
		return "not valid UTF-8"
	case errors.Is(err, jsonscan.ErrDepth):
		return fmt.Sprintf("JSON nested more than %d levels deep", MaxDepth)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	}
	return err.Error()
}

// parser is one reading of a body; its scanner's first error ends it.
type parser struct {
	s         jsonscan.Scanner
	b         []byte
	maxEvents int
	out       body
	dest      text
	hasEvents bool
	event     int // the index of the event being read, -1 outside events
}

// fail stops the reading with a problem of the body's shape, naming the
// event it is in (formatted only then: reading allocates nothing for it).
func (p *parser) fail(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	if p.event >= 0 {
		err = fmt.Errorf("events[%d]: %w", p.event, err)
	}
	p.s.Fail(err)
}

// key reads the next member's key and checks it against known: it returns
// the key's index in known, -1 for a key not read, and false at the
// object's end or on an error (a known key in another case, or twice: seen
// has bit i set for known[i] seen).
func (p *parser) key(known *jsonscan.Keys, seen *uint32) (int, bool) {
	i, exact, ok := p.s.Member(known)
	switch {
	case !ok:
		return -1, false
	case i < 0:
		return -1, true
	case !exact:
		p.fail("key %q is not spelled %q (keys are case-sensitive)", p.s.Last().String(), known.Names()[i])
		return -1, false
	case *seen&(1<<i) != 0:
		p.fail("key %q is given twice", known.Names()[i])
		return -1, false
	}
	*seen |= 1 << i
	return i, true
}

// str reads a value that must be a JSON string; null reads as "", as
// encoding/json reads it.
func (p *parser) str(what string) text {
	switch p.s.Peek() {
	case jsonscan.String:
		p.s.ReadString()
		v := p.s.Last()
		if !v.Plain() {
			return text{s: v.String()}
		}
		return text{off: int32(v.Off), n: int32(len(v.Raw))}
	case jsonscan.Null:
		p.s.Skip()
		return text{}
	}
	if p.s.Err() == nil {
		p.fail("%s is not a string", what)
	}
	return text{}
}

// finish makes the strings of the body read: the ones that needed no
// decoding are copied from the body into one string, and sliced from it.
func (p *parser) finish() {
	n := int(p.dest.n)
	for i := range p.out.events {
		ev := &p.out.events[i]
		n += int(ev.typText.n + ev.idText.n + ev.chatText.n)
	}
	var all strings.Builder
	all.Grow(n)
	add := func(t text) {
		if t.n > 0 {
			all.Write(p.b[t.off : t.off+t.n])
		}
	}
	add(p.dest)
	for i := range p.out.events {
		ev := &p.out.events[i]
		add(ev.typText)
		add(ev.idText)
		add(ev.chatText)
	}
	strs := all.String()
	at := 0
	get := func(t text) string {
		if t.n == 0 {
			return t.s
		}
		at += int(t.n)
		return strs[at-int(t.n) : at]
	}
	p.out.destination = get(p.dest)
	for i := range p.out.events {
		ev := &p.out.events[i]
		ev.typ, ev.webhookEventID, ev.chat = get(ev.typText), get(ev.idText), get(ev.chatText)
	}
}

func (p *parser) body() {
	var seen uint32
	p.s.Object()
	for {
		i, ok := p.key(bodyKeys, &seen)
		if !ok {
			return
		}
		switch i {
		case keyDestination:
			p.dest = p.str(`"destination"`)
		case keyEvents:
			if p.s.Peek() != jsonscan.Array {
				if p.s.Err() == nil {
					p.fail(`"events" is not an array`)
				}
				return
			}
			p.hasEvents = true
			p.events()
		default:
			p.s.Skip()
		}
	}
}

func (p *parser) events() {
	// A LINE event is a few hundred bytes: room for the usual count at once.
	if n := min(p.maxEvents, len(p.b)/320+1); cap(p.out.events) < n {
		p.out.events = make([]event, 0, n)
	}
	p.s.Array()
	for n := 0; p.s.Elem(); n++ {
		if n >= p.maxEvents {
			p.fail("more than %d events", p.maxEvents)
			return
		}
		if p.s.Peek() != jsonscan.Object {
			if p.s.Err() == nil {
				p.fail("events[%d] is not an object", n)
			}
			return
		}
		p.event = n
		start := p.s.Pos()
		p.out.events = append(p.out.events, event{})
		ev := &p.out.events[len(p.out.events)-1] // read in place: an event is a few hundred bytes
		p.readEvent(ev)
		if p.s.Err() != nil {
			return
		}
		if t := ev.typText; t.empty() || len(t.s)+int(t.n) > maxDetailType {
			p.fail("no usable \"type\"")
			return
		}
		end := p.s.Pos()
		ev.raw = p.b[start:end:end]
		p.event = -1
	}
}

// readEvent reads one event object into ev (zero): its type,
// webhookEventId and chat (the group, the room, else the user:
// bot.Source.ChatID's rule).
func (p *parser) readEvent(ev *event) {
	var seen uint32
	var group, room, user text
	p.s.Object()
	for i, ok := p.key(eventKeys, &seen); ok; i, ok = p.key(eventKeys, &seen) {
		if i == keyType {
			ev.typText = p.str(`"type"`)
		} else if i == keyWebhookEventID {
			ev.idText = p.str(`"webhookEventId"`)
		} else if i == keySource {
			group, room, user = p.source()
		} else {
			p.s.Skip()
		}
	}
	switch {
	case !group.empty():
		ev.chatText = group
	case !room.empty():
		ev.chatText = room
	default:
		ev.chatText = user
	}
}

// source reads an event's "source": an object (or null, no chat).
func (p *parser) source() (group, room, user text) {
	switch p.s.Peek() {
	case jsonscan.Null:
		p.s.Skip()
		return
	case jsonscan.Object:
	default:
		if p.s.Err() == nil {
			p.fail(`"source" is not an object`)
		}
		return
	}
	ids := [...]*text{keyUserID: &user, keyGroupID: &group, keyRoomID: &room}
	var seen uint32
	p.s.Object()
	for i, ok := p.key(sourceKeys, &seen); ok; i, ok = p.key(sourceKeys, &seen) {
		if i > 0 && i < len(ids) {
			*ids[i] = p.str(sourceWhat[i])
		} else {
			p.s.Skip()
		}
	}
	return
}

// sourceWhat names the source's IDs in errors.
var sourceWhat = [...]string{keyUserID: `"source.userId"`, keyGroupID: `"source.groupId"`, keyRoomID: `"source.roomId"`}
