package coldstart

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/linegate/linegate/internal/template"
)

// ErrNoFunction means the template has no AWS::Serverless::Function of that
// logical id.
var ErrNoFunction = errors.New("no such function in the template")

// Credentials are what `sam local invoke` found in the caller's AWS profile
// or environment; without any it passes placeholders.
type Credentials struct {
	Region, AccessKeyID, SecretAccessKey, SessionToken string
}

// SAMInvoke is what decides a function's environment under `sam local
// invoke`: the template, the --env-vars file, --parameter-overrides, the
// shell's environment and the profile's credentials.
type SAMInvoke struct {
	// Template is the template's bytes (template.yaml).
	Template []byte
	// EnvVars is the --env-vars file's bytes (events/env.json); nil for none.
	EnvVars []byte
	// ParameterOverrides are --parameter-overrides.
	ParameterOverrides map[string]string
	// Shell looks a variable up in the shell's environment (os.LookupEnv
	// for the real thing); nil is an empty shell.
	Shell func(string) (string, bool)
	// Credentials are the profile's; nil means none were found.
	Credentials *Credentials
}

// SAM's placeholders and fixed values (samcli/local/lambdafn/env_vars.py and
// its intrinsic resolver's symbol table).
const (
	samRegion    = "us-east-1"
	samKey       = "defaultkey"
	samSecret    = "defaultsecret"
	samAccountID = "123456789012"
	samStackName = "local"
)

// ImageEnv is the environment the provided.al2023 runtime image itself
// sets (its Dockerfile's ENV lines); `sam local invoke` runs the function in
// that image, so these reach the function too.
var ImageEnv = map[string]string{
	"PATH":               "/usr/local/bin:/usr/bin/:/bin:/opt/bin",
	"LANG":               "en_US.UTF-8",
	"TZ":                 ":/etc/localtime",
	"LD_LIBRARY_PATH":    "/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib",
	"LAMBDA_TASK_ROOT":   "/var/task",
	"LAMBDA_RUNTIME_DIR": "/var/runtime",
}

// Environment builds the environment `sam local invoke` gives the function
// logicalID, and nothing else:
//
//   - the variables declared on the function, Globals.Function's merged in;
//     each one's value is, from highest priority, the --env-vars entry for the
//     function, the file's "Parameters" entry, the shell's value, then the
//     template's (intrinsics resolved with SAM's symbol table: Ref to a
//     parameter is its override or default, Ref to a resource is its logical
//     id, anything unresolved is "");
//   - AWS_SAM_LOCAL=true, the region and keys (the profile's, else us-east-1,
//     defaultkey, defaultsecret), AWS_ACCOUNT_ID=123456789012, the function's
//     name (its logical id), memory, timeout, handler, $LATEST version and
//     log group/stream;
//   - with LoggingConfig.LogFormat JSON, AWS_LAMBDA_LOG_FORMAT and
//     AWS_LAMBDA_LOG_LEVEL (ApplicationLogLevel, default INFO).
//
// The runtime image's own variables (ImageEnv) are not included; the
// emulator adds AWS_LAMBDA_RUNTIME_API.
func (s SAMInvoke) Environment(logicalID string) (map[string]string, error) {
	doc, err := template.Decode(s.Template)
	if err != nil {
		return nil, fmt.Errorf("sam environment: %w", err)
	}
	r := &samResolver{doc: doc, params: map[string]any{}, region: samRegion}
	if s.Credentials != nil && s.Credentials.Region != "" {
		r.region = s.Credentials.Region
	}
	r.readParameters(s.ParameterOverrides)
	props, err := r.functionProperties(logicalID)
	if err != nil {
		return nil, err
	}
	overrides, err := envOverrides(s.EnvVars, logicalID)
	if err != nil {
		return nil, err
	}
	env := r.awsVariables(logicalID, props, s.Credentials)
	environment, _ := asMap(props["Environment"])
	vars, _ := asMap(environment["Variables"])
	for name, raw := range vars {
		value := stringify(r.resolve(raw))
		if s.Shell != nil {
			if v, ok := s.Shell(name); ok {
				value = v
			}
		}
		if v, ok := overrides[name]; ok {
			value = v
		}
		env[name] = value
	}
	return env, nil
}

// envOverrides merges the --env-vars file's "Parameters" and the function's
// entry (which wins), each value stringified as SAM does.
func envOverrides(file []byte, logicalID string) (map[string]string, error) {
	out := map[string]string{}
	if len(file) == 0 {
		return out, nil
	}
	var all map[string]map[string]any
	if err := json.Unmarshal(file, &all); err != nil {
		return nil, fmt.Errorf("sam environment: env vars file: environment variables must be in either CloudFormation parameter file format or in {FunctionName: {key:value}} JSON pairs: %w", err)
	}
	for _, section := range []string{"Parameters", logicalID} {
		for k, v := range all[section] {
			out[k] = stringify(v)
		}
	}
	return out, nil
}

// samResolver resolves intrinsics the way `sam local` does.
type samResolver struct {
	doc    map[string]any
	params map[string]any // name → value; absent when it has neither default nor override
	region string
}

func (r *samResolver) readParameters(overrides map[string]string) {
	decls, _ := asMap(r.doc["Parameters"])
	for name, d := range decls {
		decl, _ := asMap(d)
		if v, ok := decl["Default"]; ok {
			r.params[name] = v
		}
		if v, ok := overrides[name]; ok {
			r.params[name] = v
		}
	}
}

