// Package pattern compiles and evaluates Amazon EventBridge event patterns, so
// the in-memory cloud routes events exactly as an EventBridge rule would.
//
// The semantics follow the EventBridge user guide ("Amazon EventBridge event
// patterns" and "Content filtering in Amazon EventBridge event patterns"):
// every field named in the pattern must match (AND); the values in a leaf
// array are alternatives (OR); an array in the event matches when any of its
// elements matches; "$or" lists alternative sub-patterns. Supported filters:
// exact strings, numbers, booleans and null; prefix and suffix (both also
// with equals-ignore-case); anything-but (a value, a list, prefix, suffix,
// equals-ignore-case, wildcard); numeric ranges; exists; equals-ignore-case;
// wildcard; cidr.
//
// Matching looks at leaf values only (strings, numbers, booleans, null): an
// object in the event is never a leaf, so {"exists": true} on an object field
// does not match, as the user guide documents. Fields of different elements
// of an array of objects are matched independently, like EventBridge does.
package pattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// ErrInvalid marks a pattern EventBridge would reject with
// InvalidEventPatternException. Every error Compile returns wraps it.
var ErrInvalid = errors.New("invalid event pattern")

// Pattern is a compiled event pattern. It is immutable and safe for
// concurrent use.
type Pattern struct {
	clauses []clause
}

// clause is one condition of a conjunction: either a leaf (path + filters,
// any of which may match) or a $or of alternative conjunctions.
type clause struct {
	path    string
	filters []filter
	or      [][]clause
}

// sep joins the keys of a path. It cannot occur in a JSON key produced by a
// valid pattern author and is never confused with ".", which may.
const sep = "\x00"

// Compile parses an EventBridge event pattern. It rejects what EventBridge
// rejects: non-JSON, a non-object or empty pattern, a field whose value is
// neither an object nor an array, an empty array or object, an unknown or
// malformed filter, a bad numeric range, a bad CIDR, or a bad wildcard.
func Compile(pattern []byte) (*Pattern, error) {
	v, err := decode(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrInvalid, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the pattern must be a JSON object", ErrInvalid)
	}
	if len(obj) == 0 {
		return nil, fmt.Errorf("%w: the pattern is empty", ErrInvalid)
	}
	cs, err := compileObject(obj, "")
	if err != nil {
		return nil, err
	}
	return &Pattern{clauses: cs}, nil
}

// Match reports whether event, the full EventBridge event JSON (version, id,
// detail-type, source, account, time, region, resources, detail), matches.
// An event that is not a JSON object matches nothing.
func (p *Pattern) Match(event []byte) bool {
	v, err := decode(event)
	if err != nil {
		return false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	flat := map[string][]any{}
	flatten(obj, "", flat)
	return matchAll(p.clauses, flat)
}

// decode reads exactly one JSON value, keeping numbers exact.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// flatten records every leaf value of the event under its path; arrays are
// transparent (their elements, and the leaves of object elements, are
// recorded under the array's path).
func flatten(v any, path string, out map[string][]any) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			flatten(c, join(path, k), out)
		}
	case []any:
		for _, c := range t {
			flatten(c, path, out)
		}
	default:
		out[path] = append(out[path], t)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + sep + key
}

func display(path string) string { return strings.ReplaceAll(path, sep, ".") }

func matchAll(cs []clause, flat map[string][]any) bool {
	for i := range cs {
		if !cs[i].match(flat) {
			return false
		}
	}
	return true
}

func (c *clause) match(flat map[string][]any) bool {
	if c.or != nil {
		for _, alt := range c.or {
			if matchAll(alt, flat) {
				return true
			}
		}
		return false
	}
	vals := flat[c.path]
	for _, f := range c.filters {
		if f.match(vals) {
			return true
		}
	}
	return false
}

