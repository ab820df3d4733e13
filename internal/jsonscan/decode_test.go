package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeAny reads one value with the cursor API into what encoding/json
// decodes into an interface{} (UseNumber).
func decodeAny(s *Scanner) any {
	switch s.Peek() {
	case Object:
		s.Object()
		m := map[string]any{}
		for {
			k, ok := s.Key()
			if !ok {
				return m
			}
			m[k.String()] = decodeAny(s)
		}
	case Array:
		s.Array()
		a := []any{}
		for s.Elem() {
			a = append(a, decodeAny(s))
		}
		return a
	case String:
		v, _ := s.String()
		return v.String()
	}
	lit, _ := s.Literal()
	switch string(lit) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	return json.Number(lit)
}

// members reads an object's members' raw values (the last of a repeated
// key wins, as in encoding/json) with Skip's spans.
func members(b []byte) (map[string]json.RawMessage, error) {
	s := New(b, 0, false)
	if s.Peek() != Object {
		s.Fail(ErrSyntax)
		return nil, s.Err()
	}
	s.Object()
	out := map[string]json.RawMessage{}
	for {
		k, ok := s.Key()
		if !ok {
			break
		}
		start, end, _ := s.Skip()
		out[k.String()] = b[start:end]
	}
	s.Finish()
	return out, s.Err()
}

// FuzzScanner is the differential test against encoding/json: the same
// texts are valid (strict: and valid UTF-8), every decoded string and
// number is the same, and the spans Skip returns are the raw values
// encoding/json extracts.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{"destination":"U1","events":[{"type":"message","text":"a\nb"}]}`,
		`{"a":1,"a":2,"A":3}`,
		`["\u00e9\ud83d\ude00\ud800x\udc00","\u0000"]`,
		"[\"\xff\xfe\",\"\xed\xa0\x80\"]",
		`[1.5e-3,-0,0.0,1E9]`,
		`{"k":{"l":[{"m":null}]}}`,
		` [ true , false ] `,
		`[1,]`, `{"a":}`, `"`, `[`,
		`["` + strings.Repeat("x", 30) + `\"` + strings.Repeat("y", 9) + `"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		if got := skipAll(b, 0, false) == nil; got != valid {
			t.Fatalf("lenient valid %v, encoding/json %v: %q", got, valid, b)
		}
		if got := skipAll(b, 0, true) == nil; got != (valid && utf8.Valid(b)) {
			t.Fatalf("strict valid %v: %q", got, b)
		}
		if !valid {
			return
		}
		s := New(b, 0, false)
		got := decodeAny(s)
		s.Finish()
		if s.Err() != nil {
			t.Fatalf("cursor walk failed on valid JSON: %v", s.Err())
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %#v, encoding/json %#v", got, want)
		}
		var wantRaw map[string]json.RawMessage
		if json.Unmarshal(b, &wantRaw) == nil && wantRaw != nil {
			gotRaw, err := members(b)
			if err != nil || !reflect.DeepEqual(gotRaw, wantRaw) {
				t.Fatalf("spans %q (%v), encoding/json %q", gotRaw, err, wantRaw)
			}
		}
	})
}