// functionProperties is the function's properties with Globals.Function
// merged in (maps merge key by key, the function's value wins).
func (r *samResolver) functionProperties(logicalID string) (map[string]any, error) {
	resources, _ := asMap(r.doc["Resources"])
	res, _ := asMap(resources[logicalID])
	if res == nil || res["Type"] != "AWS::Serverless::Function" {
		return nil, fmt.Errorf("sam environment: %s: %w", logicalID, ErrNoFunction)
	}
	props, _ := asMap(res["Properties"])
	allGlobals, _ := asMap(r.doc["Globals"])
	globals, _ := asMap(allGlobals["Function"])
	merged, _ := merge(globals, props).(map[string]any)
	if merged == nil {
		merged = map[string]any{}
	}
	return merged, nil
}

func merge(global, local any) any {
	g, gok := asMap(global)
	l, lok := asMap(local)
	if !gok || !lok {
		if local != nil {
			return local
		}
		return global
	}
	out := maps.Clone(g)
	for k, v := range l {
		out[k] = merge(g[k], v)
	}
	return out
}

func (r *samResolver) awsVariables(name string, props map[string]any, creds *Credentials) map[string]string {
	memory, timeout, handler := "128", "3", ""
	if v := stringify(r.resolve(props["MemorySize"])); v != "" {
		memory = v
	}
	if v := stringify(r.resolve(props["Timeout"])); v != "" {
		timeout = v
	}
	handler = stringify(r.resolve(props["Handler"]))
	env := map[string]string{
		"AWS_SAM_LOCAL":                   "true",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     timeout,
		"AWS_LAMBDA_FUNCTION_HANDLER":     handler,
		"AWS_LAMBDA_FUNCTION_NAME":        name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "aws/lambda/" + name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "$LATEST",
		"AWS_REGION":                      r.region,
		"AWS_DEFAULT_REGION":              r.region,
		"AWS_ACCESS_KEY_ID":               samKey,
		"AWS_SECRET_ACCESS_KEY":           samSecret,
		"AWS_ACCOUNT_ID":                  samAccountID,
	}
	if creds != nil {
		if creds.AccessKeyID != "" {
			env["AWS_ACCESS_KEY_ID"] = creds.AccessKeyID
		}
		if creds.SecretAccessKey != "" {
			env["AWS_SECRET_ACCESS_KEY"] = creds.SecretAccessKey
		}
		if creds.SessionToken != "" {
			env["AWS_SESSION_TOKEN"] = creds.SessionToken
		}
	}
	logging, _ := asMap(props["LoggingConfig"])
	if stringify(r.resolve(logging["LogFormat"])) == "JSON" {
		env["AWS_LAMBDA_LOG_FORMAT"] = "JSON"
		level := stringify(r.resolve(logging["ApplicationLogLevel"]))
		if level == "" {
			level = "INFO"
		}
		env["AWS_LAMBDA_LOG_LEVEL"] = level
	}
	return env
}

// unresolved marks a value SAM's resolver leaves as an intrinsic, which
// stringify turns into "".
type unresolved struct{}

var subRef = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// resolve evaluates Ref and Fn::Sub with SAM's symbol table; any other
// intrinsic, and a Ref it cannot resolve, stays unresolved.
func (r *samResolver) resolve(v any) any {
	m, ok := asMap(v)
	if !ok || len(m) != 1 {
		return v
	}
	if name, ok := m["Ref"].(string); ok {
		return r.ref(name)
	}
	if sub, ok := m["Fn::Sub"]; ok {
		s, ok := sub.(string)
		if !ok {
			return unresolved{}
		}
		failed := false
		out := subRef.ReplaceAllStringFunc(s, func(x string) string {
			name := x[2 : len(x)-1]
			if strings.Contains(name, ".") {
				failed = true // GetAtt-style references are not in the symbol table
				return x
			}
			v := r.ref(name)
			if _, bad := v.(unresolved); bad {
				failed = true
				return x
			}
			return stringify(v)
		})
		if failed {
			return unresolved{}
		}
		return out
	}
	for k := range m {
		if k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return unresolved{}
		}
	}
	return v
}

func (r *samResolver) ref(name string) any {
	switch name {
	case "AWS::Region":
		return r.region
	case "AWS::AccountId":
		return samAccountID
	case "AWS::Partition":
		return "aws"
	case "AWS::StackName":
		return samStackName
	case "AWS::StackId":
		return "arn:aws:cloudformation:" + r.region + ":" + samAccountID + ":stack/" + samStackName + "/51af3dc0-da77-11e4-872e-1234567db123"
	case "AWS::URLSuffix":
		return "localhost"
	}
	if v, ok := r.params[name]; ok {
		return v
	}
	decls, _ := asMap(r.doc["Parameters"])
	if _, declared := decls[name]; declared {
		return unresolved{} // a parameter with neither default nor override
	}
	resources, _ := asMap(r.doc["Resources"])
	if _, ok := resources[name]; ok {
		return name // SAM's symbol table: a resource's Ref is its logical id
	}
	return unresolved{}
}

// stringify is SAM's _stringify_value: dicts, lists, None and unresolved
// intrinsics become "", booleans "true"/"false", anything else its text.
func stringify(v any) string {
	switch x := v.(type) {
	case nil, unresolved, map[string]any, []any:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

func asMap(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

// SAMEnvironment reads templatePath and envVarsPath ("" for none) and returns
// Environment(logicalID) with the given overrides, no shell and no profile:
// what `sam local invoke LOGICALID --env-vars FILE` gives a function on a
// machine without AWS credentials and with a clean shell.
func SAMEnvironment(templatePath, envVarsPath, logicalID string, overrides map[string]string) (map[string]string, error) {
	tpl, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("sam environment: %w", err)
	}
	s := SAMInvoke{Template: tpl, ParameterOverrides: overrides}
	if envVarsPath != "" {
		if s.EnvVars, err = os.ReadFile(envVarsPath); err != nil {
			return nil, fmt.Errorf("sam environment: %w", err)
		}
	}
	return s.Environment(logicalID)
}