func compileObject(obj map[string]any, path string) ([]clause, error) {
	var cs []clause
	for k, v := range obj {
		if k == "$or" {
			c, err := compileOr(v, path)
			if err != nil {
				return nil, err
			}
			cs = append(cs, c)
			continue
		}
		p := join(path, k)
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 {
				return nil, fmt.Errorf("%w: %q is an empty object", ErrInvalid, display(p))
			}
			sub, err := compileObject(t, p)
			if err != nil {
				return nil, err
			}
			cs = append(cs, sub...)
		case []any:
			if len(t) == 0 {
				return nil, fmt.Errorf("%w: %q: empty arrays are not allowed", ErrInvalid, display(p))
			}
			c := clause{path: p}
			for _, e := range t {
				f, err := compileFilter(e, p)
				if err != nil {
					return nil, err
				}
				c.filters = append(c.filters, f)
			}
			cs = append(cs, c)
		default:
			return nil, fmt.Errorf("%w: %q must be an object or an array", ErrInvalid, display(p))
		}
	}
	return cs, nil
}

func compileOr(v any, path string) (clause, error) {
	alts, ok := v.([]any)
	if !ok || len(alts) < 2 {
		return clause{}, fmt.Errorf("%w: $or at %q must be an array of at least two patterns", ErrInvalid, display(path))
	}
	c := clause{or: make([][]clause, 0, len(alts))}
	for _, a := range alts {
		obj, ok := a.(map[string]any)
		if !ok || len(obj) == 0 {
			return clause{}, fmt.Errorf("%w: every $or alternative at %q must be a non-empty object", ErrInvalid, display(path))
		}
		sub, err := compileObject(obj, path)
		if err != nil {
			return clause{}, err
		}
		c.or = append(c.or, sub)
	}
	return c, nil
}

// filter matches the list of leaf values found at one path (empty when the
// field is absent).
type filter interface {
	match(vals []any) bool
}

// valueFilter matches when any present leaf value satisfies ok.
type valueFilter func(v any) bool

func (f valueFilter) match(vals []any) bool {
	for _, v := range vals {
		if f(v) {
			return true
		}
	}
	return false
}

// existsFilter matches on presence alone.
type existsFilter bool

func (f existsFilter) match(vals []any) bool { return (len(vals) > 0) == bool(f) }

func compileFilter(e any, path string) (filter, error) {
	switch t := e.(type) {
	case string:
		return valueFilter(func(v any) bool { s, ok := v.(string); return ok && s == t }), nil
	case bool:
		return valueFilter(func(v any) bool { b, ok := v.(bool); return ok && b == t }), nil
	case nil:
		return valueFilter(func(v any) bool { return v == nil }), nil
	case json.Number:
		n, err := number(t, path)
		if err != nil {
			return nil, err
		}
		return valueFilter(func(v any) bool { f, ok := numberOf(v); return ok && f == n }), nil
	case []any:
		return nil, fmt.Errorf("%w: %q: nested arrays are not allowed", ErrInvalid, display(path))
	case map[string]any:
		return compileOperator(t, path)
	}
	return nil, fmt.Errorf("%w: %q: unsupported value %v", ErrInvalid, display(path), e)
}

func compileOperator(op map[string]any, path string) (filter, error) {
	if len(op) != 1 {
		return nil, fmt.Errorf("%w: %q: a filter object must have exactly one operator", ErrInvalid, display(path))
	}
	name, arg := only(op)
	switch name {
	case "exists":
		b, ok := arg.(bool)
		if !ok {
			return nil, fmt.Errorf("%w: %q: exists takes true or false", ErrInvalid, display(path))
		}
		return existsFilter(b), nil
	case "prefix", "suffix":
		m, err := compileAffix(name, arg, path)
		if err != nil {
			return nil, err
		}
		return valueFilter(func(v any) bool { s, ok := v.(string); return ok && m(s) }), nil
	case "equals-ignore-case":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %q: equals-ignore-case takes a string", ErrInvalid, display(path))
		}
		return valueFilter(func(v any) bool { x, ok := v.(string); return ok && strings.EqualFold(x, s) }), nil
	case "wildcard":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %q: wildcard takes a string", ErrInvalid, display(path))
		}
		w, err := compileWildcard(s, path)
		if err != nil {
			return nil, err
		}
		return valueFilter(func(v any) bool { x, ok := v.(string); return ok && w.match(x) }), nil
	case "numeric":
		r, err := compileNumeric(arg, path)
		if err != nil {
			return nil, err
		}
		return valueFilter(func(v any) bool { f, ok := numberOf(v); return ok && r.contains(f) }), nil
	case "cidr":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %q: cidr takes a string", ErrInvalid, display(path))
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: bad cidr %q: %v", ErrInvalid, display(path), s, err)
		}
		pfx = pfx.Masked()
		return valueFilter(func(v any) bool {
			x, ok := v.(string)
			if !ok {
				return false
			}
			a, err := netip.ParseAddr(x)
			return err == nil && pfx.Contains(a.Unmap())
		}), nil
	case "anything-but":
		m, err := compileAnythingBut(arg, path)
		if err != nil {
			return nil, err
		}
		return valueFilter(m), nil
	default:
		return nil, fmt.Errorf("%w: %q: unknown operator %q", ErrInvalid, display(path), name)
	}
}

