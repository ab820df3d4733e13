package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// skipAll validates b with one Skip and Finish.
func skipAll(b []byte, maxDepth int, strict bool) error {
	s := New(b, maxDepth, strict)
	s.Skip()
	s.Finish()
	return s.Err()
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		in   string
	}{
		{"object", `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`},
		{"whitespace everywhere", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } } \n"},
		{"empty containers", `[{},[],""]`},
		{"numbers", `[0,-0,1.5,-1.5e10,2E-3,1e+2,123456789012345678901234567890]`},
		{"leading zero", `[01]`},
		{"bare minus", `[-]`},
		{"dot without digits", `[1.]`},
		{"leading dot", `[.5]`},
		{"exponent without digits", `[1e]`},
		{"plus sign", `[+1]`},
		{"escapes", `["\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00\ud800"]`},
		{"bad escape", `["\x"]`},
		{"short unicode escape", `["\u12"]`},
		{"single quote escape", `["\'"]`},
		{"control character", "[\"a\x01b\"]"},
		{"DEL is fine", "[\"a\x7fb\"]"},
		{"unterminated string", `["abc`},
		{"unterminated after escape", `["abc\`},
		{"trailing comma in array", `[1,]`},
		{"trailing comma in object", `{"a":1,}`},
		{"leading comma", `[,1]`},
		{"missing comma", `[1 2]`},
		{"missing colon", `{"a" 1}`},
		{"non-string key", `{1:2}`},
		{"two values", `{} {}`},
		{"nothing", ``},
		{"only space", `  `},
		{"literal typos", `[nul]`},
		{"literal prefix", `[truex]`},
		{"unclosed", `{"a":[1,2`},
		{"mismatched", `{"a":[1,2}]`},
		{"NUL after value", "{}\x00"},
		{"invalid UTF-8 in a string", "[\"\xc3\x28\"]"},
		{"invalid UTF-8 outside strings", "[1\xff]"},
		{"valid multibyte", `["日本語 🎉"]`},
		{"UTF-8 surrogate half", "[\"\xed\xa0\x80\"]"},
		{"long plain string", `["` + strings.Repeat("abcdefgh", 40) + `"]`},
		{"long string, quote at the end of a word", `["` + strings.Repeat("a", 15) + `"]`},
		{"nested 10000", deep(MaxDepth)},
		{"nested 10001", deep(MaxDepth + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.in)
			want := json.Valid(b)
			if got := skipAll(b, 0, false) == nil; got != want {
				t.Fatalf("lenient: valid %v, encoding/json says %v (%v)", got, want, skipAll(b, 0, false))
			}
			wantStrict := want && utf8.Valid(b)
			if got := skipAll(b, 0, true) == nil; got != wantStrict {
				t.Fatalf("strict: valid %v, want %v", got, wantStrict)
			}
		})
	}
}

// errorCase is a text a Scanner stops on, and where and why.
type errorCase struct {
	in     string
	depth  int
	strict bool
	want   error
	offset int
}

func TestErrors(t *testing.T) {
	for _, tt := range []errorCase{
		{`[1,]`, 0, false, ErrSyntax, 3},
		{`[[[1]]]`, 2, false, ErrDepth, 2},
		{`{"a":{"b":{}}}`, 2, false, ErrDepth, 10},
		{"[\"\xff\"]", 0, true, ErrUTF8, 2},
		{`"abc`, 0, false, ErrSyntax, 4},
	} {
		err := skipAll([]byte(tt.in), tt.depth, tt.strict)
		var e *Error
		if !errors.Is(err, tt.want) || !errors.As(err, &e) || e.Offset != tt.offset {
			t.Errorf("%q: %v, want %v at %d", tt.in, err, tt.want, tt.offset)
		}
		if strings.Contains(err.Error(), tt.in) {
			t.Errorf("%q: the error quotes the input: %v", tt.in, err)
		}
	}
}

func TestMatch(t *testing.T) {
	names := []string{"type", "webhookEventId", "source"}
	key := func(s string) Str {
		sc := New([]byte(s), 0, false)
		v, _ := sc.String()
		return v
	}
	tests := []struct {
		key    string
		idx    int
		folded string
	}{
		{`"type"`, 0, ""},
		{`"source"`, 2, ""},
		{`"TYPE"`, -1, "type"},
		{`"WebhookEventID"`, -1, "webhookEventId"},
		{`"\u0074ype"`, 0, ""},
		{`"\u0054ype"`, -1, "type"},
		{`"sourcſ"`, -1, ""},       // long s folds to s, not to e
		{`"ſource"`, -1, "source"}, // long s folds to s
		{`"types"`, -1, ""},
		{`"typ"`, -1, ""},
		{`"tyqe"`, -1, ""},
	}
	for _, tt := range tests {
		idx, folded := Match(key(tt.key), names)
		if idx != tt.idx || folded != tt.folded {
			t.Errorf("Match(%s) = %d %q, want %d %q", tt.key, idx, folded, tt.idx, tt.folded)
		}
		k := key(tt.key)
		if want := strings.EqualFold(k.String(), "type"); k.Folds("type") != want {
			t.Errorf("%s.Folds(type) = %v, want %v", tt.key, !want, want)
		}
	}
	if i := FoldIndex(key(`"SOURCE"`), names); i != 2 {
		t.Errorf("FoldIndex(SOURCE) = %d", i)
	}
	if i := FoldIndex(key(`"nope"`), names); i != -1 {
		t.Errorf("FoldIndex(nope) = %d", i)
	}
}

// FuzzFolds: Str's comparisons agree with the decoded string's.
func FuzzFolds(f *testing.F) {
	f.Add(`"events"`, "events")
	f.Add(`"\u0045vents"`, "events")
	f.Add(`"K"`, "k")
	f.Fuzz(func(t *testing.T, quoted, name string) {
		s := New([]byte(quoted), 0, false)
		v, ok := s.String()
		if !ok || !s.Finish() {
			return
		}
		str := v.String()
		if v.Is(name) != (str == name) {
			t.Fatalf("Is(%q) on %q", name, str)
		}
		if v.Folds(name) != strings.EqualFold(str, name) {
			t.Fatalf("Folds(%q) on %q", name, str)
		}
		idx, folded := Match(v, []string{name})
		switch {
		case str == name:
			if idx != 0 || folded != "" {
				t.Fatalf("Match exact: %d %q", idx, folded)
			}
		case strings.EqualFold(str, name):
			if idx != -1 || folded != name {
				t.Fatalf("Match folded: %d %q", idx, folded)
			}
		default:
			if idx != -1 || folded != "" {
				t.Fatalf("Match none: %d %q", idx, folded)
			}
		}
	})
}

func TestCursorGrammar(t *testing.T) {
	// The cursor API refuses what the grammar refuses, in the places a
	// walk reads structurally.
	tests := []struct {
		in   string
		walk func(s *Scanner)
	}{
		{`{"a":1,}`, func(s *Scanner) {
			s.Object()
			for _, ok := s.Key(); ok; _, ok = s.Key() {
				s.Skip()
			}
		}},
		{`{"a":1 "b":2}`, func(s *Scanner) {
			s.Object()
			for _, ok := s.Key(); ok; _, ok = s.Key() {
				s.Skip()
			}
		}},
		{`[1,]`, func(s *Scanner) {
			s.Array()
			for s.Elem() {
				s.Skip()
			}
		}},
		{`[,1]`, func(s *Scanner) {
			s.Array()
			for s.Elem() {
				s.Skip()
			}
		}},
		{`{"a"}`, func(s *Scanner) { s.Object(); s.Key() }},
		{`"x"`, func(s *Scanner) { s.Object() }},
		{`[1]`, func(s *Scanner) { s.String() }},
	}
	for _, tt := range tests {
		s := New([]byte(tt.in), 0, false)
		tt.walk(s)
		s.Finish()
		if !errors.Is(s.Err(), ErrSyntax) {
			t.Errorf("%s: %v, want ErrSyntax", tt.in, s.Err())
		}
	}
}

// BenchmarkSkip is the scanner's speed on a LINE body against
// encoding/json's validity check (json.Valid, the least encoding/json does).
func BenchmarkSkip(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"destination":"U0123456789abcdef0123456789abcdef","events":[`)
	for i := range 10 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"replyToken":"nHuyWiB7yP5Zw52FIkcQobQuGDXCTA","type":"message","mode":"active","timestamp":1462629479859,"source":{"type":"user","userId":"U4af4980629a0b5c7d02b0f1c7f0c4e3c"},"webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3Z0","deliveryContext":{"isRedelivery":false},"message":{"id":"444573844083572737","type":"text","quoteToken":"q3Plxr4AgKd...","text":"Hello, world! こんにちは"}}`)
	}
	body.WriteString(`]}`)
	in := body.Bytes()
	b.Run("impl=jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		var s Scanner
		for b.Loop() {
			s.Reset(in, 64, true)
			s.Skip()
			if !s.Finish() {
				b.Fatal(s.Err())
			}
		}
	})
	b.Run("impl=json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			if !json.Valid(in) {
				b.Fatal("invalid")
			}
		}
	})
}

// FuzzVerbatim: Verbatim agrees with the byte-by-byte definition, and a
// verbatim string quoted is a JSON string that decodes to itself.
func FuzzVerbatim(f *testing.F) {
	for _, s := range []string{"", "U4af4980629a0b5c7d02b0f1c7f0c4e3c", "a\"b", "12345678\\", "日本", "0123456\x1f", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := true
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				want = false
			}
		}
		if got := Verbatim(s); got != want {
			t.Fatalf("Verbatim(%q) = %v", s, got)
		}
		if want {
			var back string
			if err := json.Unmarshal([]byte(`"`+s+`"`), &back); err != nil || back != s {
				t.Fatalf("%q quoted decodes to %q (%v)", s, back, err)
			}
		}
	})
}
