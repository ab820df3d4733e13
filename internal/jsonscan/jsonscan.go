// Package jsonscan reads a JSON text in one pass, front to back, validating
// every byte as it goes: the webhook reads a LINE body and the worker an SQS
// record with it, each walking down to the few values it needs and skipping
// the rest, instead of a validating pass followed by decoding passes.
//
// What it accepts is exactly what encoding/json accepts (RFC 8259: the same
// grammar, whitespace and string escapes), with two limits: a nesting depth
// (encoding/json's is 10000) and, optionally, strict UTF-8 (encoding/json
// accepts invalid UTF-8 inside strings and replaces it when decoding; a
// strict Scanner refuses it, as the webhook does). Decoded strings are what
// encoding/json decodes them to.
//
// A Scanner is a cursor: the caller says what it expects next (Object then
// Key, Array then Elem, String, Skip for a value it does not read) and
// reads Err once it is done. The first error sticks: every later call
// returns at once, so a walk can check Err at the end only.
package jsonscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit: a text nested deeper is not
// valid for it.
const MaxDepth = 10000

// Error is where a scan stopped and why (Err is ErrSyntax, ErrDepth or
// ErrUTF8).
type Error struct {
	Offset int
	Err    error
}

// Errors a Scanner stops with, wrapped in an *Error giving the offset. None
// quotes the input.
var (
	ErrSyntax = errors.New("malformed JSON")
	ErrDepth  = errors.New("JSON nested too deep")
	ErrUTF8   = errors.New("invalid UTF-8")
)

// Error reports the reason and the byte offset, never the input.
func (e *Error) Error() string { return fmt.Sprintf("%v at byte %d", e.Err, e.Offset) }

// Unwrap returns the reason, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// Kind is the kind of the value a Scanner is at, from its first byte.
type Kind uint8

// The kinds of JSON values; Invalid for a byte no value starts with (and
// for the end of the input).
const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	Bool
	Null
)

// Str is a string read by Key or String: its raw bytes between the quotes
// and what was seen in them, so that the common string (no escape, valid
// UTF-8) converts without a second look.
type Str struct {
	Raw   []byte // between the quotes, as in the input
	Off   int    // where Raw starts in the input
	flags uint8  // escaped, nonASCII, badUTF8 (small: a Str travels in registers)
}

// Escaped reports a backslash escape in the string.
func (s Str) Escaped() bool { return s.flags&escaped != 0 }

// NonASCII reports a byte >= 0x80 in the string.
func (s Str) NonASCII() bool { return s.flags&nonASCII != 0 }

// BadUTF8 reports invalid UTF-8 in the string (only a lenient Scanner
// reads it).
func (s Str) BadUTF8() bool { return s.flags&badUTF8 != 0 }

// Plain reports whether Raw is the decoded string itself (no escape, no
// invalid UTF-8): a caller holding the input elsewhere can take the decoded
// string from there, without decoding.
func (s Str) Plain() bool { return s.flags&(escaped|badUTF8) == 0 }

// String returns the decoded string, as encoding/json decodes it (escapes
// resolved, invalid UTF-8 and lone surrogates replaced by U+FFFD).
func (s Str) String() string {
	if s.Plain() {
		return string(s.Raw)
	}
	return string(unquote(s.Raw))
}

// Is reports whether the decoded string is name.
func (s Str) Is(name string) bool {
	if s.Plain() {
		return string(s.Raw) == name
	}
	return string(unquote(s.Raw)) == name
}

// Folds reports whether the decoded string equals name under Unicode case
// folding (strings.EqualFold): how encoding/json matches an object key to a
// struct field when no field has the key's exact spelling.
func (s Str) Folds(name string) bool {
	if s.flags&(escaped|nonASCII) == 0 {
		return len(s.Raw) == len(name) && asciiEqualFold(s.Raw, name)
	}
	return strings.EqualFold(s.String(), name)
}

// Keys is a set of object keys to look keys up in quickly (Match); build
// it once with NewKeys.
type Keys struct {
	names []string
	byLen [maxKeyLen + 1][]int // indexes of the names of each length
}

const maxKeyLen = 64

