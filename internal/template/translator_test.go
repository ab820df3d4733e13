package template

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checks below read what CloudFormation would deploy: template.yaml after
// the real SAM translator (samtranslator, installed with cfn-lint), run
// offline by testdata/sam_transform.py. They catch what the template alone
// hides: the roles and managed policies SAM generates, the stage it derives
// from the API, the event source mappings of each function.

// samPython finds a python3 that imports samtranslator and cfnlint: the
// PATH's, else the interpreter cfn-lint itself runs with (pipx installs it
// in a virtual environment of its own). Without one the test is skipped
// loudly, and fails under CI=true.
func samPython(t *testing.T) string {
	t.Helper()
	var tried []string
	candidates := []string{"python3"}
	if bin, err := exec.LookPath("cfn-lint"); err == nil {
		if f, err := os.Open(bin); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if py, ok := strings.CutPrefix(strings.TrimSpace(line), "#!"); ok && !strings.Contains(py, " ") {
				candidates = append(candidates, py)
			}
		}
	}
	for _, py := range candidates {
		out, err := exec.Command(py, "-c", "import samtranslator, cfnlint").CombinedOutput()
		if err == nil {
			return py
		}
		tried = append(tried, fmt.Sprintf("%s: %v %s", py, err, strings.TrimSpace(string(out))))
	}
	msg := "the SAM translator (python3 -c 'import samtranslator', installed with cfn-lint) is not available: " + strings.Join(tried, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED LOUDLY: " + msg + "; the transformed template is NOT checked")
	return ""
}

// transformed is one template after the SAM transform.
type transformed struct {
	Parameters map[string]struct {
		Default any `json:"Default"`
	} `json:"Parameters"`
	Conditions map[string]any `json:"Conditions"`
	Resources  map[string]struct {
		Type                string         `json:"Type"`
		DeletionPolicy      string         `json:"DeletionPolicy"`
		UpdateReplacePolicy string         `json:"UpdateReplacePolicy"`
		Properties          map[string]any `json:"Properties"`
	} `json:"Resources"`
}