// only returns the single entry of a one-entry object.
func only(m map[string]any) (string, any) {
	for k, v := range m {
		return k, v
	}
	return "", nil
}

// compileAffix builds a prefix or suffix test from "s" or
// {"equals-ignore-case": "s"}.
func compileAffix(name string, arg any, path string) (func(string) bool, error) {
	has := strings.HasPrefix
	if name == "suffix" {
		has = strings.HasSuffix
	}
	switch t := arg.(type) {
	case string:
		return func(s string) bool { return has(s, t) }, nil
	case map[string]any:
		s, ok := t["equals-ignore-case"].(string)
		if len(t) != 1 || !ok {
			return nil, fmt.Errorf("%w: %q: %s takes a string or {\"equals-ignore-case\": string}", ErrInvalid, display(path), name)
		}
		return func(x string) bool { return hasFold(x, s, name == "suffix") }, nil
	}
	return nil, fmt.Errorf("%w: %q: %s takes a string", ErrInvalid, display(path), name)
}

// hasFold reports whether s begins (or ends) with affix, ignoring case.
func hasFold(s, affix string, suffix bool) bool {
	n := utf8.RuneCountInString(affix)
	if utf8.RuneCountInString(s) < n {
		return false
	}
	r := []rune(s)
	if suffix {
		return strings.EqualFold(string(r[len(r)-n:]), affix)
	}
	return strings.EqualFold(string(r[:n]), affix)
}

func compileAnythingBut(arg any, path string) (func(any) bool, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q: anything-but %s", ErrInvalid, display(path), why)
	}
	switch t := arg.(type) {
	case string:
		return func(v any) bool { s, ok := v.(string); return !ok || s != t }, nil
	case json.Number:
		n, err := number(t, path)
		if err != nil {
			return nil, err
		}
		return func(v any) bool { f, ok := numberOf(v); return !ok || f != n }, nil
	case []any:
		if len(t) == 0 {
			return nil, bad("list must not be empty")
		}
		var strs []string
		var nums []float64
		for _, e := range t {
			switch x := e.(type) {
			case string:
				strs = append(strs, x)
			case json.Number:
				n, err := number(x, path)
				if err != nil {
					return nil, err
				}
				nums = append(nums, n)
			default:
				return nil, bad("list may hold only strings or only numbers")
			}
		}
		if strs != nil && nums != nil {
			return nil, bad("list may hold only strings or only numbers")
		}
		return func(v any) bool {
			if s, ok := v.(string); ok {
				for _, x := range strs {
					if s == x {
						return false
					}
				}
				return true
			}
			if f, ok := numberOf(v); ok {
				for _, x := range nums {
					if f == x {
						return false
					}
				}
			}
			return true
		}, nil
	case map[string]any:
		if len(t) != 1 {
			return nil, bad("takes exactly one of prefix, suffix, equals-ignore-case, wildcard")
		}
		name, a := only(t)
		var test func(string) bool
		switch name {
		case "prefix", "suffix":
			s, ok := a.(string)
			if !ok {
				return nil, bad(name + " takes a string")
			}
			m, err := compileAffix(name, s, path)
			if err != nil {
				return nil, err
			}
			test = m
		case "equals-ignore-case", "wildcard":
			vals, ok := stringOrStrings(a)
			if !ok {
				return nil, bad(name + " takes a string or a list of strings")
			}
			if name == "equals-ignore-case" {
				test = func(s string) bool {
					for _, x := range vals {
						if strings.EqualFold(s, x) {
							return true
						}
					}
					return false
				}
				break
			}
			ws := make([]wildcard, 0, len(vals))
			for _, x := range vals {
				w, err := compileWildcard(x, path)
				if err != nil {
					return nil, err
				}
				ws = append(ws, w)
			}
			test = func(s string) bool {
				for _, w := range ws {
					if w.match(s) {
						return true
					}
				}
				return false
			}
		default:
			return nil, bad(fmt.Sprintf("does not support %q", name))
		}
		// Only strings are tested: a value of another type is "anything but" a string test.
		return func(v any) bool { s, ok := v.(string); return !ok || !test(s) }, nil
	}
	return nil, bad("takes a string, a number, a list, or an object")
}