// NewKeys returns the set of names, in order (Match returns indexes into
// it).
func NewKeys(names ...string) *Keys {
	k := &Keys{names: names}
	for i, n := range names {
		if len(n) <= maxKeyLen {
			k.byLen[len(n)] = append(k.byLen[len(n)], i)
		}
	}
	return k
}

// Names returns the set's names, in order.
func (k *Keys) Names() []string { return k.names }

// Match is the package's Match on the set's names, looking only at the
// names of the key's length when the key is plain ASCII (case folding
// keeps ASCII lengths).
func (k *Keys) Match(key Str) (int, string) {
	i, exact := k.match(key.Raw, key.flags)
	if i < 0 || exact {
		return i, ""
	}
	return -1, k.names[i]
}

// match returns the index of the name raw (a key's bytes, with its string
// flags) is spelled as, exact true; else of the first name it equals
// under case folding, exact false; else -1.
func (k *Keys) match(raw []byte, flags uint8) (int, bool) {
	if flags&(escaped|nonASCII) != 0 {
		key := Str{Raw: raw, flags: flags}.String()
		folded := -1
		for i, n := range k.names {
			if key == n {
				return i, true
			}
			if folded < 0 && strings.EqualFold(key, n) {
				folded = i
			}
		}
		return folded, false
	}
	if len(raw) > maxKeyLen {
		return -1, false
	}
	folded := -1
	for _, i := range k.byLen[len(raw)] {
		n := k.names[i]
		if string(raw) == n {
			return i, true
		}
		if folded < 0 && asciiEqualFold(raw, n) {
			folded = i
		}
	}
	return folded, false
}

// Match looks key up among names the way an exact-key reader must: it
// returns the index of the name key is spelled as exactly, or -1 and the
// name key matches only under case folding (a key encoding/json would read
// as that name), or -1 and "" when key is none of them.
func Match(key Str, names []string) (int, string) {
	if key.flags&(escaped|nonASCII) == 0 {
		folded := ""
		for i, n := range names {
			if len(n) != len(key.Raw) {
				continue
			}
			if string(key.Raw) == n {
				return i, ""
			}
			if folded == "" && asciiEqualFold(key.Raw, n) {
				folded = n
			}
		}
		return -1, folded
	}
	k := key.String()
	folded := ""
	for i, n := range names {
		if k == n {
			return i, ""
		}
		if folded == "" && strings.EqualFold(k, n) {
			folded = n
		}
	}
	return -1, folded
}

// FoldIndex returns the index of the name an encoding/json struct decode
// assigns key to: the exact spelling first, else the first name equal under
// case folding; -1 for none.
func FoldIndex(key Str, names []string) int {
	i, folded := Match(key, names)
	if i >= 0 || folded == "" {
		return i
	}
	for j, n := range names {
		if n == folded {
			return j
		}
	}
	return -1
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range len(b) {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if c|0x20 != d|0x20 || c|0x20 < 'a' || c|0x20 > 'z' {
			return false
		}
	}
	return true
}

// Scanner is one pass over a JSON text. The zero value is not usable: make
// one with New (or Reset one).
type Scanner struct {
	b        []byte
	i        int
	depth    int
	maxDepth int
	strict   bool
	first    bool // at the first member or element of the innermost container
	err      error

	strStart, strEnd int // the last string read (a key or a value), b[strStart:strEnd]
	strFlags         uint8
}

// New returns a Scanner over b allowing maxDepth levels of nesting (<= 0:
// MaxDepth); strict refuses invalid UTF-8 in strings.
func New(b []byte, maxDepth int, strict bool) *Scanner {
	s := &Scanner{}
	s.Reset(b, maxDepth, strict)
	return s
}

// Reset makes s a new scan of b (see New), so a Scanner can live on the
// stack or be reused.
func (s *Scanner) Reset(b []byte, maxDepth int, strict bool) {
	if maxDepth <= 0 {
		maxDepth = MaxDepth
	}
	*s = Scanner{b: b, maxDepth: maxDepth, strict: strict, first: true}
}

// Err is the error the scan stopped with, nil while it is fine.
func (s *Scanner) Err() error { return s.err }

