package ingress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
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
	chat           string // the group, the room, else the user; "" for none
}

// Keys the webhook and the worker read. Their spelling is exact: a key that
// differs only in case ("EVENTS", "TYPE") is refused, because Go's
// encoding/json (the worker, the SDK) would match it case-insensitively and
// read something this parser, and the bus's rules, did not.
var (
	bodyKeys   = []string{"destination", "events"}
	eventKeys  = []string{"type", "webhookEventId", "source", "mode", "timestamp", "replyToken", "deliveryContext"}
	sourceKeys = []string{"type", "userId", "groupId", "roomId"}
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

// errDepth is a body nested deeper than MaxDepth.
var errDepth = fmt.Errorf("JSON nested more than %d levels deep", MaxDepth)

// parseBody is the webhook's whole reading of a signed body: strict UTF-8
// (utf8.Valid), then one validating pass of jsontext (JSON syntax, one
// value and nothing after it) that also checks the nesting depth
// (MaxDepth), a top-level object with exactly-spelled keys, none of them
// twice, and an "events" array of at most maxEvents objects, each with a
// non-empty string "type" of at most 128 bytes; it reads each event's raw
// bytes, webhookEventId and chat. Every error wraps ErrBody and quotes none
// of the body's values.
func parseBody(b []byte, maxEvents int) (body, error) {
	if !utf8.Valid(b) {
		return body{}, fmt.Errorf("%w: not valid UTF-8", ErrBody)
	}
	// members refuses the keys it reads when they are given twice; the
	// others are forwarded as they are. The bytes are valid UTF-8; an
	// escaped lone surrogate ("\ud800") is read as encoding/json reads it,
	// U+FFFD, and forwarded.
	dec := jsontext.NewDecoder(bytes.NewBuffer(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	p := parser{dec: dec, b: b, maxEvents: maxEvents, event: -1}
	out, err := p.body()
	if err != nil {
		return body{}, fmt.Errorf("%w: %v", ErrBody, describe(err))
	}
	return out, nil
}

// describe says what is wrong with a body without quoting it (jsontext's
// own messages quote the offending bytes and member names).
func describe(err error) string {
	var se *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.ByteOffset)
	}
	return err.Error()
}

// parser is one reading of a body.
type parser struct {
	dec       *jsontext.Decoder
	b         []byte
	maxEvents int
	event     int // the index of the event being read, -1 outside events
}

// shape is a problem of the body's shape, naming the event it is in.
func (p *parser) shape(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if p.event >= 0 {
		err = fmt.Errorf("events[%d]: %w", p.event, err)
	}
	return err
}

// kind is the kind of the next token, or the error reading it gives.
func (p *parser) kind() (jsontext.Kind, error) {
	if k := p.dec.PeekKind(); k != 0 {
		return k, nil
	}
	_, err := p.dec.ReadToken()
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return 0, err
}

// read reads the next token, refusing one that opens a level past MaxDepth.
func (p *parser) read() (jsontext.Token, error) {
	tok, err := p.dec.ReadToken()
	if err != nil {
		return tok, err
	}
	if k := tok.Kind(); (k == '{' || k == '[') && p.dec.StackDepth() > MaxDepth {
		return tok, errDepth
	}
	return tok, nil
}

// skip reads the next value, whatever it is, checking its depth.
func (p *parser) skip() error {
	depth := p.dec.StackDepth()
	for {
		if _, err := p.read(); err != nil {
			return err
		}
		if p.dec.StackDepth() == depth {
			return nil
		}
	}
}

// members reads the members of the object just opened, up to its end:
// field is called with the index in known of each key that is one, the
// values of the others are skipped. A key that is one of known in another
// case (strings.EqualFold folds as encoding/json matches keys to fields),
// or given twice, is refused: parsers disagree on which of two wins.
func (p *parser) members(known []string, field func(i int) error) error {
	var seen uint32 // bit i: known[i] was read
	for {
		tok, err := p.read()
		if err != nil {
			return err
		}
		if tok.Kind() == '}' {
			return nil
		}
		i, err := p.index(known, tok.String())
		switch {
		case err != nil:
			return err
		case i < 0:
			err = p.skip()
		case seen&(1<<i) != 0:
			err = p.shape("key %q is given twice", known[i])
		default:
			seen |= 1 << i
			err = field(i)
		}
		if err != nil {
			return err
		}
	}
}

// index is the index of name in known, -1 when it is none.
func (p *parser) index(known []string, name string) (int, error) {
	for i, k := range known {
		if name == k {
			return i, nil
		}
	}
	for _, k := range known {
		if strings.EqualFold(name, k) {
			return -1, p.shape("a key is not spelled %q (keys are case-sensitive)", k)
		}
	}
	return -1, nil
}

// str reads a value that must be a JSON string; null reads as "", as
// encoding/json reads it.
func (p *parser) str(what string) (string, error) {
	switch k, err := p.kind(); {
	case err != nil:
		return "", err
	case k == 'n':
		_, err := p.read()
		return "", err
	case k != '"':
		return "", p.shape("%s is not a string", what)
	}
	tok, err := p.read()
	if err != nil {
		return "", err
	}
	return tok.String(), nil
}

func (p *parser) body() (body, error) {
	var out body
	switch k, err := p.kind(); {
	case err != nil:
		return out, err
	case k != '{':
		return out, errors.New("not a JSON object")
	}
	if _, err := p.read(); err != nil {
		return out, err
	}
	hasEvents := false
	err := p.members(bodyKeys, func(i int) error {
		var err error
		switch i {
		case keyDestination:
			out.destination, err = p.str(`"destination"`)
		case keyEvents:
			hasEvents = true
			out.events, err = p.events()
		}
		return err
	})
	if err != nil {
		return body{}, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("more than one JSON value")
		}
		return body{}, err
	}
	if !hasEvents {
		return body{}, errors.New(`no "events" array`)
	}
	return out, nil
}

