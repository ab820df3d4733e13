// Package envelope is the contract between the webhook and the workers: the
// Detail every LINE event travels in on the bus, and the EventBridge event a
// rule target (an SQS queue) receives around it. The webhook writes both
// (AppendDetail for the bus, AppendEvent for the chat queue it feeds
// directly) and the worker reads them (Decode), whichever way a record came.
// It imports no AWS client, so the worker links no EventBridge SDK to read
// what the webhook wrote.
//
// Writing is a few appends rather than json.Marshal, which would compact and
// HTML-escape the event's raw bytes: the event must reach the worker exactly
// as LINE sent it. Reading is encoding/json (docs/adr/0010-hot-path-stdlib.md).
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
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

// AppendDetail appends the JSON of a Detail to b:
// {"destination":…,"receivedAt":…[,"chat":…],"event":<event>}, the event's
// bytes copied verbatim (it must be a JSON object), receivedAt in UTC with
// RFC 3339 nanoseconds, no chat key when chat is "".
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

// Head is the EventBridge event's own fields around a Detail, as AppendEvent
// writes them.
type Head struct {
	ID         string
	DetailType string
	Source     string
	Account    string
	Region     string
	Time       time.Time
}

// AppendEvent appends to b the EventBridge-shaped event around detail (a
// JSON object, as AppendDetail writes it): the body a bus rule would have
// put on a queue, which is what the webhook sends to the chat queue itself,
// so the worker reads one shape whichever way a record came. h.Time is
// truncated to the second, as EventBridge's is. detail may be a part of b
// (before its end). The result may hold U+FFFE and U+FFFF, which SQS
// refuses: Encode passes it through SafeForSQS.
func AppendEvent(b []byte, h Head, detail []byte) []byte {
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
	return append(b, '}')
}

// Encode returns the EventBridge event around detail (AppendEvent) made
// safe for SQS (SafeForSQS).
func Encode(h Head, detail []byte) []byte {
	return SafeForSQS(AppendEvent(make([]byte, 0, 256+len(detail)), h, detail))
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it; nothing is HTML-escaped.
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s) // the only error is invalid UTF-8, already replaced
	return b
}

// The UTF-8 of U+FFFE and U+FFFF, and the JSON escapes SafeForSQS writes
// instead.
var (
	rawFFFE, rawFFFF = []byte("\uFFFE"), []byte("\uFFFF")
	escFFFE, escFFFF = []byte(`\ufffe`), []byte(`\uffff`)
)

// SafeForSQS makes an EventBridge event written by AppendEvent safe for
// SQS, which refuses the Unicode noncharacters U+FFFE and U+FFFF that a
// LINE message may carry: they are written as the JSON escapes \ufffe and
// \uffff, which decode to the same text. In valid JSON they can only occur
// inside strings, so the event means exactly what LINE sent. b is returned
// as is when it has neither (the common case), else a new slice.
func SafeForSQS(b []byte) []byte {
	if !bytes.Contains(b, rawFFFE) && !bytes.Contains(b, rawFFFF) {
		return b
	}
	return bytes.ReplaceAll(bytes.ReplaceAll(b, rawFFFE, escFFFE), rawFFFF, escFFFF)
}

// Decode parses an SQS record body: json.Unmarshal into Event, then its
// Detail into Detail. The detail and the event inside it must be JSON
// objects. The strings and raw bytes returned are copies: none holds on to
// body. Every error wraps ErrMalformed.
func Decode(body []byte) (Event, Detail, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: eventbridge event: %v", ErrMalformed, err)
	}
	if len(ev.Detail) == 0 || ev.Detail[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail is not a JSON object", ErrMalformed)
	}
	var d Detail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	if len(d.Event) == 0 || d.Event[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail.event is not a JSON object", ErrMalformed)
	}
	return ev, d, nil
}
