// Package template reads the SAM template (template.yaml) into the topology
// that `linegate local` recreates: queues with their redrive, buses and rules,
// functions with their event sources, topics, tables and alarms.
//
// template.yaml is the single source of the topology: the same file that
// `sam deploy` deploys is evaluated here, with CloudFormation's intrinsic
// functions (short and long forms), parameters, pseudo parameters, mappings,
// conditions and SAM's Globals section.
//
// # Naming scheme
//
// The local cloud creates every resource under its physical name: the
// resource's name property when the template sets one (QueueName, TopicName,
// Name, TableName, FunctionName, AlarmName, ...), otherwise
// "<stack>-<LogicalId>" (with ".fifo" appended for a FIFO queue). Ref and
// Fn::GetAtt resolve consistently with those names:
//
//   - AWS::SQS::Queue: Ref and QueueUrl -> https://sqs.<region>.<suffix>/<account>/<name>
//     (see WithQueueURL), Arn -> arn:<partition>:sqs:<region>:<account>:<name>, QueueName -> name
//   - AWS::SNS::Topic: Ref and TopicArn -> arn:...:sns:...:<name>, TopicName -> name
//   - AWS::Events::EventBus: Ref and Name -> name, Arn -> arn:...:events:...:event-bus/<name>
//   - AWS::Events::Rule: Ref -> name, Arn -> arn:...:events:...:rule/[<bus>/]<name>
//   - AWS::DynamoDB::Table: Ref -> name, Arn -> arn:...:dynamodb:...:table/<name>
//   - AWS::Serverless::Function: Ref -> name, Arn -> arn:...:lambda:...:function:<name>
//   - AWS::Serverless::Api, AWS::Serverless::HttpApi: Ref -> the logical id in lower case (the API id)
//   - AWS::CloudWatch::Alarm: Ref -> name, Arn -> arn:...:cloudwatch:...:alarm:<name>
//
// Pseudo parameters default to AWS::Region us-east-1, AWS::AccountId
// 000000000000, AWS::Partition aws, AWS::StackName linegate and
// AWS::URLSuffix amazonaws.com; options override them.
package template

//lint:file-ignore ST1005 error messages start with the template path (Resources.X…), which is capitalised

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Sentinel errors. Every error Load and Parse return wraps one of them and
// names where in the template the problem is.
var (
	// ErrSyntax marks a document that is not a well-formed template: bad YAML,
	// a section of the wrong shape, an intrinsic with the wrong arguments.
	ErrSyntax = errors.New("invalid template")
	// ErrUnsupported marks a construct the loader does not evaluate (an
	// unknown intrinsic, tag, transform or attribute).
	ErrUnsupported = errors.New("unsupported")
	// ErrUnknownRef marks a Ref, Fn::GetAtt, condition, mapping key or target
	// that names nothing in the template.
	ErrUnknownRef = errors.New("unknown reference")
	// ErrParameter marks a parameter override or value the template rejects
	// (unknown name, not in AllowedValues, not matching AllowedPattern, ...).
	ErrParameter = errors.New("invalid parameter")
)

// Pseudo-parameter defaults of the local cloud.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
	DefaultStackName = "linegate"
)

const samTransform = "AWS::Serverless-2016-10-31"

type config struct {
	region, account, partition, stack, urlSuffix string
	queueURL                                     func(name string) string
	imports                                      map[string]string
}

// Option changes how a template is evaluated.
type Option func(*config)

// WithRegion sets AWS::Region (default us-east-1). A "cn-" region also
// switches AWS::Partition and AWS::URLSuffix to the China values.
func WithRegion(region string) Option { return func(c *config) { c.region = region } }

// WithAccountID sets AWS::AccountId (default 000000000000).
func WithAccountID(id string) Option { return func(c *config) { c.account = id } }

// WithStackName sets AWS::StackName (default linegate), which also prefixes
// every generated physical name.
func WithStackName(name string) Option { return func(c *config) { c.stack = name } }

// WithQueueURL sets how a queue name becomes the URL that Ref and QueueUrl
// return, for a backend whose URLs differ from AWS's (e.g. an endpoint such as
// http://localhost:4566/000000000000/<name>).
func WithQueueURL(f func(name string) string) Option { return func(c *config) { c.queueURL = f } }

// WithImports supplies the values of Fn::ImportValue exports; without it any
// Fn::ImportValue is an ErrUnknownRef.
func WithImports(exports map[string]string) Option {
	return func(c *config) { c.imports = exports }
}

// Load reads the template at path and evaluates it with the given parameter
// overrides (nil for the defaults). See Parse.
func Load(path string, params map[string]string, opts ...Option) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	t, err := Parse(data, params, opts...)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", path, err)
	}
	return t, nil
}