// samTranslate runs the SAM translator on each template (one python process
// for all of them) and returns the transformed templates, or the
// translator's refusal, by path.
func samTranslate(t *testing.T, paths ...string) (map[string]*transformed, map[string]string) {
	t.Helper()
	py := samPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("testdata", "sam_transform.py")}, paths...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sam_transform.py: %v\n%s", err, stderr.String())
	}
	var raw map[string]struct {
		Template *transformed `json:"template"`
		Error    string       `json:"error"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("sam_transform.py output: %v", err)
	}
	got, refused := map[string]*transformed{}, map[string]string{}
	for p, r := range raw {
		if r.Error != "" || r.Template == nil {
			refused[p] = r.Error
			continue
		}
		got[p] = r.Template
	}
	return got, refused
}

// value resolves v under the parameters' defaults: Ref to a parameter,
// Fn::If on a condition; other intrinsics are returned as they are.
func (tt *transformed) value(v any) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return v
	}
	if ref, ok := m["Ref"].(string); ok {
		if p, ok := tt.Parameters[ref]; ok {
			return p.Default
		}
		return v
	}
	if args, ok := m["Fn::If"].([]any); ok && len(args) == 3 {
		name, _ := args[0].(string)
		if tt.condition(tt.Conditions[name]) {
			return tt.value(args[1])
		}
		return tt.value(args[2])
	}
	return v
}

// condition evaluates a condition under the parameters' defaults.
func (tt *transformed) condition(v any) bool {
	m, _ := v.(map[string]any)
	for fn, a := range m {
		args, _ := a.([]any)
		switch fn {
		case "Fn::Equals":
			return len(args) == 2 && fmt.Sprint(tt.value(args[0])) == fmt.Sprint(tt.value(args[1]))
		case "Fn::Not":
			return len(args) == 1 && !tt.condition(args[0])
		case "Fn::And", "Fn::Or":
			all, any := true, false
			for _, c := range args {
				b := tt.condition(c)
				all, any = all && b, any || b
			}
			if fn == "Fn::And" {
				return all
			}
			return any
		case "Condition":
			name, _ := a.(string)
			return tt.condition(tt.Conditions[name])
		}
	}
	return false
}

// number is a resolved numeric property (-1 when it is not one).
func (tt *transformed) number(v any) float64 {
	switch x := tt.value(v).(type) {
	case float64:
		return x
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return f
		}
	}
	return -1
}

// statements lists a policy document's statements, both branches of every
// Fn::If (a grant is judged whatever the parameters).
func statements(doc any) []map[string]any {
	var out []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, i := range x {
				walk(i)
			}
		case map[string]any:
			if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
				walk(args[1])
				walk(args[2])
				return
			}
			if _, ok := x["Effect"]; ok {
				out = append(out, x)
			}
		}
	}
	if m, ok := doc.(map[string]any); ok {
		walk(m["Statement"])
	}
	return out
}

// awsManaged holds the AWS managed policies a role of the stack may attach,
// with what AWS publishes they grant (the IAM console, "AWS managed
// policies"): only these can be judged; any other managed policy fails the
// audit. AWSLambdaSQSQueueExecutionRole is here to be refused.
var awsManaged = map[string][]map[string]any{
	"AWSLambdaBasicExecutionRole": {{"Effect": "Allow", "Action": []any{"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}, "Resource": "*"}},
	"AWSXrayWriteOnlyAccess": {{"Effect": "Allow", "Action": []any{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
		"xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries"}, "Resource": "*"}},
	"AWSLambdaSQSQueueExecutionRole": {
		{"Effect": "Allow", "Action": []any{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}, "Resource": "*"},
		{"Effect": "Allow", "Action": []any{"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}, "Resource": "*"},
	},
}

// wildcardOK reports whether action may be granted on Resource "*": X-Ray has
// no resource-level permissions, log writes and cloudwatch:PutMetricData are
// not scoped by the stack's resources.
func wildcardOK(action string) bool {
	return strings.HasPrefix(action, "xray:") || strings.HasPrefix(action, "logs:") || action == "cloudwatch:PutMetricData"
}

// auditRoles lists every grant of every IAM role of tt that is too broad: a
// Resource "*" beyond X-Ray, logs and cloudwatch:PutMetricData; any SQS
// action on a resource with a wildcard (every queue of an account); any
// managed policy not in awsManaged, and those that break the first two rules.
func auditRoles(tt *transformed) []string {
	var out []string
	check := func(where string, s map[string]any) {
		if s["Effect"] != "Allow" {
			return
		}
		for _, k := range []string{"NotAction", "NotResource"} {
			if _, ok := s[k]; ok {
				out = append(out, fmt.Sprintf("%s: %s grants everything else", where, k))
			}
		}
		for _, a := range strs(s["Action"]) {
			for _, r := range resourceStrings(s["Resource"]) {
				switch {
				case r == "*" && !wildcardOK(a):
					out = append(out, fmt.Sprintf("%s: %s on *", where, a))
				case strings.HasPrefix(strings.ToLower(a), "sqs:") && strings.Contains(r, "*"):
					out = append(out, fmt.Sprintf("%s: %s on %s (every queue)", where, a, r))
				}
			}
		}
	}
	for _, id := range sortedKeys(resourcesOf(tt)) {
		r := tt.Resources[id]
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		policies, _ := r.Properties["Policies"].([]any)
		for i, p := range policies {
			pm, _ := p.(map[string]any)
			for j, s := range statements(pm["PolicyDocument"]) {
				check(fmt.Sprintf("%s.Policies[%d].Statement[%d]", id, i, j), s)
			}
		}
		arns, _ := r.Properties["ManagedPolicyArns"].([]any)
		for _, a := range arns {
			arn := fmt.Sprint(a)
			if m, ok := a.(map[string]any); ok {
				arn = fmt.Sprint(m["Fn::Sub"])
			}
			name := arn[strings.LastIndex(arn, "/")+1:]
			grants, ok := awsManaged[name]
			if !ok {
				out = append(out, fmt.Sprintf("%s: managed policy %s cannot be judged (not in awsManaged)", id, arn))
				continue
			}
			for j, s := range grants {
				check(fmt.Sprintf("%s.ManagedPolicyArns[%s][%d]", id, name, j), s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// resourceStrings renders a statement's Resource for the audit: strings as
// they are, Fn::Sub by its pattern (where a wildcard would show), a
// reference by the logical id it names, both branches of an Fn::If.
func resourceStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, i := range x {
			out = append(out, resourceStrings(i)...)
		}
		return out
	case map[string]any:
		if sub, ok := x["Fn::Sub"]; ok {
			if l, ok := sub.([]any); ok && len(l) > 0 {
				sub = l[0]
			}
			return []string{fmt.Sprint(sub)}
		}
		if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
			return append(resourceStrings(args[1]), resourceStrings(args[2])...)
		}
		if id := refTo(x); id != "" {
			return []string{"ref:" + id}
		}
	}
	return nil
}

func resourcesOf(tt *transformed) map[string]any {
	m := make(map[string]any, len(tt.Resources))
	for id := range tt.Resources {
		m[id] = nil
	}
	return m
}

// refTo is the logical id an ARN-valued property names: Ref X or GetAtt X.*.
func refTo(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) == 2 {
		id, _ := g[0].(string)
		return id
	}
	return ""
}

// auditStack lists what the transformed stack gets wrong about the issue's
// done-when: state retained, throttling, the 4XX alarm and its log fields,
// no constant FIFO group, reserved concurrency that covers the mappings.
func auditStack(tt *transformed) []string {
	var out []string
	keep := map[string]string{} // logical id -> why it must be retained
	for id, r := range tt.Resources {
		switch r.Type {
		case "AWS::SQS::Queue":
			if rp, ok := r.Properties["RedrivePolicy"].(map[string]any); ok {
				if dlq := refTo(rp["deadLetterTargetArn"]); dlq != "" {
					keep[dlq] = "the dead-letter queue of " + id
				}
			}
		case "AWS::Events::Rule":
			targets, _ := r.Properties["Targets"].([]any)
			for _, tg := range targets {
				tm, _ := tg.(map[string]any)
				if dc, ok := tm["DeadLetterConfig"].(map[string]any); ok {
					keep[refTo(dc["Arn"])] = "the dead-letter queue of rule " + id
				}
				q := refTo(tm["Arn"])
				if qr, ok := tt.Resources[q]; ok && qr.Type == "AWS::SQS::Queue" && fmt.Sprint(tt.value(qr.Properties["FifoQueue"])) == "true" {
					out = append(out, fmt.Sprintf("rule %s sends to FIFO queue %s: a rule target has one constant message group", id, q))
				}
				if sp, ok := tm["SqsParameters"].(map[string]any); ok && sp["MessageGroupId"] != nil {
					out = append(out, fmt.Sprintf("rule %s puts its events in the constant message group %v", id, sp["MessageGroupId"]))
				}
			}
		case "AWS::DynamoDB::Table":
			keep[id] = "a table of the stack (the idempotency records)"
		}
	}
	keep["HeldQueue"] = "the results held for the month's quota"
	for _, id := range sortedKeys(toAny(keep)) {
		r, ok := tt.Resources[id]
		if !ok {
			out = append(out, fmt.Sprintf("%s (%s) is not in the transformed template", id, keep[id]))
			continue
		}
		if r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" {
			out = append(out, fmt.Sprintf("%s (%s): DeletionPolicy %q, UpdateReplacePolicy %q, want Retain and Retain", id, keep[id], r.DeletionPolicy, r.UpdateReplacePolicy))
		}
	}

	stages, alarms4xx := 0, 0
	for id, r := range tt.Resources {
		switch r.Type {
		case "AWS::ApiGatewayV2::Stage", "AWS::ApiGateway::Stage":
			stages++
			rs, _ := r.Properties["DefaultRouteSettings"].(map[string]any)
			if rate, burst := tt.number(rs["ThrottlingRateLimit"]), tt.number(rs["ThrottlingBurstLimit"]); rate < 1000 || burst < 2000 {
				out = append(out, fmt.Sprintf("stage %s throttles at %v/s, burst %v: want at least 1000/s and 2000", id, rate, burst))
			}
			als, _ := r.Properties["AccessLogSettings"].(map[string]any)
			format := fmt.Sprint(als["Format"])
			for _, f := range []string{"$context.status", "$context.error.responseType", "$context.integrationErrorMessage", "$context.integrationStatus"} {
				if !strings.Contains(format, f) {
					out = append(out, fmt.Sprintf("stage %s: the access log has no %s (a throttle must be told from a 5XX)", id, f))
				}
			}
		case "AWS::CloudWatch::Alarm":
			if tt.value(r.Properties["Namespace"]) == "AWS/ApiGateway" && strings.EqualFold(fmt.Sprint(r.Properties["MetricName"]), "4xx") {
				alarms4xx++
			}
		}
	}
	if stages != 1 {
		out = append(out, fmt.Sprintf("%d API stages, want 1", stages))
	}
	if alarms4xx == 0 {
		out = append(out, "no alarm on the API's 4xx")
	}

	// Reserved concurrency covers the sum of each function's mappings'
	// maximum concurrency (AWS: otherwise Lambda may throttle the batches).
	sum := map[string]float64{}
	for _, r := range tt.Resources {
		if r.Type != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		sc, _ := r.Properties["ScalingConfig"].(map[string]any)
		sum[refTo(r.Properties["FunctionName"])] += tt.number(sc["MaximumConcurrency"])
	}
	for fn, need := range sum {
		r := tt.Resources[fn]
		reserved := tt.number(r.Properties["ReservedConcurrentExecutions"])
		if fn == "WebhookFunction" {
			continue // LINE's webhooks take the account's unreserved concurrency; its replay mapping (2) rides along
		}
		if reserved < need {
			out = append(out, fmt.Sprintf("%s: reserved concurrency %v below its mappings' maximum concurrency %v", fn, reserved, need))
		}
	}
	sort.Strings(out)
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestTransformedTemplate checks template.yaml as the SAM translator turns
// it into the stack CloudFormation deploys, and proves each check fails on
// the mistake it is there for (a template edit per case, transformed too).
func TestTransformedTemplate(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	cases := []struct{ name, old, new, want string }{
		{"worker role left to SAM",
			"      Role: !GetAtt WorkerRole.Arn\n", "",
			"WorkerFunctionRole.ManagedPolicyArns[AWSLambdaSQSQueueExecutionRole][0]: sqs:ReceiveMessage on *"},
		{"wildcard SQS grant",
			"              - Sid: ReadOpsQueue\n                Effect: Allow\n                Action:\n                  - sqs:ReceiveMessage\n                  - sqs:DeleteMessage\n                  - sqs:GetQueueAttributes\n                Resource: !GetAtt OpsQueue.Arn\n",
			"              - Sid: ReadOpsQueue\n                Effect: Allow\n                Action:\n                  - sqs:ReceiveMessage\n                  - sqs:DeleteMessage\n                  - sqs:GetQueueAttributes\n                Resource: !Sub \"arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:*\"\n",
			"NotifierRole.Policies[0].Statement[2]: sqs:ReceiveMessage on arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:* (every queue)"},
		{"wildcard resource",
			"                Resource: !GetAtt IdempotencyTable.Arn\n", "                Resource: \"*\"\n",
			"WorkerRole.Policies[0].Statement[3]: dynamodb:GetItem on *"},
		{"a DLQ deleted with the stack",
			"  InteractiveDLQ:\n    Type: AWS::SQS::Queue\n    DeletionPolicy: Retain\n", "  InteractiveDLQ:\n    Type: AWS::SQS::Queue\n    DeletionPolicy: Delete\n",
			`InteractiveDLQ (the dead-letter queue of InteractiveQueue): DeletionPolicy "Delete", UpdateReplacePolicy "Retain", want Retain and Retain`},
		{"the table replaced without a copy",
			"  IdempotencyTable:\n    Type: AWS::DynamoDB::Table\n    DeletionPolicy: Retain\n    UpdateReplacePolicy: Retain\n",
			"  IdempotencyTable:\n    Type: AWS::DynamoDB::Table\n    DeletionPolicy: Retain\n    UpdateReplacePolicy: Delete\n",
			`IdempotencyTable (a table of the stack (the idempotency records)): DeletionPolicy "Retain", UpdateReplacePolicy "Delete", want Retain and Retain`},
		{"throttled at 100/s",
			"    Type: Number\n    Default: 1000\n    MinValue: 1\n", "    Type: Number\n    Default: 100\n    MinValue: 1\n",
			"stage WebhookApiprodStage throttles at 100/s, burst 2000: want at least 1000/s and 2000"},
		{"replays in one FIFO group",
			"        - Id: ReplayQueue\n          Arn: !GetAtt ReplayQueue.Arn\n",
			"        - Id: InteractiveQueue\n          Arn: !GetAtt InteractiveQueue.Arn\n          SqsParameters:\n            MessageGroupId: replay\n",
			"rule ReplayRule sends to FIFO queue InteractiveQueue: a rule target has one constant message group"},
		{"reservation below the mappings",
			"    Type: Number\n    Default: 75\n", "    Type: Number\n    Default: 60\n",
			"WorkerFunction: reserved concurrency 60 below its mappings' maximum concurrency 75"},
		{"no integration error in the access log",
			`,"integrationErrorMessage":"$context.integrationErrorMessage"}`, "}",
			"stage WebhookApiprodStage: the access log has no $context.integrationErrorMessage (a throttle must be told from a 5XX)"},
	}
	dir := t.TempDir()
	paths := []string{templatePath}
	for i, c := range cases {
		if strings.Count(src, c.old) != 1 {
			t.Fatalf("%s: template has %d copies of %q", c.name, strings.Count(src, c.old), c.old)
		}
		p := filepath.Join(dir, fmt.Sprintf("case%d.yaml", i))
		if err := os.WriteFile(p, []byte(strings.Replace(src, c.old, c.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	got, refused := samTranslate(t, paths...)
	for p, why := range refused {
		t.Fatalf("the SAM translator refused %s: %s", p, why)
	}
	tt := got[templatePath]
	for _, v := range append(auditRoles(tt), auditStack(tt)...) {
		t.Error(v)
	}
	// The generated quota role is judged too: SAM's two managed policies.
	if r := tt.Resources["QuotaFunctionRole"]; r.Type != "AWS::IAM::Role" {
		t.Errorf("QuotaFunctionRole is %q: the audit would not see SAM's role", r.Type)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := got[paths[i+1]]
			found := append(auditRoles(bad), auditStack(bad)...)
			for _, v := range found {
				if v == c.want {
					return
				}
			}
			t.Errorf("audit = %q, want %q among them", found, c.want)
		})
	}
}
