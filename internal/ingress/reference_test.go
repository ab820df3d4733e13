package ingress

// The webhook's reading of a body before issue 16 (a validating pass, a
// depth scan, then a walk that re-read every event head), kept as the
// reference the one-pass parser is fuzzed against: same bodies accepted,
// same destination, and per event the same raw bytes, type,
// webhookEventId and chat.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	refBodyKeys   = []string{"destination", "events"}
	refEventKeys  = []string{"type", "webhookEventId", "source", "mode", "timestamp", "replyToken", "deliveryContext"}
	refSourceKeys = []string{"type", "userId", "groupId", "roomId"}
)

// FuzzParseBodyMatchesReference: parseBody and the reference agree on every
// input.
func FuzzParseBodyMatchesReference(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		f.Add(benchBody(n))
	}
	f.Add([]byte(`{"events":[{"type":"a","source":{"type":"room","roomId":"R\u00e9","userId":"U"}},{"type":"b","source":null}],"destination":null}`))
	f.Add([]byte(`{"events":[{"type":"t","webhookEventId":"x","Source":{}}]}`))
	f.Add([]byte(`{"events":[{"type":"t","source":{"userId":"a","userId":"b"}}]}`))
	f.Add([]byte("{\"events\":[{\"type\":\"t\",\"x\":\"\xef\xbf\xbf\"}]}"))
	f.Add([]byte(`{"events":[{"type":"t"}],"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseBody(b, 4)
		want, werr := refParseBody(b, 4)
		if (err == nil) != (werr == nil) {
			t.Fatalf("parseBody: %v; reference: %v\n%q", err, werr, b)
		}
		if err != nil {
			return
		}
		if got.destination != want.destination || len(got.events) != len(want.events) {
			t.Fatalf("destination %q, %d events; reference %q, %d", got.destination, len(got.events), want.destination, len(want.events))
		}
		for i, ev := range got.events {
			w := want.events[i]
			if !bytes.Equal(ev.raw, w.raw) || ev.typ != w.typ || ev.webhookEventID != w.webhookEventID || ev.chat != w.chat {
				t.Fatalf("event %d: %q %q %q %q; reference %q %q %q %q", i, ev.raw, ev.typ, ev.webhookEventID, ev.chat, w.raw, w.typ, w.webhookEventID, w.chat)
			}
		}
	})
}

func refParseBody(b []byte, maxEvents int) (body, error) {
	var out body
	if !utf8.Valid(b) {
		return out, fmt.Errorf("%w: not valid UTF-8", ErrBody)
	}
	if d := refDepth(b); d > MaxDepth {
		return out, fmt.Errorf("%w: JSON nested %d levels deep (limit %d)", ErrBody, d, MaxDepth)
	}
	if !json.Valid(b) {
		return out, fmt.Errorf("%w: %v", ErrBody, refJSONProblem(json.Unmarshal(b, new(json.RawMessage))))
	}
	start := refSkipSpace(b, 0)
	if b[start] != '{' {
		return out, fmt.Errorf("%w: not a JSON object", ErrBody)
	}
	var events []byte
	err := refMembers(b[start:], refBodyKeys, func(key string, val []byte) error {
		switch key {
		case "destination":
			s, err := refStringValue(val)
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
	err = refElements(events, func(i int, raw []byte) error {
		if i >= maxEvents {
			return fmt.Errorf("more than %d events", maxEvents)
		}
		if raw[0] != '{' {
			return fmt.Errorf("events[%d] is not an object", i)
		}
		ev, err := refParseEvent(raw)
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
func refParseEvent(raw []byte) (event, error) {
	ev := event{raw: raw}
	var group, room, user string
	err := refMembers(raw, refEventKeys, func(key string, val []byte) error {
		var err error
		switch key {
		case "type":
			ev.typ, err = refStringValue(val)
		case "webhookEventId":
			ev.webhookEventID, err = refStringValue(val)
		case "source":
			if val[0] == 'n' {
				return nil // null: no chat
			}
			if val[0] != '{' {
				return errors.New("\"source\" is not an object")
			}
			err = refMembers(val, refSourceKeys, func(key string, val []byte) error {
				var err error
				switch key {
				case "userId":
					user, err = refStringValue(val)
				case "groupId":
					group, err = refStringValue(val)
				case "roomId":
					room, err = refStringValue(val)
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

// errRefNotString says a value that must be a JSON string is not one.
var errRefNotString = errors.New("is not a string")

// stringValue decodes a JSON string value (val is valid JSON); null reads
// as "", as encoding/json reads it.
func refStringValue(val []byte) (string, error) {
	switch val[0] {
	case 'n':
		return "", nil
	case '"':
	default:
		return "", errRefNotString
	}
	inner := val[1 : len(val)-1]
	if !strings.ContainsRune(string(inner), '\\') {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return "", errRefNotString
	}
	return s, nil
}

// members calls fn with each member of the JSON object obj (valid JSON,
// starting with '{') whose key is one of known, in order. A key that is
// one of known in another case, or a known key given twice, is an error.
func refMembers(obj []byte, known []string, fn func(key string, val []byte) error) error {
	seen := 0 // bit i: known[i] was seen
	i := refSkipSpace(obj, 1)
	for obj[i] != '}' {
		kEnd := refValueEnd(obj, i)
		key, err := refStringValue(obj[i:kEnd])
		if err != nil {
			return err
		}
		vStart := refSkipSpace(obj, refSkipSpace(obj, kEnd)+1) // past the ':'
		vEnd := refValueEnd(obj, vStart)
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
		i = refSkipSpace(obj, vEnd)
		if obj[i] == ',' {
			i = refSkipSpace(obj, i+1)
		}
	}
	return nil
}

// elements calls fn with each element of the JSON array arr (valid JSON,
// starting with '['), with its index; an error stops the walk.
func refElements(arr []byte, fn func(i int, val []byte) error) error {
	i := refSkipSpace(arr, 1)
	for n := 0; arr[i] != ']'; n++ {
		end := refValueEnd(arr, i)
		if err := fn(n, arr[i:end]); err != nil {
			return err
		}
		i = refSkipSpace(arr, end)
		if arr[i] == ',' {
			i = refSkipSpace(arr, i+1)
		}
	}
	return nil
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func refSkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value starting at b[i]; b
// is valid JSON, so only strings and nesting need care.
func refValueEnd(b []byte, i int) int {
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

// depth returns the deepest nesting of objects and arrays in a JSON text,
// skipping strings. It stops counting once past MaxDepth.
func refDepth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			if d > deepest {
				deepest = d
				if deepest > MaxDepth {
					return deepest
				}
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// jsonProblem describes a JSON error without quoting the input.
func refJSONProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("unexpected JSON %s for %q", typ.Value, typ.Field)
	default:
		return "malformed JSON"
	}
}