// Fail stops the scan with err (unless it already stopped): for a caller
// that found the text well-formed but not what it wants.
func (s *Scanner) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Bytes is the input.
func (s *Scanner) Bytes() []byte { return s.b }

// Pos is the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.i }

func (s *Scanner) fail(i int, err error) {
	if s.err == nil {
		s.err = &Error{Offset: i, Err: err}
	}
	s.i = len(s.b)
}

// space is the JSON whitespace.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (s *Scanner) ws(i int) int {
	if i < len(s.b) && s.b[i] > ' ' { // compact JSON: no whitespace here
		return i
	}
	for i < len(s.b) && space[s.b[i]] {
		i++
	}
	return i
}

func (s *Scanner) at(i int) byte {
	if i < len(s.b) {
		return s.b[i]
	}
	return 0
}

// Peek returns the kind of the next value without reading it.
func (s *Scanner) Peek() Kind {
	if s.err != nil {
		return Invalid
	}
	s.i = s.ws(s.i)
	switch s.at(s.i) {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return Invalid
}

// Object reads the '{' of an object; its members follow with Key.
func (s *Scanner) Object() bool { return s.open('{') }

// Array reads the '[' of an array; its elements follow with Elem.
func (s *Scanner) Array() bool { return s.open('[') }

func (s *Scanner) open(c byte) bool {
	if s.err != nil {
		return false
	}
	i := s.ws(s.i)
	if s.at(i) != c {
		s.fail(i, ErrSyntax)
		return false
	}
	if s.depth++; s.depth > s.maxDepth {
		s.fail(i, ErrDepth)
		return false
	}
	s.i, s.first = i+1, true
	return true
}

// Key reads the next member's key and its ':'; the caller then reads the
// value (Skip for one it does not want). It returns false at the object's
// '}', which it reads, or when the scan stopped.
func (s *Scanner) Key() (Str, bool) {
	if !s.key() {
		return Str{}, false
	}
	return s.Last(), true
}

// Member is Key for a reader that wants some keys only: it reads the next
// member's key and its ':' and looks the key up in keys, returning the
// index of the name it matches (-1 for none) and whether it is spelled
// exactly so (false: it matches only under case folding, which is how
// encoding/json would still match it). ok is false at the object's '}'
// (which it reads) or when the scan stopped. Last returns the key.
func (s *Scanner) Member(keys *Keys) (i int, exact, ok bool) {
	if !s.key() {
		return -1, false, false
	}
	i, exact = keys.match(s.b[s.strStart:s.strEnd], s.strFlags)
	return i, exact, true
}

// Last is the last string read: the key of Key or Member, or the value of
// String or ReadString.
func (s *Scanner) Last() Str {
	return Str{Raw: s.b[s.strStart:s.strEnd], Off: s.strStart, flags: s.strFlags}
}

// next moves to the innermost container's next item, past its ',' unless
// it is the first, and returns where it starts; at the container's end
// (end: '}' or ']') it reads it and returns false.
func (s *Scanner) next(end byte) (int, bool) {
	if s.err != nil {
		return 0, false
	}
	i := s.ws(s.i)
	c := s.at(i)
	if c == end {
		s.i, s.first = i+1, false
		s.depth--
		return 0, false
	}
	if !s.first {
		if c != ',' {
			s.fail(i, ErrSyntax)
			return 0, false
		}
		i = s.ws(i + 1)
	}
	s.first = false
	return i, true
}

func (s *Scanner) key() bool {
	i, ok := s.next('}')
	if !ok {
		return false
	}
	if i = s.quoted(i); i < 0 {
		return false
	}
	if i = s.ws(i); s.at(i) != ':' {
		s.fail(i, ErrSyntax)
		return false
	}
	s.i = i + 1
	return true
}

// Elem reports whether the array has another element, reading the ',' before
// it; the caller then reads the element. It returns false at the array's
// ']', which it reads, or when the scan stopped.
func (s *Scanner) Elem() bool {
	i, ok := s.next(']')
	if ok {
		s.i = i
	}
	return ok
}

// String reads a string value.
func (s *Scanner) String() (Str, bool) {
	if !s.ReadString() {
		return Str{}, false
	}
	return s.Last(), true
}

// ReadString reads a string value, which Last then returns (String in two
// steps, cheaper in a hot loop).
func (s *Scanner) ReadString() bool {
	if s.err != nil {
		return false
	}
	i := s.quoted(s.ws(s.i))
	if i < 0 {
		return false
	}
	s.i, s.first = i, false
	return true
}

// quoted reads the string whose opening quote is at b[i] as the last string
// read (Last) and returns the offset past it, or -1.
func (s *Scanner) quoted(i int) int {
	if s.at(i) != '"' {
		s.fail(i, ErrSyntax)
		return -1
	}
	end, flags := s.str(i + 1)
	if end < 0 {
		return -1
	}
	s.strStart, s.strEnd, s.strFlags = i+1, end, flags
	return end + 1
}

// Skip reads one value of any kind, validating all of it, and returns where
// it starts and ends (b[start:end] is the value); ok is false when the
// scan stopped.
func (s *Scanner) Skip() (start, end int, ok bool) {
	if s.err != nil {
		return 0, 0, false
	}
	start = s.ws(s.i)
	end = s.value(start)
	if end < 0 {
		return 0, 0, false
	}
	s.i, s.first = end, false
	return start, end, true
}

// Literal reads a number, true, false or null and returns its bytes.
func (s *Scanner) Literal() ([]byte, bool) {
	if s.err != nil {
		return nil, false
	}
	start := s.ws(s.i)
	var end int
	switch c := s.at(start); c {
	case 't', 'f', 'n':
		end = s.literal(start)
	default:
		if c != '-' && (c < '0' || c > '9') {
			s.fail(start, ErrSyntax)
			return nil, false
		}
		end = s.number(start)
	}
	if end < 0 {
		return nil, false
	}
	s.i, s.first = end, false
	return s.b[start:end], true
}

// Finish checks that nothing but whitespace follows the value read: a JSON
// text is one value.
func (s *Scanner) Finish() bool {
	if s.err != nil {
		return false
	}
	if i := s.ws(s.i); i != len(s.b) {
		s.fail(i, ErrSyntax)
		return false
	}
	return true
}

// value validates the value starting at b[i] (whitespace skipped) and
// returns the offset just past it, or -1 (the error set).
func (s *Scanner) value(i int) int {
	switch c := s.at(i); c {
	case '"':
		end, _ := s.str(i + 1)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{':
		return s.container(i, '}')
	case '[':
		return s.container(i, ']')
	case 't', 'f', 'n':
		return s.literal(i)
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return s.number(i)
		}
		s.fail(i, ErrSyntax)
		return -1
	}
}

// container validates the object or array whose opening byte is b[i]
// (closing with end: '}' or ']').
func (s *Scanner) container(i int, end byte) int {
	if s.depth++; s.depth > s.maxDepth {
		s.fail(i, ErrDepth)
		return -1
	}
	i = s.ws(i + 1)
	if s.at(i) == end {
		s.depth--
		return i + 1
	}
	for {
		if end == '}' { // a member: its key and ':' first
			if s.at(i) != '"' {
				s.fail(i, ErrSyntax)
				return -1
			}
			if i, _ = s.str(i + 1); i < 0 {
				return -1
			}
			if i = s.ws(i + 1); s.at(i) != ':' {
				s.fail(i, ErrSyntax)
				return -1
			}
			i = s.ws(i + 1)
		}
		if i = s.value(i); i < 0 {
			return -1
		}
		switch i = s.ws(i); s.at(i) {
		case ',':
			i = s.ws(i + 1)
		case end:
			s.depth--
			return i + 1
		default:
			s.fail(i, ErrSyntax)
			return -1
		}
	}
}

func (s *Scanner) literal(i int) int {
	var word string
	switch s.at(i) {
	case 't':
		word = "true"
	case 'f':
		word = "false"
	default:
		word = "null"
	}
	if len(s.b)-i < len(word) || string(s.b[i:i+len(word)]) != word {
		s.fail(i, ErrSyntax)
		return -1
	}
	return i + len(word)
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func (s *Scanner) number(i int) int {
	start := i
	if s.at(i) == '-' {
		i++
	}
	switch c := s.at(i); {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i = s.digits(i + 1)
	default:
		s.fail(start, ErrSyntax)
		return -1
	}
	if s.at(i) == '.' {
		j := s.digits(i + 1)
		if j == i+1 {
			s.fail(start, ErrSyntax)
			return -1
		}
		i = j
	}
	if c := s.at(i); c == 'e' || c == 'E' {
		i++
		if c := s.at(i); c == '+' || c == '-' {
			i++
		}
		j := s.digits(i)
		if j == i {
			s.fail(start, ErrSyntax)
			return -1
		}
		i = j
	}
	return i
}

func (s *Scanner) digits(i int) int {
	for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
		i++
	}
	return i
}

// SWAR constants: a byte repeated over a 64-bit word.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special returns a word whose byte k has its high bit set if byte k of w
// needs a look of its own in a string (a quote, a backslash, a control
// character, a byte >= 0x80), exactly for the lowest such byte (the bits
// above it may be false alarms): (x - ones) &^ x marks a zero byte of x, and
// (w - ones*0x20) &^ w a byte of w below 0x20.
func special(w uint64) uint64 {
	quote := w ^ (ones * '"')
	slash := w ^ (ones * '\\')
	m := (quote - ones) &^ quote
	m |= (slash - ones) &^ slash
	m |= (w - ones*0x20) &^ w
	return (m | w) & highs
}

// Verbatim reports whether s is ASCII with no quote, backslash or control
// character: a JSON string holds it as it is, between quotes, and reading
// such a string back needs no decoding (eight bytes at a time).
func Verbatim(s string) bool {
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if special(w) != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// String flags, as str returns them.
const (
	escaped uint8 = 1 << iota
	nonASCII
	badUTF8
)

// str validates the string whose first byte after the opening quote is
// b[i]; it returns the offset of the closing quote (or -1) and what it saw.
// The common string (plain ASCII, closed eight bytes or more before the
// input's end) is read here, eight bytes at a time; anything else from
// the first byte that needs a look on is strRest's.
func (s *Scanner) str(i int) (int, uint8) {
	b := s.b
	for len(b)-i >= 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if m := special(w); m != 0 {
			k := bits.TrailingZeros64(m) // the high bit of the first special byte
			if byte(w>>(k-7)) == '"' {
				return i + k>>3, 0
			}
			return s.strRest(i+k>>3, 0)
		}
		i += 8
	}
	return s.strRest(i, 0)
}

// strRest is str from b[i] on, with flags seen so far.
func (s *Scanner) strRest(i int, flags uint8) (int, uint8) {
	b := s.b
	for {
		// Eight bytes at a time to the first byte that needs a look.
		for len(b)-i >= 8 {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			s.fail(i, ErrSyntax)
			return -1, 0
		}
		switch c := b[i]; {
		case c == '"':
			return i, flags
		case c == '\\':
			flags |= escaped
			n := s.escape(i)
			if n < 0 {
				return -1, 0
			}
			i += n
		case c < 0x20:
			s.fail(i, ErrSyntax)
			return -1, 0
		case c < utf8.RuneSelf:
			i++
		default:
			flags |= nonASCII
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				if s.strict {
					s.fail(i, ErrUTF8)
					return -1, 0
				}
				flags |= badUTF8
			}
			i += size
		}
	}
}

// escape validates the escape at b[i] (a backslash) and returns its length.
func (s *Scanner) escape(i int) int {
	switch s.at(i + 1) {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(s.b)-i >= 6 && hex4(s.b[i+2:i+6]) >= 0 {
			return 6
		}
	}
	s.fail(i, ErrSyntax)
	return -1
}

// hex4 decodes four hex digits, -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote decodes the inside of a valid JSON string as encoding/json does:
// escapes resolved, a valid surrogate pair combined, a lone surrogate and
// each byte of invalid UTF-8 replaced by U+FFFD.
func unquote(raw []byte) []byte {
	out := make([]byte, 0, len(raw)+utf8.UTFMax)
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch raw[i+1] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != unicode.ReplacementChar {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			out = utf8.AppendRune(out, r)
			i += size
		}
	}
	return out
}