// Parse evaluates a CloudFormation/SAM template (YAML or JSON) into its
// topology. params overrides parameter defaults; an override of a parameter
// the template does not declare is an ErrParameter. Every resource's
// properties and every output are evaluated, so a bad reference anywhere is
// reported, not only in the parts the topology uses.
func Parse(data []byte, params map[string]string, opts ...Option) (*Topology, error) {
	cfg := config{region: DefaultRegion, account: DefaultAccountID, stack: DefaultStackName}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.partition, cfg.urlSuffix = "aws", "amazonaws.com"
	if strings.HasPrefix(cfg.region, "cn-") {
		cfg.partition, cfg.urlSuffix = "aws-cn", "amazonaws.com.cn"
	}
	doc, err := Decode(data)
	if err != nil {
		return nil, err
	}
	e, err := newEvaluator(cfg, doc, params)
	if err != nil {
		return nil, err
	}
	return e.topology(doc)
}

func section(doc map[string]any, name string) (map[string]any, error) {
	v, ok := doc[name]
	if !ok || v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %w: want a mapping", name, ErrSyntax)
	}
	return m, nil
}

func newEvaluator(cfg config, doc map[string]any, overrides map[string]string) (*evaluator, error) {
	sam, err := transforms(doc)
	if err != nil {
		return nil, err
	}
	e := &evaluator{
		cfg:       cfg,
		params:    map[string]any{},
		condValue: map[string]bool{},
		condBusy:  map[string]bool{},
		resources: map[string]*resource{},
		implicit:  map[string]string{},
	}
	if e.mappings, err = section(doc, "Mappings"); err != nil {
		return nil, err
	}
	if e.conditions, err = section(doc, "Conditions"); err != nil {
		return nil, err
	}
	if err := e.parameters(doc, overrides); err != nil {
		return nil, err
	}
	globals, err := section(doc, "Globals")
	if err != nil {
		return nil, err
	}
	if len(globals) > 0 && !sam {
		return nil, fmt.Errorf("Globals: %w: only valid with the %s transform", ErrSyntax, samTransform)
	}
	resources, err := section(doc, "Resources")
	if err != nil {
		return nil, err
	}
	if len(resources) == 0 {
		return nil, fmt.Errorf("Resources: %w: a template needs at least one resource", ErrSyntax)
	}
	for _, id := range sortedKeys(resources) {
		r, err := newResource(id, resources[id], globals)
		if err != nil {
			return nil, err
		}
		e.resources[id] = r
		if r.typ == "AWS::Serverless::Function" {
			if _, hasRole := r.props["Role"]; !hasRole {
				e.implicit[id+"Role"] = "AWS::IAM::Role"
			}
		}
	}
	for _, id := range sortedKeys(e.resources) {
		r := e.resources[id]
		r.enabled = true
		if r.condition != "" {
			if r.enabled, err = e.condition("Resources."+id+".Condition", r.condition); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// transforms reports whether the SAM transform is declared and rejects any
// other transform (whose semantics the loader would silently get wrong).
func transforms(doc map[string]any) (bool, error) {
	var list []any
	switch t := doc["Transform"].(type) {
	case nil:
		return false, nil
	case string:
		list = []any{t}
	case []any:
		list = t
	default:
		return false, fmt.Errorf("Transform: %w: want a name or a list of names", ErrSyntax)
	}
	sam := false
	for _, t := range list {
		if t != samTransform {
			return false, fmt.Errorf("Transform: %w transform %v", ErrUnsupported, t)
		}
		sam = true
	}
	return sam, nil
}

func newResource(id string, raw any, globals map[string]any) (*resource, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Resources.%s: %w: want a mapping", id, ErrSyntax)
	}
	typ, ok := m["Type"].(string)
	if !ok || typ == "" {
		return nil, fmt.Errorf("Resources.%s.Type: %w: missing resource type", id, ErrSyntax)
	}
	r := &resource{id: id, typ: typ, props: map[string]any{}}
	if p, ok := m["Properties"]; ok && p != nil {
		if r.props, ok = p.(map[string]any); !ok {
			return nil, fmt.Errorf("Resources.%s.Properties: %w: want a mapping", id, ErrSyntax)
		}
	}
	if c, ok := m["Condition"]; ok {
		if r.condition, ok = c.(string); !ok {
			return nil, fmt.Errorf("Resources.%s.Condition: %w: want a condition name", id, ErrSyntax)
		}
	}
	var g any
	switch typ {
	case "AWS::Serverless::Function":
		g = globals["Function"]
	case "AWS::Serverless::Api":
		g = globals["Api"]
	case "AWS::Serverless::HttpApi":
		g = globals["HttpApi"]
	case "AWS::Serverless::SimpleTable":
		g = globals["SimpleTable"]
	}
	if gm, ok := g.(map[string]any); ok {
		r.props = mergeGlobals(gm, r.props).(map[string]any)
	}
	return r, nil
}

// mergeGlobals applies SAM's Globals rules: maps merge (the resource wins),
// lists concatenate (globals first), scalars are overridden by the resource.
// Intrinsic functions are treated as scalars.
func mergeGlobals(global, local any) any {
	gm, gok := global.(map[string]any)
	lm, lok := local.(map[string]any)
	if gok && lok && !isIntrinsic(gm) && !isIntrinsic(lm) {
		out := make(map[string]any, len(gm)+len(lm))
		for k, v := range gm {
			out[k] = v
		}
		for k, v := range lm {
			if gv, ok := gm[k]; ok {
				out[k] = mergeGlobals(gv, v)
			} else {
				out[k] = v
			}
		}
		return out
	}
	gl, gok := global.([]any)
	ll, lok := local.([]any)
	if gok && lok {
		return append(append([]any{}, gl...), ll...)
	}
	return local
}

func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

// parameters computes the effective value of every declared parameter and
// validates it against the parameter's constraints.
func (e *evaluator) parameters(doc map[string]any, overrides map[string]string) error {
	decls, err := section(doc, "Parameters")
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(overrides) {
		if _, ok := decls[name]; !ok {
			return fmt.Errorf("%w: override of undeclared parameter %q", ErrParameter, name)
		}
	}
	for _, name := range sortedKeys(decls) {
		path := "Parameters." + name
		decl, ok := decls[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %w: want a mapping", path, ErrSyntax)
		}
		typ, _ := decl["Type"].(string)
		if typ == "" {
			return fmt.Errorf("%s.Type: %w: missing parameter type", path, ErrSyntax)
		}
		value, set := overrides[name]
		if !set {
			d, ok := decl["Default"]
			if !ok {
				continue // Ref to it reports the missing value
			}
			if value, ok = scalarString(d); !ok {
				return fmt.Errorf("%s.Default: %w: want a scalar", path, ErrSyntax)
			}
		}
		if err := validateParameter(path, typ, decl, value); err != nil {
			return err
		}
		if strings.HasPrefix(typ, "List<") || typ == "CommaDelimitedList" {
			parts := strings.Split(value, ",")
			list := make([]any, len(parts))
			for i, p := range parts {
				list[i] = strings.TrimSpace(p)
			}
			e.params[name] = list
		} else {
			e.params[name] = value
		}
	}
	for _, name := range sortedKeys(decls) {
		if _, ok := e.params[name]; !ok {
			if _, pseudo := e.pseudo(name); pseudo {
				return fmt.Errorf("Parameters.%s: %w: shadows a pseudo parameter", name, ErrSyntax)
			}
			// Declared without a value: Ref reports it when it is used.
			e.params[name] = missingParam{name}
		}
	}
	return nil
}

// missingParam is the value of a parameter with neither Default nor
// override; evaluating a Ref to it is an error.
type missingParam struct{ name string }

func validateParameter(path, typ string, decl map[string]any, value string) error {
	if av, ok := decl["AllowedValues"].([]any); ok {
		found := false
		for _, a := range av {
			if s, _ := scalarString(a); s == value {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s: %w: %q is not one of AllowedValues %v", path, ErrParameter, value, av)
		}
	}
	if p, ok := decl["AllowedPattern"].(string); ok {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return fmt.Errorf("%s.AllowedPattern: %w: %v", path, ErrSyntax, err)
		}
		if !re.MatchString(value) {
			return fmt.Errorf("%s: %w: %q does not match AllowedPattern %s", path, ErrParameter, value, p)
		}
	}
	if typ == "Number" {
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %w: %q is not a number", path, ErrParameter, value)
		}
		if min, ok := number(decl["MinValue"]); ok && n < min {
			return fmt.Errorf("%s: %w: %s is below MinValue %v", path, ErrParameter, value, min)
		}
		if max, ok := number(decl["MaxValue"]); ok && n > max {
			return fmt.Errorf("%s: %w: %s is above MaxValue %v", path, ErrParameter, value, max)
		}
	}
	if min, ok := number(decl["MinLength"]); ok && float64(len(value)) < min {
		return fmt.Errorf("%s: %w: shorter than MinLength %v", path, ErrParameter, min)
	}
	if max, ok := number(decl["MaxLength"]); ok && float64(len(value)) > max {
		return fmt.Errorf("%s: %w: longer than MaxLength %v", path, ErrParameter, max)
	}
	return nil
}

func number(v any) (float64, bool) {
	s, ok := scalarString(v)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}