func (p *parser) events() ([]event, error) {
	switch k, err := p.kind(); {
	case err != nil:
		return nil, err
	case k != '[':
		return nil, errors.New(`"events" is not an array`)
	}
	if _, err := p.read(); err != nil {
		return nil, err
	}
	// A LINE event is a few hundred bytes: room for the usual count at once.
	evs := make([]event, 0, min(p.maxEvents, len(p.b)/320+1))
	for n := 0; ; n++ {
		switch k, err := p.kind(); {
		case err != nil:
			return nil, err
		case k == ']':
			_, err := p.read()
			return evs, err
		case k != '{':
			return nil, fmt.Errorf("events[%d] is not an object", n)
		case n >= p.maxEvents:
			return nil, fmt.Errorf("more than %d events", p.maxEvents)
		}
		p.event = n
		ev, err := p.readEvent()
		if err != nil {
			return nil, err
		}
		if ev.typ == "" || len(ev.typ) > maxDetailType {
			return nil, p.shape(`no usable "type"`)
		}
		p.event = -1
		evs = append(evs, ev)
	}
}

// readEvent reads one event object: its raw bytes, its type,
// webhookEventId and chat (the group, the room, else the user:
// bot.Source.ChatID's rule).
func (p *parser) readEvent() (event, error) {
	var ev event
	if _, err := p.read(); err != nil { // the event's '{'
		return ev, err
	}
	start := p.dec.InputOffset() - 1
	var group, room, user string
	err := p.members(eventKeys, func(i int) error {
		var err error
		switch i {
		case keyType:
			ev.typ, err = p.str(`"type"`)
		case keyWebhookEventID:
			ev.webhookEventID, err = p.str(`"webhookEventId"`)
		case keySource:
			group, room, user, err = p.source()
		default:
			err = p.skip()
		}
		return err
	})
	if err != nil {
		return ev, err
	}
	end := p.dec.InputOffset()
	ev.raw = p.b[start:end:end]
	switch {
	case group != "":
		ev.chat = group
	case room != "":
		ev.chat = room
	default:
		ev.chat = user
	}
	return ev, nil
}

// source reads an event's "source": an object, or null (no chat).
func (p *parser) source() (group, room, user string, err error) {
	switch k, err := p.kind(); {
	case err != nil:
		return "", "", "", err
	case k == 'n':
		_, err := p.read()
		return "", "", "", err
	case k != '{':
		return "", "", "", p.shape(`"source" is not an object`)
	}
	if _, err := p.read(); err != nil {
		return "", "", "", err
	}
	err = p.members(sourceKeys, func(i int) error {
		var err error
		switch i {
		case keyUserID:
			user, err = p.str(`"source.userId"`)
		case keyGroupID:
			group, err = p.str(`"source.groupId"`)
		case keyRoomID:
			room, err = p.str(`"source.roomId"`)
		default:
			err = p.skip()
		}
		return err
	})
	return group, room, user, err
}
