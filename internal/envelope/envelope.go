// Package envelope is the contract between the webhook and the workers: the
// Detail every LINE event travels in on the bus, and the EventBridge event a
// rule target (an SQS queue) receives around it. The webhook writes both
// (AppendDetail for the bus, Encode for the chat queue it feeds directly) and
// the worker reads them (DecodeRecord, one pass over the record), whichever
// way a record came. It imports no
// AWS client, so the worker links no EventBridge SDK to read what the
// webhook wrote.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/linegate/linegate/internal/jsonscan"
)

// Detail is the Detail of every entry the webhook publishes. Its Event holds the
// LINE event's raw bytes exactly as LINE sent them: never a re-marshalled SDK
// struct, which would add fields and drop unknown ones. Chat is the chat the
// event belongs to (the group, the room, else the user: bot.Source.ChatID's
// rule), empty for events without one (activated, botSuspended, ...): the
// bus's rules route on whether it is there. Channel is the named channel
// (official account) whose webhook received the event, empty for the
// default channel: a stack with one channel writes the Details it always
// wrote, and a rule can match a channel by name.
type Detail struct {
	Destination string          `json:"destination"`
	Channel     string          `json:"channel,omitempty"`
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

// AppendDetail appends the JSON of a Detail to b, written by hand so the
// event's bytes are copied verbatim:
// {"destination":…[,"channel":…],"receivedAt":…[,"chat":…],"event":<event>}
// (no channel for the default channel, ""). event must be a JSON object;
// receivedAt is written in UTC with RFC 3339 nanoseconds.
func AppendDetail(b []byte, destination, channel, chat string, receivedAt time.Time, event []byte) []byte {
	w := NewWriter(destination, channel, receivedAt, Head{})
	it := NewItem("", "", chat, event)
	return w.AppendDetail(b, &it)
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
	w := NewWriter("", "", h.Time, h)
	it := NewItem(h.ID, h.DetailType, "", nil)
	b := make([]byte, 0, w.headLen(&it)+len(detail)+1)
	b = w.appendHead(b, &it)
	b = append(b, detail...)
	return SafeForSQS(append(b, '}'))
}

// Writer writes the Details and EventBridge events of one webhook body. What
// every event of a body shares (its destination, the receive time, the
// source, account and region) is formatted once, and each event's sizes are
// known before it is written, so a webhook writes all of a body's envelopes
// into one buffer with one allocation. A Writer is a value (the shared parts
// live in it, not on the heap): keep it in a variable and use it there.
type Writer struct {
	split, end int       // parts()[:split] is the Detail's head, [split:end] the event's tail
	inline     [256]byte // the parts, when they fit
	big        []byte    // the parts, when they do not
}

// parts is {"destination":…[,"channel":…],"receivedAt":"…" followed by
// ,"source":…,"account":…,"time":"…","region":…,"resources":[],"detail":
func (w *Writer) parts() []byte {
	if w.big != nil {
		return w.big
	}
	return w.inline[:w.end]
}

func (w *Writer) detailHead() []byte { return w.parts()[:w.split] }
func (w *Writer) eventTail() []byte  { return w.parts()[w.split:w.end] }

// NewWriter returns a Writer for the events of one body: destination,
// channel (the named channel whose webhook received the body; "" for the
// default channel, written as no key) and receivedAt go in every Detail,
// h's Source, Account, Region and the time
// (receivedAt when h.Time is zero) in every EventBridge event; h's ID and
// DetailType are per event (AppendEvent's arguments).
func NewWriter(destination, channel string, receivedAt time.Time, h Head) Writer {
	var w Writer
	b := w.writeParts(w.inline[:0], destination, channel, receivedAt, h)
	w.end = len(b)
	if len(b) > len(w.inline) {
		w.big = bytes.Clone(b) // b outgrew inline; inline itself never leaves w
	}
	return w
}

// writeParts appends parts() to b and sets w.split.
func (w *Writer) writeParts(b []byte, destination, channel string, receivedAt time.Time, h Head) []byte {
	b = append(b, `{"destination":`...)
	b = appendString(b, destination)
	if channel != "" {
		b = append(b, `,"channel":`...)
		b = appendString(b, channel)
	}
	b = append(b, `,"receivedAt":"`...)
	stamp := len(b)
	b = appendStamp(b, receivedAt)
	b = append(b, '"')
	w.split = len(b)
	b = append(b, `,"source":`...)
	b = appendString(b, h.Source)
	b = append(b, `,"account":`...)
	b = appendString(b, h.Account)
	b = append(b, `,"time":"`...)
	at := h.Time
	if at.IsZero() {
		at = receivedAt
	}
	if (h.Time.IsZero() || at.Equal(receivedAt)) && b[stamp] != '-' && b[stamp+4] == '-' {
		// The same instant, of a four-digit year (the stamp starts
		// "YYYY-"): its second is the nanosecond stamp's first 19 bytes
		// ("2006-01-02T15:04:05"), then Z.
		b = append(b, b[stamp:stamp+19]...)
		b = append(b, 'Z')
	} else {
		b = at.UTC().Truncate(time.Second).AppendFormat(b, time.RFC3339)
	}
	b = append(b, `","region":`...)
	b = appendString(b, h.Region)
	return append(b, `,"resources":[],"detail":`...)
}

// appendStamp appends t as t.UTC().AppendFormat(b, time.RFC3339Nano) does
// (the fraction without trailing zeros, none for a whole second), written
// by hand for the years 0 to 9999 (the others are left to AppendFormat):
// the calendar date from the Unix day with Hinnant's days-to-civil
// arithmetic, one division chain instead of time's Date and Clock.
func appendStamp(b []byte, t time.Time) []byte {
	sec := t.Unix()
	days, rem := sec/86400, sec%86400
	if rem < 0 {
		days, rem = days-1, rem+86400
	}
	year, month, day := civil(days)
	if year < 0 || year > 9999 {
		return t.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	hour, minute, second := int(rem/3600), int(rem/60%60), int(rem%60)
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+second/10), byte('0'+second%10))
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(frac)
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

// civil is the proleptic Gregorian date of the day days after 1970-01-01
// (Howard Hinnant's days_from_civil inverse; exact for every int64 day a
// time.Time's Unix seconds give).
func civil(days int64) (year, month, day int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11], March first
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	y := yoe + era*400
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

// Item is one event's share of what a Writer writes: the strings around the
// event's raw bytes, each measured once when the Item is made (the length
// appendString writes for it), so that sizing an event's envelopes and
// writing them look at no string again unless it needs escaping.
type Item struct {
	id, detailType, chat    string
	event                   []byte
	idLen, typeLen, chatLen int // stringLen of each (chatLen 0 for no chat)
}

// NewItem measures one event's parts: id and detailType are its EventBridge
// event's (AppendEvent; any value for a Detail alone), chat ("" for
// none) and event (a JSON object) are its Detail's.
func NewItem(id, detailType, chat string, event []byte) Item {
	it := Item{id: id, detailType: detailType, chat: chat, event: event, idLen: stringLen(id), typeLen: stringLen(detailType)}
	if chat != "" {
		it.chatLen = stringLen(chat)
	}
	return it
}

// DetailLen is the length AppendDetail writes for it.
func (w *Writer) DetailLen(it *Item) int {
	n := w.split + len(`,"event":`) + len(it.event) + 1
	if it.chat != "" {
		n += len(`,"chat":`) + it.chatLen
	}
	return n
}

// AppendDetail appends the JSON of it's Detail to b:
// {"destination":…[,"channel":…],"receivedAt":…[,"chat":…],"event":<event>}, the event's
// bytes copied verbatim (the event must be a JSON object).
func (w *Writer) AppendDetail(b []byte, it *Item) []byte {
	b = append(b, w.detailHead()...)
	if it.chat != "" {
		b = append(b, `,"chat":`...)
		b = appendMeasured(b, it.chat, it.chatLen)
	}
	b = append(b, `,"event":`...)
	b = append(b, it.event...)
	return append(b, '}')
}

// EventLen is the length AppendEvent writes for it (before SafeForSQS).
func (w *Writer) EventLen(it *Item) int {
	return w.headLen(it) + w.DetailLen(it) + 1
}

// AppendEvent appends the EventBridge event whose Detail is AppendDetail's,
// as Encode writes it (before SafeForSQS), and returns the buffer and the
// Detail within it: the one Detail serves the bus entry and the chat queue
// message, written once.
func (w *Writer) AppendEvent(b []byte, it *Item) (out, detail []byte) {
	b = w.appendHead(b, it)
	start := len(b)
	b = w.AppendDetail(b, it)
	detail = b[start:len(b):len(b)]
	return append(b, '}'), detail
}

const eventHead = `{"version":"0","id":`

func (w *Writer) headLen(it *Item) int {
	return len(eventHead) + it.idLen + len(`,"detail-type":`) + it.typeLen + w.end - w.split
}

func (w *Writer) appendHead(b []byte, it *Item) []byte {
	b = append(b, eventHead...)
	b = appendMeasured(b, it.id, it.idLen)
	b = append(b, `,"detail-type":`...)
	b = appendMeasured(b, it.detailType, it.typeLen)
	return append(b, w.eventTail()...)
}

// appendMeasured is appendString for s whose stringLen is n: s is copied as
// it is when n says nothing in it is escaped (appendString writes a longer
// string whenever it escapes or replaces anything).
func appendMeasured(b []byte, s string, n int) []byte {
	if n != len(s)+2 {
		return appendString(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// The UTF-8 of U+FFFE and U+FFFF, and what Encode writes instead.
var (
	escFFFE, escFFFF = []byte(`\ufffe`), []byte(`\uffff`)
	rawFFFE, rawFFFF = []byte{0xef, 0xbf, 0xbe}, []byte{0xef, 0xbf, 0xbf}
)

// SafeForSQS makes an EventBridge event written by AppendEvent safe for
// SQS (see Encode): raw U+FFFE and U+FFFF become JSON escapes. b is
// returned as is when it has neither (the common case: one scan for their
// lead byte), else a new slice.
func SafeForSQS(b []byte) []byte {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], rawFFFF[0])
		if j < 0 {
			return b
		}
		i += j
		if bytes.HasPrefix(b[i:], rawFFFE) || bytes.HasPrefix(b[i:], rawFFFF) {
			break
		}
		i++
	}
	b = bytes.ReplaceAll(b, rawFFFE, escFFFE)
	return bytes.ReplaceAll(b, rawFFFF, escFFFF)
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does).
func appendString(b []byte, s string) []byte {
	if jsonscan.Verbatim(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
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

// stringLen is the length appendString writes for s.
func stringLen(s string) int {
	if jsonscan.Verbatim(s) {
		return len(s) + 2
	}
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}
