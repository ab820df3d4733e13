package template

import (
	"fmt"
	"math"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits that keep a hostile template (alias bombs, absurd nesting) from
// exhausting memory or stack while it is converted.
const (
	maxNodes = 1 << 20
	maxDepth = 512
)

// shortForms maps a CloudFormation short-form YAML tag to its long-form key.
var shortForms = map[string]string{
	"Ref":         "Ref",
	"Condition":   "Condition",
	"GetAtt":      "Fn::GetAtt",
	"Sub":         "Fn::Sub",
	"Join":        "Fn::Join",
	"Select":      "Fn::Select",
	"Split":       "Fn::Split",
	"If":          "Fn::If",
	"Equals":      "Fn::Equals",
	"Not":         "Fn::Not",
	"And":         "Fn::And",
	"Or":          "Fn::Or",
	"FindInMap":   "Fn::FindInMap",
	"ImportValue": "Fn::ImportValue",
	"Base64":      "Fn::Base64",
	"GetAZs":      "Fn::GetAZs",
	"Cidr":        "Fn::Cidr",
}

// decodeYAML parses a CloudFormation YAML (or JSON) document into plain Go
// values: map[string]any, []any, string, int64, float64, bool and nil, with
// every short-form tag rewritten to its long form ({"Fn::Sub": ...}).
func decodeYAML(data []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	c := converter{}
	return c.value(&doc, 0)
}

type converter struct{ nodes int }

func (c *converter) value(n *yaml.Node, depth int) (any, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, fmt.Errorf("%w: line %d: template expands to more than %d nodes", ErrSyntax, n.Line, maxNodes)
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: line %d: nested deeper than %d levels", ErrSyntax, n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("%w: line %d: dangling alias", ErrSyntax, n.Line)
		}
		return c.value(n.Alias, depth+1)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return c.tagged(n, depth)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return scalar(n), nil
	case yaml.SequenceNode:
		return c.sequence(n, depth)
	case yaml.MappingNode:
		return c.mapping(n, depth)
	}
	return nil, fmt.Errorf("%w: line %d: unexpected YAML node kind %d", ErrSyntax, n.Line, n.Kind)
}

func (c *converter) sequence(n *yaml.Node, depth int) ([]any, error) {
	out := make([]any, 0, len(n.Content))
	for _, item := range n.Content {
		v, err := c.value(item, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (c *converter) mapping(n *yaml.Node, depth int) (map[string]any, error) {
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%w: line %d: mapping key is not a scalar", ErrSyntax, k.Line)
		}
		if k.Tag == "!!merge" {
			return nil, fmt.Errorf("%w: line %d: YAML merge keys (<<) are not supported by CloudFormation", ErrSyntax, k.Line)
		}
		if _, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("%w: line %d: duplicate key %q", ErrSyntax, k.Line, k.Value)
		}
		v, err := c.value(n.Content[i+1], depth+1)
		if err != nil {
			return nil, err
		}
		out[k.Value] = v
	}
	return out, nil
}

// tagged converts a short-form intrinsic such as `!Sub "x"` or
// `!GetAtt A.B` into its long form.
func (c *converter) tagged(n *yaml.Node, depth int) (any, error) {
	short := strings.TrimPrefix(n.Tag, "!")
	long, ok := shortForms[short]
	if !ok {
		return nil, fmt.Errorf("line %d: %w tag !%s", n.Line, ErrUnsupported, short)
	}
	var arg any
	switch n.Kind {
	case yaml.ScalarNode:
		// The argument of a tagged scalar is always text (`!Ref 10` names "10").
		arg = n.Value
	case yaml.SequenceNode:
		v, err := c.sequence(n, depth)
		if err != nil {
			return nil, err
		}
		arg = v
	case yaml.MappingNode:
		v, err := c.mapping(n, depth)
		if err != nil {
			return nil, err
		}
		arg = v
	default:
		return nil, fmt.Errorf("%w: line %d: !%s on an unexpected node", ErrSyntax, n.Line, short)
	}
	switch short {
	case "Ref", "Condition":
		if _, ok := arg.(string); !ok {
			return nil, fmt.Errorf("%w: line %d: !%s takes a name", ErrSyntax, n.Line, short)
		}
	case "GetAtt":
		if s, ok := arg.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found || res == "" || attr == "" {
				return nil, fmt.Errorf("%w: line %d: !GetAtt %q is not Resource.Attribute", ErrSyntax, n.Line, s)
			}
			arg = []any{res, attr}
		}
	}
	return map[string]any{long: arg}, nil
}

// scalar converts an untagged (or core-schema tagged) scalar.
func scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			return i
		}
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	}
	return n.Value
}

// Decode parses a template without evaluating it: the document as plain Go
// values with every short-form tag in its long form ({"Ref": …},
// {"Fn::Sub": …}), which Load then evaluates, and for tools that resolve
// intrinsics by other rules than CloudFormation's.
func Decode(data []byte) (map[string]any, error) {
	v, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the document is not a mapping", ErrSyntax)
	}
	return doc, nil
}
