package envelope

import (
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/jsonscan"
)

// EventReader reads the LINE event inside a record's Detail during the one
// pass over the record (bot.Reader does): it is called with the scanner at
// the event object and must read exactly that value.
type EventReader interface {
	ReadEvent(s *jsonscan.Scanner)
}

// Decode parses an SQS record body into the EventBridge event and the
// envelope inside it, as json.Unmarshal into Event, then into Detail, reads
// them. Every error wraps ErrMalformed.
func Decode(body []byte) (Event, Detail, error) {
	d := decoder{keep: true}
	if err := d.decode(body, nil); err != nil {
		return Event{}, Detail{}, err
	}
	return d.ev, d.env, nil
}

// DecodeRecord is the worker's reading of a record body: Decode's checks
// and Detail, in one pass over the body, with r (when not nil) reading the
// event in the same pass. The EventBridge event's own fields are checked as
// Decode checks them but not kept. The Detail's Event is a slice of one
// copy of body, its strings are copies too. Every error wraps ErrMalformed.
func DecodeRecord(body string, r EventReader) (Detail, error) {
	var d decoder
	if err := d.decode([]byte(body), r); err != nil {
		return Detail{}, err
	}
	return d.env, nil
}

// The keys of Event and Detail, matched as encoding/json matches struct
// fields: the exact spelling, else case-insensitively; the last occurrence
// wins.
var (
	eventKeys = jsonscan.NewKeys("version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail")
	// The Detail's, in the order of its fields (channel, added later, last).
	detailKeys = jsonscan.NewKeys("destination", "receivedAt", "chat", "event", "channel")
)

// Indexes into eventKeys: the others are strings.
const (
	keyTime = iota + 5
	_
	keyResources
	keyDetail
)

// Indexes into detailKeys.
const (
	keyDestination = iota
	keyReceivedAt
	keyChat
	keyEvent
	keyChannel
)

// decoder is one pass over a record body.
type decoder struct {
	s    jsonscan.Scanner
	b    []byte
	keep bool // keep the Event's own fields (Decode)

	ev  Event
	err error // the first error decoding the Event's own fields

	// The last detail's: json.Unmarshal decodes only the last one.
	env       Detail
	detailErr error
	detail    []byte // its raw bytes
}

func (d *decoder) decode(body []byte, r EventReader) error {
	d.b = body
	d.s.Reset(d.b, jsonscan.MaxDepth, false)
	switch d.s.Peek() {
	case jsonscan.Object:
		d.members(r)
	case jsonscan.Null:
		d.s.Skip()
	default:
		d.s.Skip()
		d.fail(&d.err, "the body is not a JSON object")
	}
	d.s.Finish()
	switch {
	case d.s.Err() != nil:
		return fmt.Errorf("%w: eventbridge event: %v", ErrMalformed, d.s.Err())
	case d.err != nil:
		return fmt.Errorf("%w: eventbridge event: %v", ErrMalformed, d.err)
	case len(d.detail) == 0 || d.detail[0] != '{':
		return fmt.Errorf("%w: detail is not a JSON object", ErrMalformed)
	case d.detailErr != nil:
		return fmt.Errorf("%w: detail: %v", ErrMalformed, d.detailErr)
	case len(d.env.Event) == 0 || d.env.Event[0] != '{':
		return fmt.Errorf("%w: detail.event is not a JSON object", ErrMalformed)
	}
	if d.keep {
		d.ev.Detail = d.detail
	}
	return nil
}

func (d *decoder) fail(dst *error, what string) {
	if *dst == nil {
		*dst = fmt.Errorf("%s", what)
	}
}

func (d *decoder) members(r EventReader) {
	d.s.Object()
	strs := [...]*string{&d.ev.Version, &d.ev.ID, &d.ev.DetailType, &d.ev.Source, &d.ev.Account, nil, &d.ev.Region}
	for {
		i, _, ok := d.s.Member(eventKeys)
		switch {
		case !ok:
			return
		case i == keyDetail:
			d.readDetail(r)
		case i == keyTime:
			d.time(&d.ev.Time, &d.err)
		case i == keyResources:
			d.resources()
		case i >= 0:
			d.str(strs[i], &d.err)
		default:
			d.s.Skip()
		}
	}
}

// str reads a string field as encoding/json does: a string sets it (when
// the decoder keeps it or dst is the Detail's), null leaves it, anything
// else is an error in errp.
func (d *decoder) str(dst *string, errp *error) {
	switch d.s.Peek() {
	case jsonscan.String:
		d.s.ReadString()
		if d.keep || errp == &d.detailErr {
			*dst = d.s.Last().String()
		}
	case jsonscan.Null:
		d.s.Skip()
	default:
		d.s.Skip()
		d.fail(errp, "a string field holds another kind of value")
	}
}

// time reads a time field with time.Time's own UnmarshalJSON, as
// encoding/json does for any value (null leaves it).
func (d *decoder) time(dst *time.Time, errp *error) {
	start, end, ok := d.s.Skip()
	if !ok {
		return
	}
	var t time.Time
	if err := t.UnmarshalJSON(d.b[start:end]); err != nil {
		d.fail(errp, "a time field: "+err.Error())
		return
	}
	if string(d.b[start:end]) != "null" {
		*dst = t
	}
}

// resources reads []string as encoding/json does: an array of strings (a
// null element is ""), or null.
func (d *decoder) resources() {
	switch d.s.Peek() {
	case jsonscan.Null:
		d.s.Skip()
		d.ev.Resources = nil
		return
	case jsonscan.Array:
	default:
		d.s.Skip()
		d.fail(&d.err, "resources is not an array")
		return
	}
	d.s.Array()
	var out []string
	if d.keep {
		out = []string{}
	}
	for d.s.Elem() {
		var v string
		d.str(&v, &d.err)
		if d.keep {
			out = append(out, v)
		}
	}
	d.ev.Resources = out
}

// readDetail reads a "detail": its raw bytes, and when it is an object (the
// one the worker reads) its fields and the event inside, r reading it.
func (d *decoder) readDetail(r EventReader) {
	d.env, d.detailErr = Detail{}, nil
	if d.s.Peek() != jsonscan.Object {
		start, end, _ := d.s.Skip()
		d.detail = d.b[start:end]
		return
	}
	start := d.s.Pos()
	d.s.Object()
	strs := [...]*string{keyDestination: &d.env.Destination, keyChat: &d.env.Chat, keyChannel: &d.env.Channel}
	for {
		i, _, ok := d.s.Member(detailKeys)
		switch {
		case !ok:
			end := d.s.Pos()
			d.detail = d.b[start:end:end]
			return
		case i == keyEvent:
			d.event(r)
		case i == keyReceivedAt:
			d.time(&d.env.ReceivedAt, &d.detailErr)
		case i >= 0:
			d.str(strs[i], &d.detailErr)
		default:
			d.s.Skip()
		}
	}
}

// event reads the Detail's "event": its raw bytes, r reading it when it is
// an object.
func (d *decoder) event(r EventReader) {
	var start int
	if d.s.Peek() == jsonscan.Object && r != nil {
		start = d.s.Pos()
		r.ReadEvent(&d.s)
	} else {
		start, _, _ = d.s.Skip()
	}
	end := d.s.Pos()
	d.env.Event = d.b[start:end:end]
}
