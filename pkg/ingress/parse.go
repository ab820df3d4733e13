package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
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

// Keys the webhook and the worker read without the LINE SDK. Their spelling
// is exact: a key that differs only in case ("EVENTS", "TYPE") is refused,
// because Go's encoding/json (the worker, the SDK) would match it
// case-insensitively and read something this parser did not. A repeated key
// is refused for the same reason: parsers disagree on which one wins.
var (
	bodyKeys   = []string{"destination", "events"}
	eventKeys  = []string{"type", "webhookEventId", "source", "mode", "timestamp", "replyToken", "deliveryContext"}
	sourceKeys = []string{"type", "userId", "groupId", "roomId"}
)

// parseBody is the webhook's whole reading of a signed body, kept in one
// function so it can be optimised without touching the contract around it.
// It checks, in order: UTF-8, nesting depth, JSON syntax, a top-level object
// with exactly-spelled keys and an "events" array of at most maxEvents
// objects, each with a non-empty string "type" of at most 128 bytes; and it
// reads each event's webhookEventId and chat. Every error wraps ErrBody and
// never quotes the input.
func parseBody(b []byte, maxEvents int) (body, error) {
	var out body
	if !utf8.Valid(b) {
		return out, fmt.Errorf("%w: not valid UTF-8", ErrBody)
	}
	if d := depth(b); d > MaxDepth {
		return out, fmt.Errorf("%w: JSON nested %d levels deep (limit %d)", ErrBody, d, MaxDepth)
	}
	if !json.Valid(b) {
		return out, fmt.Errorf("%w: %v", ErrBody, jsonProblem(json.Unmarshal(b, new(json.RawMessage))))
	}
	start := skipSpace(b, 0)
	if b[start] != '{' {
		return out, fmt.Errorf("%w: not a JSON object", ErrBody)
	}
	var events []byte
	err := members(b[start:], bodyKeys, func(key string, val []byte) error {
		switch key {
		case "destination":
			s, err := stringValue(val)
			if err != nil {
				return fmt.Errorf("\"destination\" %w", err)
			}
			out.destination = s
		case "events":
			if val[0] != '[' {
				return errors.New("\"events\" is not an array")
			}
			events = val
		}
		return nil
	})
	if err != nil {
		return body{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	if events == nil {
		return body{}, fmt.Errorf("%w: no \"events\" array", ErrBody)
	}
	err = elements(events, func(i int, raw []byte) error {
		if i >= maxEvents {
			return fmt.Errorf("more than %d events", maxEvents)
		}
		if raw[0] != '{' {
			return fmt.Errorf("events[%d] is not an object", i)
		}
		ev, err := parseEvent(raw)
		if err != nil {
			return fmt.Errorf("events[%d]: %v", i, err)
		}
		out.events = append(out.events, ev)
		return nil
	})
	if err != nil {
		return body{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	return out, nil
}

// parseEvent reads one event object's type, webhookEventId and chat.
func parseEvent(raw []byte) (event, error) {
	ev := event{raw: raw}
	var group, room, user string
	err := members(raw, eventKeys, func(key string, val []byte) error {
		var err error
		switch key {
		case "type":
			ev.typ, err = stringValue(val)
		case "webhookEventId":
			ev.webhookEventID, err = stringValue(val)
		case "source":
			if val[0] == 'n' {
				return nil // null: no chat
			}
			if val[0] != '{' {
				return errors.New("\"source\" is not an object")
			}
			err = members(val, sourceKeys, func(key string, val []byte) error {
				var err error
				switch key {
				case "userId":
					user, err = stringValue(val)
				case "groupId":
					group, err = stringValue(val)
				case "roomId":
					room, err = stringValue(val)
				}
				if err != nil {
					return fmt.Errorf("\"source.%s\" %w", key, err)
				}
				return nil
			})
			return err
		}
		if err != nil {
			return fmt.Errorf("%q %w", key, err)
		}
		return nil
	})
	if err != nil {
		return event{}, err
	}
	if ev.typ == "" || len(ev.typ) > maxDetailType {
		return event{}, errors.New("no usable \"type\"")
	}
	// The chat a reply goes to: bot.Source.ChatID's rule.
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

// errNotString says a value that must be a JSON string is not one.
var errNotString = errors.New("is not a string")

// stringValue decodes a JSON string value (val is valid JSON); null reads
// as "", as encoding/json reads it.
func stringValue(val []byte) (string, error) {
	switch val[0] {
	case 'n':
		return "", nil
	case '"':
	default:
		return "", errNotString
	}
	inner := val[1 : len(val)-1]
	if !strings.ContainsRune(string(inner), '\\') {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return "", errNotString
	}
	return s, nil
}

// members calls fn with each member of the JSON object obj (valid JSON,
// starting with '{') whose key is one of known, in order. A key that is
// one of known in another case, or a known key given twice, is an error.
func members(obj []byte, known []string, fn func(key string, val []byte) error) error {
	seen := 0 // bit i: known[i] was seen
	i := skipSpace(obj, 1)
	for obj[i] != '}' {
		kEnd := valueEnd(obj, i)
		key, err := stringValue(obj[i:kEnd])
		if err != nil {
			return err
		}
		vStart := skipSpace(obj, skipSpace(obj, kEnd)+1) // past the ':'
		vEnd := valueEnd(obj, vStart)
		for k, name := range known {
			switch {
			case key == name:
				if seen&(1<<k) != 0 {
					return fmt.Errorf("key %q is given twice", name)
				}
				seen |= 1 << k
				if err := fn(name, obj[vStart:vEnd]); err != nil {
					return err
				}
			case strings.EqualFold(key, name):
				return fmt.Errorf("key %q is not spelled %q (keys are case-sensitive)", key, name)
			}
		}
		i = skipSpace(obj, vEnd)
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil
}

// elements calls fn with each element of the JSON array arr (valid JSON,
// starting with '['), with its index; an error stops the walk.
func elements(arr []byte, fn func(i int, val []byte) error) error {
	i := skipSpace(arr, 1)
	for n := 0; arr[i] != ']'; n++ {
		end := valueEnd(arr, i)
		if err := fn(n, arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value starting at b[i]; b
// is valid JSON, so only strings and nesting need care.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; ; j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
	case '{', '[':
		d := 0
		inString := false
		for j := i; ; j++ {
			c := b[j]
			switch {
			case inString:
				if c == '\\' {
					j++
				} else if c == '"' {
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				d++
			case c == '}' || c == ']':
				if d--; d == 0 {
					return j + 1
				}
			}
		}
	default: // a number, true, false or null
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
			j++
		}
		return j
	}
}
