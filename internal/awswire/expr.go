//lint:file-ignore ST1005 these are DynamoDB's own ValidationException messages, capitalized as AWS sends them to the SDK

package awswire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// This file evaluates DynamoDB's condition and update expressions over
// items kept as wire JSON. It covers what DynamoDB documents for top-level
// attributes: comparisons (= <> < <= > >=), BETWEEN, IN, AND, OR, NOT,
// parentheses, attribute_exists, attribute_not_exists, attribute_type,
// begins_with, contains and size; SET (with + and -, if_not_exists) and
// REMOVE. A nested path (a.b, a[0]), ADD and DELETE are refused with a
// ValidationException naming them, never evaluated wrongly.

// av is one attribute value on the wire: {"S":"x"}, {"N":"1"}, {"BOOL":true}, ...
type av map[string]json.RawMessage

// item is an item: attribute name → value.
type item map[string]av

// typ is the value's type descriptor (S, N, B, BOOL, NULL, M, L, SS, NS, BS).
func (v av) typ() string {
	for k := range v {
		return k
	}
	return ""
}

func (v av) str() string {
	var s string
	_ = json.Unmarshal(v[v.typ()], &s)
	return s
}

// compare orders two values of the same scalar type (S, N or B); ok is
// false when they cannot be ordered.
func compare(a, b av) (int, bool) {
	if a == nil || b == nil || a.typ() != b.typ() {
		return 0, false
	}
	switch a.typ() {
	case "S", "B":
		return strings.Compare(a.str(), b.str()), true
	case "N":
		x, ok1 := new(big.Float).SetString(a.str())
		y, ok2 := new(big.Float).SetString(b.str())
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	}
	return 0, false
}

func equal(a, b av) bool {
	if a == nil || b == nil || a.typ() != b.typ() {
		return false
	}
	if c, ok := compare(a, b); ok {
		return c == 0
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(canonical(x), canonical(y))
}

func canonical(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v) // maps marshal with sorted keys
	return out
}

