package template

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"net/netip"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// maxSteps bounds the work of one evaluation, so a template cannot make the
// loader spin (every intrinsic and every container counts as a step).
const maxSteps = 5_000_000

// noValueT is the type of the value AWS::NoValue evaluates to: containers drop
// the entry that holds it, as CloudFormation does.
type noValueT struct{}

var noValue = noValueT{}

// resource is one entry of the template's Resources section.
type resource struct {
	id        string
	typ       string
	props     map[string]any // raw properties (SAM Globals merged in)
	condition string
	enabled   bool

	name      string // physical name, computed on first use
	named     bool
	naming    bool
	resolved  map[string]any // evaluated properties
	resolving bool
	busing    bool // ruleBus in progress
}

// evaluator resolves intrinsic functions against one template, one set of
// parameter values and one set of pseudo parameters.
type evaluator struct {
	cfg        config
	params     map[string]any // string, or []any for list parameters
	mappings   map[string]any
	conditions map[string]any
	condValue  map[string]bool
	condBusy   map[string]bool
	resources  map[string]*resource
	implicit   map[string]string // SAM-generated logical id -> its type
	steps      int
	depth      int
}

// maxEvalDepth bounds nesting plus chains of references (Ref -> name ->
// Fn::GetAtt -> ...), which a self-referencing template could make endless.
const maxEvalDepth = 2000

func (e *evaluator) step(path string) error {
	e.steps++
	if e.steps > maxSteps {
		return fmt.Errorf("%s: %w: evaluation exceeds %d steps", path, ErrSyntax, maxSteps)
	}
	return nil
}