func stringOrStrings(a any) ([]string, bool) {
	switch t := a.(type) {
	case string:
		return []string{t}, true
	case []any:
		if len(t) == 0 {
			return nil, false
		}
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// numberOf reads an event leaf as a number; only JSON numbers qualify.
func numberOf(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func number(n json.Number, path string) (float64, error) {
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %q: bad number %s", ErrInvalid, display(path), n)
	}
	return f, nil
}

// numericRange is an interval; eq is set for ["=", x].
type numericRange struct {
	lo, hi         float64
	loIncl, hiIncl bool
	hasLo, hasHi   bool
}

func (r numericRange) contains(f float64) bool {
	if r.hasLo && (f < r.lo || (f == r.lo && !r.loIncl)) {
		return false
	}
	if r.hasHi && (f > r.hi || (f == r.hi && !r.hiIncl)) {
		return false
	}
	return true
}

// compileNumeric accepts ["op", n] or ["op", n, "op", n] where the two
// operators bound opposite sides; "=" only stands alone.
func compileNumeric(arg any, path string) (numericRange, error) {
	bad := func(why string) (numericRange, error) {
		return numericRange{}, fmt.Errorf("%w: %q: numeric %s", ErrInvalid, display(path), why)
	}
	list, ok := arg.([]any)
	if !ok || (len(list) != 2 && len(list) != 4) {
		return bad("takes [op, number] or [op, number, op, number]")
	}
	var r numericRange
	for i := 0; i < len(list); i += 2 {
		op, ok := list[i].(string)
		if !ok {
			return bad("operator must be a string")
		}
		jn, ok := list[i+1].(json.Number)
		if !ok {
			return bad("value must be a number")
		}
		n, err := number(jn, path)
		if err != nil {
			return numericRange{}, err
		}
		switch op {
		case "=":
			if len(list) != 2 {
				return bad(`"=" cannot be combined with another operator`)
			}
			return numericRange{lo: n, hi: n, loIncl: true, hiIncl: true, hasLo: true, hasHi: true}, nil
		case ">", ">=":
			if r.hasLo {
				return bad("has two lower bounds")
			}
			r.lo, r.loIncl, r.hasLo = n, op == ">=", true
		case "<", "<=":
			if r.hasHi {
				return bad("has two upper bounds")
			}
			r.hi, r.hiIncl, r.hasHi = n, op == "<=", true
		default:
			return bad(fmt.Sprintf("unknown operator %q", op))
		}
	}
	if r.hasLo && r.hasHi && r.lo >= r.hi {
		return bad("bottom must be less than top")
	}
	return r, nil
}

// wildcard is a glob where '*' matches any run of characters and "\*" and
// "\\" are a literal star and backslash.
type wildcard struct {
	parts []string // literal segments between stars
}

func compileWildcard(s, path string) (wildcard, error) {
	var parts []string
	var cur strings.Builder
	prevStar := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '*' && s[i+1] != '\\') {
				return wildcard{}, fmt.Errorf("%w: %q: wildcard %q has an invalid escape", ErrInvalid, display(path), s)
			}
			cur.WriteByte(s[i+1])
			i++
			prevStar = false
		case '*':
			if prevStar {
				return wildcard{}, fmt.Errorf("%w: %q: wildcard %q has consecutive wildcard characters", ErrInvalid, display(path), s)
			}
			parts = append(parts, cur.String())
			cur.Reset()
			prevStar = true
		default:
			cur.WriteByte(c)
			prevStar = false
		}
	}
	parts = append(parts, cur.String())
	return wildcard{parts: parts}, nil
}

func (w wildcard) match(s string) bool {
	if len(w.parts) == 1 {
		return s == w.parts[0]
	}
	first, last := w.parts[0], w.parts[len(w.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, p := range w.parts[1 : len(w.parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}