// token is one lexeme of an expression.
type token struct {
	kind byte // 'i' identifier/keyword, '#' name alias, ':' value, 'n' number, or the punctuation itself ('(', '=', '<', 'l' for <=, 'g' for >=, '!' for <>)
	text string
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ':' || isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			kind := byte('i')
			if c == '#' || c == ':' {
				kind = c
				if j == i+1 {
					return nil, fmt.Errorf("%q at %d has no name", string(c), i)
				}
			}
			out = append(out, token{kind, s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			out = append(out, token{'n', s[i:j]})
			i = j
		case c == '<' && i+1 < len(s) && s[i+1] == '=':
			out, i = append(out, token{'l', "<="}), i+2
		case c == '>' && i+1 < len(s) && s[i+1] == '=':
			out, i = append(out, token{'g', ">="}), i+2
		case c == '<' && i+1 < len(s) && s[i+1] == '>':
			out, i = append(out, token{'!', "<>"}), i+2
		case strings.IndexByte("()=<>,+-.[]", c) >= 0:
			out, i = append(out, token{c, string(c)}), i+1
		default:
			return nil, fmt.Errorf("unexpected character %q at %d", c, i)
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdent(c byte) bool      { return isIdentStart(c) || c >= '0' && c <= '9' }

// exprEnv resolves #names and :values, and records which were used
// (DynamoDB refuses unused ones).
type exprEnv struct {
	names  map[string]string
	values map[string]av
	used   map[string]bool
}

func (e *exprEnv) name(tok string) (string, error) {
	if !strings.HasPrefix(tok, "#") {
		return tok, nil
	}
	n, ok := e.names[tok]
	if !ok {
		return "", fmt.Errorf("An expression attribute name used in the document path is not defined; attribute name: %s", tok)
	}
	e.used[tok] = true
	return n, nil
}

func (e *exprEnv) value(tok string) (av, error) {
	v, ok := e.values[tok]
	if !ok {
		return nil, fmt.Errorf("An expression attribute value used in expression is not defined; attribute value: %s", tok)
	}
	e.used[tok] = true
	return v, nil
}

// unused reports a name or value given but not referenced.
func (e *exprEnv) unused() error {
	for k := range e.names {
		if !e.used[k] {
			return fmt.Errorf("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", k)
		}
	}
	for k := range e.values {
		if !e.used[k] {
			return fmt.Errorf("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", k)
		}
	}
	return nil
}

// parser walks tokens; it evaluates while parsing, against it.
type parser struct {
	toks []token
	pos  int
	env  *exprEnv
	it   item
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{}
}

func (p *parser) keyword(w string) bool {
	t := p.peek()
	if t.kind == 'i' && strings.EqualFold(t.text, w) {
		p.pos++
		return true
	}
	return false
}

// call reports whether the next tokens call a function whose name is one
// of names: the name, then "(". It reads nothing.
func (p *parser) call(names map[string]bool) bool {
	t := p.peek()
	return t.kind == 'i' && names[t.text] && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == '('
}

// callPath reads a call's name, "(" and first argument, a path.
func (p *parser) callPath() (string, error) {
	p.pos += 2
	return p.path()
}

func (p *parser) expect(kind byte) error {
	if t := p.peek(); t.kind != kind {
		return fmt.Errorf("Syntax error; token: %q, expected %q", t.text, string(kind))
	}
	p.pos++
	return nil
}

// evalCondition evaluates a ConditionExpression against it.
func evalCondition(expr string, env *exprEnv, it item) (bool, error) {
	toks, err := lex(expr)
	if err != nil {
		return false, fmt.Errorf("Invalid ConditionExpression: %v", err)
	}
	p := &parser{toks: toks, env: env, it: it}
	ok, err := p.or()
	if err != nil {
		return false, fmt.Errorf("Invalid ConditionExpression: %v", err)
	}
	if p.pos != len(toks) {
		return false, fmt.Errorf("Invalid ConditionExpression: Syntax error; token: %q", p.peek().text)
	}
	return ok, nil
}

func (p *parser) or() (bool, error) {
	return p.chain("OR", p.and, func(a, b bool) bool { return a || b })
}

func (p *parser) and() (bool, error) {
	return p.chain("AND", p.not, func(a, b bool) bool { return a && b })
}

// chain parses operands joined by the keyword op, folding them with f.
func (p *parser) chain(op string, operand func() (bool, error), f func(a, b bool) bool) (bool, error) {
	v, err := operand()
	for err == nil && p.keyword(op) {
		var r bool
		r, err = operand()
		v = f(v, r)
	}
	return v, err
}

func (p *parser) not() (bool, error) {
	if p.keyword("NOT") {
		v, err := p.not()
		return !v, err
	}
	return p.primary()
}

// The functions of DynamoDB's expressions: conditions, an operand, and a
// SET value.
var (
	conditionFuncs  = map[string]bool{"attribute_exists": true, "attribute_not_exists": true, "attribute_type": true, "begins_with": true, "contains": true}
	sizeFunc        = map[string]bool{"size": true}
	ifNotExistsFunc = map[string]bool{"if_not_exists": true}
)

func (p *parser) primary() (bool, error) {
	t := p.peek()
	if t.kind == '(' {
		p.pos++
		v, err := p.or()
		if err != nil {
			return false, err
		}
		return v, p.expect(')')
	}
	if p.call(conditionFuncs) {
		return p.function(t.text)
	}
	left, err := p.operand()
	if err != nil {
		return false, err
	}
	if p.keyword("BETWEEN") {
		lo, err := p.operand()
		if err != nil {
			return false, err
		}
		if !p.keyword("AND") {
			return false, fmt.Errorf("Syntax error; BETWEEN needs AND")
		}
		hi, err := p.operand()
		if err != nil {
			return false, err
		}
		c1, ok1 := compare(left, lo)
		c2, ok2 := compare(left, hi)
		return ok1 && ok2 && c1 >= 0 && c2 <= 0, nil
	}
	if p.keyword("IN") {
		if err := p.expect('('); err != nil {
			return false, err
		}
		found := false
		for {
			v, err := p.operand()
			if err != nil {
				return false, err
			}
			found = found || equal(left, v)
			if p.peek().kind != ',' {
				break
			}
			p.pos++
		}
		return found, p.expect(')')
	}
	op := p.peek()
	if strings.IndexByte("=<>lg!", op.kind) < 0 || op.kind == 0 {
		return false, fmt.Errorf("Syntax error; token: %q, expected a comparator", op.text)
	}
	p.pos++
	right, err := p.operand()
	if err != nil {
		return false, err
	}
	if op.kind == '=' {
		return equal(left, right), nil
	}
	if op.kind == '!' {
		return left != nil && right != nil && !equal(left, right), nil
	}
	c, ok := compare(left, right)
	if !ok {
		return false, nil
	}
	switch op.kind {
	case '<':
		return c < 0, nil
	case 'l':
		return c <= 0, nil
	case '>':
		return c > 0, nil
	default:
		return c >= 0, nil
	}
}

func (p *parser) function(name string) (bool, error) {
	path, err := p.callPath()
	if err != nil {
		return false, err
	}
	v := p.it[path]
	var arg av
	if name != "attribute_exists" && name != "attribute_not_exists" {
		if err := p.expect(','); err != nil {
			return false, err
		}
		if arg, err = p.operand(); err != nil {
			return false, err
		}
	}
	if err := p.expect(')'); err != nil {
		return false, err
	}
	switch name {
	case "attribute_exists":
		return v != nil, nil
	case "attribute_not_exists":
		return v == nil, nil
	case "attribute_type":
		return v != nil && arg.typ() == "S" && v.typ() == arg.str(), nil
	case "begins_with":
		return v != nil && (v.typ() == "S" || v.typ() == "B") && v.typ() == arg.typ() && strings.HasPrefix(v.str(), arg.str()), nil
	default: // contains
		if v == nil {
			return false, nil
		}
		if v.typ() == "S" && arg.typ() == "S" {
			return strings.Contains(v.str(), arg.str()), nil
		}
		var members []json.RawMessage
		if json.Unmarshal(v[v.typ()], &members) != nil {
			return false, nil
		}
		for _, m := range members {
			var x av
			if v.typ() == "L" {
				_ = json.Unmarshal(m, &x)
			} else {
				x = av{strings.TrimSuffix(v.typ(), "S"): m}
			}
			if equal(x, arg) {
				return true, nil
			}
		}
		return false, nil
	}
}

// path reads a top-level attribute name (plain or #alias).
func (p *parser) path() (string, error) {
	t := p.peek()
	if t.kind != 'i' && t.kind != '#' {
		return "", fmt.Errorf("Syntax error; token: %q, expected an attribute name", t.text)
	}
	p.pos++
	if k := p.peek().kind; k == '.' || k == '[' {
		return "", fmt.Errorf("nested document paths are not supported by linegate local")
	}
	return p.env.name(t.text)
}

// operand is a :value, size(path) or a path's value (nil when absent).
func (p *parser) operand() (av, error) {
	t := p.peek()
	switch {
	case t.kind == ':':
		p.pos++
		return p.env.value(t.text)
	case p.call(sizeFunc):
		path, err := p.callPath()
		if err != nil {
			return nil, err
		}
		if err := p.expect(')'); err != nil {
			return nil, err
		}
		return size(p.it[path]), nil
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	return p.it[path], nil
}

func size(v av) av {
	if v == nil {
		return nil
	}
	n := 0
	switch v.typ() {
	case "S", "B":
		n = len(v.str())
	default:
		var many []json.RawMessage
		var m map[string]json.RawMessage
		if json.Unmarshal(v[v.typ()], &many) == nil {
			n = len(many)
		} else if json.Unmarshal(v[v.typ()], &m) == nil {
			n = len(m)
		}
	}
	b, _ := json.Marshal(fmt.Sprint(n))
	return av{"N": b}
}

// applyUpdate applies an UpdateExpression (SET and REMOVE clauses) to it.
func applyUpdate(expr string, env *exprEnv, it item) error {
	toks, err := lex(expr)
	if err != nil {
		return fmt.Errorf("Invalid UpdateExpression: %v", err)
	}
	p := &parser{toks: toks, env: env, it: it}
	seen := map[string]bool{}
	for p.pos < len(toks) {
		switch {
		case p.keyword("SET"):
			if seen["SET"] {
				return fmt.Errorf("Invalid UpdateExpression: The \"SET\" section can only be used once in an update expression")
			}
			seen["SET"] = true
			for {
				if err := p.set(); err != nil {
					return fmt.Errorf("Invalid UpdateExpression: %v", err)
				}
				if p.peek().kind != ',' {
					break
				}
				p.pos++
			}
		case p.keyword("REMOVE"):
			if seen["REMOVE"] {
				return fmt.Errorf("Invalid UpdateExpression: The \"REMOVE\" section can only be used once in an update expression")
			}
			seen["REMOVE"] = true
			for {
				path, err := p.path()
				if err != nil {
					return fmt.Errorf("Invalid UpdateExpression: %v", err)
				}
				delete(p.it, path)
				if p.peek().kind != ',' {
					break
				}
				p.pos++
			}
		case p.keyword("ADD"), p.keyword("DELETE"):
			return fmt.Errorf("Invalid UpdateExpression: ADD and DELETE are not supported by linegate local")
		default:
			return fmt.Errorf("Invalid UpdateExpression: Syntax error; token: %q", p.peek().text)
		}
	}
	return nil
}

// set applies one "path = value" action; value is an operand,
// if_not_exists(path, operand), or two of those joined by + or -.
func (p *parser) set() error {
	path, err := p.path()
	if err != nil {
		return err
	}
	if err := p.expect('='); err != nil {
		return err
	}
	v, err := p.setOperand()
	if err != nil {
		return err
	}
	if k := p.peek().kind; k == '+' || k == '-' {
		p.pos++
		w, err := p.setOperand()
		if err != nil {
			return err
		}
		if v == nil || w == nil || v.typ() != "N" || w.typ() != "N" {
			return fmt.Errorf("An operand in the update expression has an incorrect data type")
		}
		x, _ := new(big.Float).SetString(v.str())
		y, _ := new(big.Float).SetString(w.str())
		if x == nil || y == nil {
			return fmt.Errorf("An operand in the update expression has an incorrect data type")
		}
		if k == '+' {
			x.Add(x, y)
		} else {
			x.Sub(x, y)
		}
		b, _ := json.Marshal(x.Text('f', -1))
		v = av{"N": b}
	}
	if v == nil {
		return fmt.Errorf("The provided expression refers to an attribute that does not exist in the item")
	}
	p.it[path] = v
	return nil
}

func (p *parser) setOperand() (av, error) {
	if p.call(ifNotExistsFunc) {
		path, err := p.callPath()
		if err != nil {
			return nil, err
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
		def, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.expect(')'); err != nil {
			return nil, err
		}
		if v := p.it[path]; v != nil {
			return v, nil
		}
		return def, nil
	}
	return p.operand()
}