// eval resolves every intrinsic inside v. path names v's location for errors.
func (e *evaluator) eval(path string, v any) (any, error) {
	if err := e.step(path); err != nil {
		return nil, err
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxEvalDepth {
		return nil, fmt.Errorf("%s: %w: references nest deeper than %d levels (a cycle?)", path, ErrSyntax, maxEvalDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return e.intrinsic(path, k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			r, err := e.eval(path+"."+k, x[k])
			if err != nil {
				return nil, err
			}
			if r == noValue {
				continue
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		for i, item := range x {
			r, err := e.eval(fmt.Sprintf("%s[%d]", path, i), item)
			if err != nil {
				return nil, err
			}
			if r == noValue {
				continue
			}
			out = append(out, r)
		}
		return out, nil
	}
	return v, nil
}

func (e *evaluator) intrinsic(path, name string, arg any) (any, error) {
	p := path + "." + name
	switch name {
	case "Ref":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%s: %w: Ref takes a logical name", p, ErrSyntax)
		}
		return e.ref(p, s)
	case "Fn::GetAtt":
		return e.getAttFn(p, arg)
	case "Fn::Sub":
		return e.sub(p, arg)
	case "Fn::Join":
		return e.join(p, arg)
	case "Fn::Select":
		return e.selectFn(p, arg)
	case "Fn::Split":
		return e.split(p, arg)
	case "Fn::If":
		return e.ifFn(p, arg)
	case "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or":
		return e.condFn(p, name, arg)
	case "Fn::FindInMap":
		return e.findInMap(p, arg)
	case "Fn::ImportValue":
		v, err := e.evalString(p, arg)
		if err != nil {
			return nil, err
		}
		if out, ok := e.cfg.imports[v]; ok {
			return out, nil
		}
		return nil, fmt.Errorf("%s: %w: export %q (provide it with WithImports)", p, ErrUnknownRef, v)
	case "Fn::Base64":
		v, err := e.evalString(p, arg)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString([]byte(v)), nil
	case "Fn::GetAZs":
		region, err := e.evalString(p, arg)
		if err != nil {
			return nil, err
		}
		if region == "" {
			region = e.cfg.region
		}
		return []any{region + "a", region + "b", region + "c"}, nil
	case "Fn::Cidr":
		return e.cidr(p, arg)
	}
	return nil, fmt.Errorf("%s: %w intrinsic %s", path, ErrUnsupported, name)
}

// args evaluates nothing: it checks that arg is a list of n items.
func args(path, fn string, arg any, n ...int) ([]any, error) {
	list, ok := arg.([]any)
	if ok {
		for _, want := range n {
			if len(list) == want {
				return list, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: %w: %s takes a list of %v items", path, ErrSyntax, fn, n)
}

// stringArgs checks that arg is a list of n items and evaluates each to a
// string.
func (e *evaluator) stringArgs(path, fn string, arg any, n int) ([]string, error) {
	list, err := args(path, fn, arg, n)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = e.evalString(fmt.Sprintf("%s[%d]", path, i), list[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *evaluator) evalString(path string, v any) (string, error) {
	r, err := e.eval(path, v)
	if err != nil {
		return "", err
	}
	s, ok := scalarString(r)
	if !ok {
		return "", fmt.Errorf("%s: %w: want a string, got %s", path, ErrSyntax, describe(r))
	}
	return s, nil
}

func (e *evaluator) evalList(path string, v any) ([]any, error) {
	r, err := e.eval(path, v)
	if err != nil {
		return nil, err
	}
	list, ok := r.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: %w: want a list, got %s", path, ErrSyntax, describe(r))
	}
	return list, nil
}

func (e *evaluator) getAttFn(path string, arg any) (any, error) {
	var res, attr string
	switch a := arg.(type) {
	case string:
		var ok bool
		res, attr, ok = strings.Cut(a, ".")
		if !ok {
			return nil, fmt.Errorf("%s: %w: %q is not Resource.Attribute", path, ErrSyntax, a)
		}
	default:
		list, err := args(path, "Fn::GetAtt", arg, 2)
		if err != nil {
			return nil, err
		}
		r, ok := list[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s: %w: Fn::GetAtt takes a logical name first", path, ErrSyntax)
		}
		res = r
		if attr, err = e.evalString(path+"[1]", list[1]); err != nil {
			return nil, err
		}
	}
	return e.getAtt(path, res, attr)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

func (e *evaluator) sub(path string, arg any) (any, error) {
	var text string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		text = a
	default:
		list, err := args(path, "Fn::Sub", arg, 2)
		if err != nil {
			return nil, err
		}
		s, ok := list[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s: %w: Fn::Sub takes a string first", path, ErrSyntax)
		}
		text = s
		m, ok := list[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %w: Fn::Sub takes a map of variables second", path, ErrSyntax)
		}
		for _, k := range sortedKeys(m) {
			v, err := e.evalString(path+"[1]."+k, m[k])
			if err != nil {
				return nil, err
			}
			vars[k] = v
		}
	}
	var b strings.Builder
	last := 0
	for _, loc := range subVar.FindAllStringSubmatchIndex(text, -1) {
		b.WriteString(text[last:loc[0]])
		last = loc[1]
		name := text[loc[2]:loc[3]]
		if strings.HasPrefix(name, "!") {
			b.WriteString("${" + name[1:] + "}")
			continue
		}
		name = strings.TrimSpace(name)
		var val any
		var err error
		if v, ok := vars[name]; ok {
			val = v
		} else if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			val, err = e.getAtt(path, res, attr)
		} else {
			val, err = e.ref(path, name)
		}
		if err != nil {
			return nil, err
		}
		s, ok := scalarString(val)
		if !ok {
			return nil, fmt.Errorf("%s: %w: ${%s} is %s, not a string", path, ErrSyntax, name, describe(val))
		}
		b.WriteString(s)
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

func (e *evaluator) join(path string, arg any) (any, error) {
	list, err := args(path, "Fn::Join", arg, 2)
	if err != nil {
		return nil, err
	}
	sep, err := e.evalString(path+"[0]", list[0])
	if err != nil {
		return nil, err
	}
	items, err := e.evalList(path+"[1]", list[1])
	if err != nil {
		return nil, err
	}
	parts := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := scalarString(it)
		if !ok {
			return nil, fmt.Errorf("%s[1][%d]: %w: want a string, got %s", path, i, ErrSyntax, describe(it))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, sep), nil
}

func (e *evaluator) selectFn(path string, arg any) (any, error) {
	list, err := args(path, "Fn::Select", arg, 2)
	if err != nil {
		return nil, err
	}
	is, err := e.evalString(path+"[0]", list[0])
	if err != nil {
		return nil, err
	}
	i, err := strconv.Atoi(is)
	if err != nil {
		return nil, fmt.Errorf("%s[0]: %w: index %q is not an integer", path, ErrSyntax, is)
	}
	items, err := e.evalList(path+"[1]", list[1])
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(items) {
		return nil, fmt.Errorf("%s: %w: index %d out of range (list has %d items)", path, ErrSyntax, i, len(items))
	}
	return items[i], nil
}

func (e *evaluator) split(path string, arg any) (any, error) {
	list, err := args(path, "Fn::Split", arg, 2)
	if err != nil {
		return nil, err
	}
	sep, err := e.evalString(path+"[0]", list[0])
	if err != nil {
		return nil, err
	}
	if sep == "" {
		return nil, fmt.Errorf("%s[0]: %w: empty delimiter", path, ErrSyntax)
	}
	s, err := e.evalString(path+"[1]", list[1])
	if err != nil {
		return nil, err
	}
	parts := strings.Split(s, sep)
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func (e *evaluator) ifFn(path string, arg any) (any, error) {
	list, err := args(path, "Fn::If", arg, 3)
	if err != nil {
		return nil, err
	}
	name, ok := list[0].(string)
	if !ok {
		return nil, fmt.Errorf("%s[0]: %w: Fn::If takes a condition name first", path, ErrSyntax)
	}
	ok, err = e.condition(path+"[0]", name)
	if err != nil {
		return nil, err
	}
	if ok {
		return e.eval(path+"[1]", list[1])
	}
	return e.eval(path+"[2]", list[2])
}

// condFn evaluates Fn::Equals, Fn::Not, Fn::And and Fn::Or to a bool.
func (e *evaluator) condFn(path, name string, arg any) (any, error) {
	switch name {
	case "Fn::Equals":
		list, err := args(path, name, arg, 2)
		if err != nil {
			return nil, err
		}
		a, err := e.eval(path+"[0]", list[0])
		if err != nil {
			return nil, err
		}
		b, err := e.eval(path+"[1]", list[1])
		if err != nil {
			return nil, err
		}
		as, aok := scalarString(a)
		bs, bok := scalarString(b)
		if aok && bok {
			return as == bs, nil
		}
		return reflect.DeepEqual(a, b), nil
	case "Fn::Not":
		list, err := args(path, name, arg, 1)
		if err != nil {
			return nil, err
		}
		v, err := e.evalCond(path+"[0]", list[0])
		if err != nil {
			return nil, err
		}
		return !v, nil
	}
	list, ok := arg.([]any)
	if !ok || len(list) < 2 || len(list) > 10 {
		return nil, fmt.Errorf("%s: %w: %s takes 2 to 10 conditions", path, ErrSyntax, name)
	}
	and := name == "Fn::And"
	for i, item := range list {
		v, err := e.evalCond(fmt.Sprintf("%s[%d]", path, i), item)
		if err != nil {
			return nil, err
		}
		if and && !v {
			return false, nil
		}
		if !and && v {
			return true, nil
		}
	}
	return and, nil
}

// evalCond evaluates a condition operand: {"Condition": name} or a condition
// function.
func (e *evaluator) evalCond(path string, v any) (bool, error) {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		if name, ok := m["Condition"]; ok {
			s, ok := name.(string)
			if !ok {
				return false, fmt.Errorf("%s: %w: Condition takes a name", path, ErrSyntax)
			}
			return e.condition(path+".Condition", s)
		}
	}
	r, err := e.eval(path, v)
	if err != nil {
		return false, err
	}
	if b, ok := r.(bool); ok {
		return b, nil
	}
	if s, ok := r.(string); ok && (s == "true" || s == "false") {
		return s == "true", nil
	}
	return false, fmt.Errorf("%s: %w: want a condition, got %s", path, ErrSyntax, describe(r))
}

// condition evaluates the named entry of the Conditions section (once).
func (e *evaluator) condition(path, name string) (bool, error) {
	if v, ok := e.condValue[name]; ok {
		return v, nil
	}
	raw, ok := e.conditions[name]
	if !ok {
		return false, fmt.Errorf("%s: %w condition %q", path, ErrUnknownRef, name)
	}
	if e.condBusy[name] {
		return false, fmt.Errorf("%s: %w: condition %q depends on itself", path, ErrSyntax, name)
	}
	e.condBusy[name] = true
	defer delete(e.condBusy, name)
	v, err := e.evalCond("Conditions."+name, raw)
	if err != nil {
		return false, err
	}
	e.condValue[name] = v
	return v, nil
}

func (e *evaluator) findInMap(path string, arg any) (any, error) {
	keys, err := e.stringArgs(path, "Fn::FindInMap", arg, 3)
	if err != nil {
		return nil, err
	}
	m, ok := e.mappings[keys[0]].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %w mapping %q", path, ErrUnknownRef, keys[0])
	}
	top, ok := m[keys[1]].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %w key %q in mapping %q", path, ErrUnknownRef, keys[1], keys[0])
	}
	v, ok := top[keys[2]]
	if !ok {
		return nil, fmt.Errorf("%s: %w key %q under %q in mapping %q", path, ErrUnknownRef, keys[2], keys[1], keys[0])
	}
	return v, nil
}

func (e *evaluator) cidr(path string, arg any) (any, error) {
	s, err := e.stringArgs(path, "Fn::Cidr", arg, 3)
	if err != nil {
		return nil, err
	}
	block, err := netip.ParsePrefix(s[0])
	if err != nil {
		return nil, fmt.Errorf("%s[0]: %w: %v", path, ErrSyntax, err)
	}
	count, err := strconv.Atoi(s[1])
	if err != nil || count < 1 || count > 256 {
		return nil, fmt.Errorf("%s[1]: %w: count %q is not 1..256", path, ErrSyntax, s[1])
	}
	bits, err := strconv.Atoi(s[2])
	total := block.Addr().BitLen()
	newLen := total - bits
	if err != nil || bits < 1 || newLen < block.Bits() {
		return nil, fmt.Errorf("%s[2]: %w: cidrBits %q does not fit %s", path, ErrSyntax, s[2], block)
	}
	if avail := newLen - block.Bits(); avail < 9 && count > 1<<avail {
		return nil, fmt.Errorf("%s: %w: %s holds only %d subnets of /%d", path, ErrSyntax, block, 1<<avail, newLen)
	}
	base := new(big.Int).SetBytes(block.Masked().Addr().AsSlice())
	stepSize := new(big.Int).Lsh(big.NewInt(1), uint(bits))
	out := make([]any, 0, count)
	for i := range count {
		n := new(big.Int).Add(base, new(big.Int).Mul(stepSize, big.NewInt(int64(i))))
		buf := make([]byte, total/8)
		n.FillBytes(buf)
		addr, _ := netip.AddrFromSlice(buf)
		out = append(out, netip.PrefixFrom(addr, newLen).String())
	}
	return out, nil
}

// enabledResources lists the resources whose condition holds, by logical id.
func (e *evaluator) enabledResources() []*resource {
	var out []*resource
	for _, id := range sortedKeys(e.resources) {
		if r := e.resources[id]; r.enabled {
			out = append(out, r)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scalarString renders a scalar the way CloudFormation passes it on: every
// scalar becomes text.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case noValueT:
		return "AWS::NoValue"
	}
	return fmt.Sprintf("%T", v)
}
