// Package envelope is the contract between the webhook and the workers: the
// Detail every LINE event travels in on the bus, and the EventBridge event a
// rule target (an SQS queue) receives around it. The webhook writes both
// (AppendDetail for the bus, Encode for the chat queue it feeds directly) and
// the worker reads them (Decode), whichever way a record came. It imports no
// AWS client, so the worker links no EventBridge SDK to read what the
// webhook wrote.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Detail is the Detail of every entry the webhook publishes. Its Event holds the
// LINE event's raw bytes exactly as LINE sent them: never a re-marshalled SDK
// struct, which would add fields and drop unknown ones. Chat is the chat the
// event belongs to (the group, the room, else the user: bot.Source.ChatID's
// rule), empty for events without one (activated, botSuspended, ...): the
// bus's rules route on whether it is there.
type Detail struct {
	Destination string          `json:"destination"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	Chat        string          `json:"chat,omitempty"`
	Event       json.RawMessage `json:"event"`
}

// Event is an EventBridge event as a rule target receives it: the SQS body of
// every record a worker reads.
type Event struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ErrMalformed marks a record body that is not an EventBridge event carrying
// a Detail. Such a record can never succeed: callers send it to the DLQ
// path rather than retrying forever.
var ErrMalformed = errors.New("malformed envelope")

// Decode parses an SQS record body into the EventBridge event and the
// envelope inside it. Every error wraps ErrMalformed.
func Decode(body []byte) (Event, Detail, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: eventbridge event: %v", ErrMalformed, err)
	}
	if len(ev.Detail) == 0 || ev.Detail[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail is not a JSON object", ErrMalformed)
	}
	var env Detail
	if err := json.Unmarshal(ev.Detail, &env); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	if len(env.Event) == 0 || env.Event[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail.event is not a JSON object", ErrMalformed)
	}
	return ev, env, nil
}

// AppendDetail appends the JSON of a Detail to b, written by hand so the
// event's bytes are copied verbatim:
// {"destination":…,"receivedAt":…[,"chat":…],"event":<event>}. event must be
// a JSON object; receivedAt is written in UTC with RFC 3339 nanoseconds.
func AppendDetail(b []byte, destination, chat string, receivedAt time.Time, event []byte) []byte {
	b = append(b, `{"destination":`...)
	b = appendString(b, destination)
	b = append(b, `,"receivedAt":"`...)
	b = receivedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if chat != "" {
		b = append(b, `,"chat":`...)
		b = appendString(b, chat)
	}
	b = append(b, `,"event":`...)
	b = append(b, event...)
	return append(b, '}')
}

// Head is the EventBridge event's own fields around a Detail, as Encode
// writes them.
type Head struct {
	ID         string
	DetailType string
	Source     string
	Account    string
	Region     string
	Time       time.Time
}

// Encode returns the EventBridge-shaped event around detail (a JSON object,
// as AppendDetail writes it): the body a bus rule would have put on a queue,
// which is what the webhook sends to the chat queue itself, so the worker
// reads one shape whichever way a record came. time is truncated to the
// second, as EventBridge's is.
//
// The body is made safe for SQS, which refuses the Unicode noncharacters
// U+FFFE and U+FFFF that a LINE message may carry: they are written as the
// JSON escapes \ufffe and \uffff, which decode to the same text. In valid
// JSON they can only occur inside strings, so the event means exactly what
// LINE sent.
func Encode(h Head, detail []byte) []byte {
	b := make([]byte, 0, len(detail)+len(h.ID)+len(h.DetailType)+len(h.Source)+160)
	b = append(b, `{"version":"0","id":`...)
	b = appendString(b, h.ID)
	b = append(b, `,"detail-type":`...)
	b = appendString(b, h.DetailType)
	b = append(b, `,"source":`...)
	b = appendString(b, h.Source)
	b = append(b, `,"account":`...)
	b = appendString(b, h.Account)
	b = append(b, `,"time":"`...)
	b = h.Time.UTC().Truncate(time.Second).AppendFormat(b, time.RFC3339)
	b = append(b, `","region":`...)
	b = appendString(b, h.Region)
	b = append(b, `,"resources":[],"detail":`...)
	b = append(b, detail...)
	b = append(b, '}')
	return escapeNoncharacters(b)
}

// The UTF-8 of U+FFFE and U+FFFF, and what Encode writes instead.
var (
	escFFFE, escFFFF = []byte(`\ufffe`), []byte(`\uffff`)
	rawFFFE, rawFFFF = []byte{0xef, 0xbf, 0xbe}, []byte{0xef, 0xbf, 0xbf}
)

// escapeNoncharacters replaces raw U+FFFE and U+FFFF with JSON escapes; b
// is returned as is when it has neither.
func escapeNoncharacters(b []byte) []byte {
	if !bytes.Contains(b, rawFFFE) && !bytes.Contains(b, rawFFFF) {
		return b
	}
	b = bytes.ReplaceAll(b, rawFFFE, escFFFE)
	return bytes.ReplaceAll(b, rawFFFF, escFFFF)
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, `\u00`...)
				b = append(b, hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hex = "0123456789abcdef"
