package lineplatform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// errNotObject marks an event that is not a single JSON object.
var errNotObject = errors.New("not a JSON object")

// MarkRedelivery returns a copy of the raw event with
// deliveryContext.isRedelivery set to true, as LINE sends a redelivered
// event. Only those bytes change: every other member keeps its exact bytes,
// order and whitespace, so the webhookEventId and anything a future event
// type carries survive untouched. A missing deliveryContext (or
// isRedelivery) is added; an event that is not one JSON object is an error.
func MarkRedelivery(event []byte) ([]byte, error) {
	outer, err := scanObject(event, "deliveryContext")
	if err != nil {
		return nil, fmt.Errorf("mark redelivery: %w", err)
	}
	if len(outer.found) == 0 {
		return insertMember(event, outer, `"deliveryContext":{"isRedelivery":true}`), nil
	}
	out := event
	// Edit from the last occurrence back, so earlier offsets stay valid.
	for i := len(outer.found) - 1; i >= 0; i-- {
		r := outer.found[i]
		val := out[r.start:r.end]
		var repl []byte
		if val[0] != '{' {
			repl = []byte(`{"isRedelivery":true}`)
		} else {
			inner, err := scanObject(val, "isRedelivery")
			if err != nil {
				return nil, fmt.Errorf("mark redelivery: deliveryContext: %w", err)
			}
			if len(inner.found) == 0 {
				repl = insertMember(val, inner, `"isRedelivery":true`)
			} else {
				repl = val
				for j := len(inner.found) - 1; j >= 0; j-- {
					repl = splice(repl, inner.found[j], []byte("true"))
				}
			}
		}
		out = splice(out, r, repl)
	}
	return out, nil
}

// span is a byte range [start, end) of a member's value.
type span struct{ start, end int }

// objectScan locates what MarkRedelivery edits in one JSON object.
type objectScan struct {
	found      []span // values of every member with the wanted name
	members    int
	closeBrace int // index of the object's closing '}'
}

// scanObject walks the members of the JSON object raw (which must be the
// whole input, bar surrounding whitespace) and records where the values of
// members named key lie.
func scanObject(raw []byte, key string) (objectScan, error) {
	var s objectScan
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return s, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return s, errNotObject
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return s, err
		}
		k, ok := kt.(string)
		if !ok {
			return s, errNotObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return s, err
		}
		end := int(dec.InputOffset())
		if k == key {
			s.found = append(s.found, span{end - len(v), end})
		}
		s.members++
	}
	if _, err := dec.Token(); err != nil {
		return s, err
	}
	s.closeBrace = int(dec.InputOffset()) - 1
	if s.closeBrace < 0 || raw[s.closeBrace] != '}' || len(bytes.Trim(raw[s.closeBrace+1:], " \t\r\n")) != 0 {
		return s, fmt.Errorf("%w: trailing data", errNotObject)
	}
	return s, nil
}

// insertMember adds member just before the object's closing brace.
func insertMember(raw []byte, s objectScan, member string) []byte {
	out := make([]byte, 0, len(raw)+len(member)+1)
	out = append(out, raw[:s.closeBrace]...)
	if s.members > 0 {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, raw[s.closeBrace:]...)
}

func splice(raw []byte, r span, repl []byte) []byte {
	out := make([]byte, 0, len(raw)-(r.end-r.start)+len(repl))
	out = append(out, raw[:r.start]...)
	out = append(out, repl...)
	return append(out, raw[r.end:]...)
}
