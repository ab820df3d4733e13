package template

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// allowed lists the wildcard grants the stack may hold, each with the reason
// it cannot be narrowed. Every entry must be used (a stale entry fails).
var allowed = []struct{ action, resource, reason string }{
	{"xray:PutTraceSegments", "*", "X-Ray has no resource-level permissions (AWS docs); SAM attaches AWSXrayWriteOnlyAccess for Tracing: Active"},
	{"xray:PutTelemetryRecords", "*", "X-Ray has no resource-level permissions; part of AWSXrayWriteOnlyAccess"},
	{"xray:GetSamplingRules", "*", "X-Ray has no resource-level permissions; part of AWSXrayWriteOnlyAccess"},
	{"xray:GetSamplingTargets", "*", "X-Ray has no resource-level permissions; part of AWSXrayWriteOnlyAccess"},
	{"xray:GetSamplingStatisticSummaries", "*", "X-Ray has no resource-level permissions; part of AWSXrayWriteOnlyAccess"},
	{"logs:CreateLogGroup", "*", "AWSLambdaBasicExecutionRole, attached by SAM to every generated function role"},
	{"logs:CreateLogStream", "*", "AWSLambdaBasicExecutionRole, attached by SAM to every generated function role"},
	{"logs:PutLogEvents", "*", "AWSLambdaBasicExecutionRole, attached by SAM to every generated function role"},
	{"sqs:ReceiveMessage", "*", "AWSLambdaSQSQueueExecutionRole, attached by SAM for SQS event sources; SAM offers no scoped variant"},
	{"sqs:DeleteMessage", "*", "AWSLambdaSQSQueueExecutionRole, attached by SAM for SQS event sources"},
	{"sqs:GetQueueAttributes", "*", "AWSLambdaSQSQueueExecutionRole, attached by SAM for SQS event sources"},
	{"scheduler:CreateSchedule", "arn:aws:scheduler:us-east-1:000000000000:schedule/default/linegate-silence-*",
		"one-time schedules that end a ChatOps silence are named per alarm and end time; the stack's own prefix is the narrowest grant"},
}

// samManaged holds the AWS managed policies SAM attaches implicitly, as
// published by AWS (they are not in the template, so they are modelled here).
var samManaged = map[string][]any{
	"AWSLambdaBasicExecutionRole": {stmt([]string{"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}, "*")},
	"AWSXrayWriteOnlyAccess": {stmt([]string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
		"xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries"}, "*")},
	"AWSLambdaSQSQueueExecutionRole": {
		stmt([]string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}, "*"),
		stmt([]string{"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}, "*"),
	},
}

func stmt(actions []string, resource string) map[string]any {
	list := make([]any, len(actions))
	for i, a := range actions {
		list[i] = a
	}
	return map[string]any{"Effect": "Allow", "Action": list, "Resource": resource}
}

// policyTemplates loads SAM's policy templates (a copy of
// /work/shared/sam/policy_templates.json).
func policyTemplates(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/policy_templates.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Templates map[string]any }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Templates) == 0 {
		t.Fatal("no policy templates")
	}
	return doc.Templates
}

// substitute replaces {"Ref": P} for each template parameter P.
func substitute(v any, params map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok && len(x) == 1 {
			if p, ok := params[ref]; ok {
				return p
			}
		}
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = substitute(val, params)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = substitute(val, params)
		}
		return out
	}
	return v
}

// grant is one evaluated policy statement with where it came from.
type grant struct {
	where string
	doc   map[string]any
}

// functionGrants expands every function's Policies (inline statements and
// SAM policy templates) plus what SAM adds implicitly.
func functionGrants(t *testing.T, e *evaluator, templates map[string]any) ([]grant, []string) {
	var grants []grant
	var problems []string
	for _, r := range e.enabledResources() {
		id := r.id
		if r.typ != "AWS::Serverless::Function" {
			continue
		}
		if _, ok := r.props["Role"]; ok {
			problems = append(problems, id+": uses an external Role this test cannot inspect")
			continue
		}
		add := func(where string, statements any) {
			list, ok := statements.([]any)
			if !ok {
				list = []any{statements}
			}
			for i, s := range list {
				m, ok := s.(map[string]any)
				if !ok {
					problems = append(problems, fmt.Sprintf("%s[%d]: statement is not a mapping", where, i))
					continue
				}
				grants = append(grants, grant{fmt.Sprintf("%s[%d]", where, i), m})
			}
		}
		policies, _ := r.props["Policies"].([]any)
		if p, ok := r.props["Policies"]; ok && policies == nil {
			policies = []any{p}
		}
		for i, p := range policies {
			where := fmt.Sprintf("%s.Policies[%d]", id, i)
			switch x := p.(type) {
			case string:
				problems = append(problems, fmt.Sprintf("%s: managed policy %q cannot be inspected; use statements", where, x))
			case map[string]any:
				if st, ok := x["Statement"]; ok {
					v, err := e.eval(where, st)
					if err != nil {
						t.Fatal(err)
					}
					add(where, v)
					continue
				}
				if len(x) != 1 {
					problems = append(problems, where+": not a policy document or a single policy template")
					continue
				}
				for name, params := range x {
					tpl, ok := templates[name].(map[string]any)
					if !ok {
						problems = append(problems, fmt.Sprintf("%s: unknown SAM policy template %q", where, name))
						continue
					}
					pm, _ := params.(map[string]any)
					def := substitute(tpl["Definition"], pm).(map[string]any)
					v, err := e.eval(where+"."+name, def["Statement"])
					if err != nil {
						t.Fatal(err)
					}
					add(where+"."+name, v)
				}
			}
		}
		add(id+"(SAM AWSLambdaBasicExecutionRole)", samManaged["AWSLambdaBasicExecutionRole"])
		if s, _ := scalarString(r.props["Tracing"]); s == "Active" {
			add(id+"(SAM AWSXrayWriteOnlyAccess)", samManaged["AWSXrayWriteOnlyAccess"])
		}
		events, _ := r.props["Events"].(map[string]any)
		for _, name := range sortedKeys(events) {
			if ev, _ := events[name].(map[string]any); ev["Type"] == "SQS" {
				add(id+"(SAM AWSLambdaSQSQueueExecutionRole)", samManaged["AWSLambdaSQSQueueExecutionRole"])
				break
			}
		}
	}
	return grants, problems
}

// resourcePolicies returns the statements of every resource-based and IAM
// policy document declared as a resource.
func resourcePolicies(t *testing.T, e *evaluator) []grant {
	var grants []grant
	for _, r := range e.enabledResources() {
		id := r.id
		props, err := e.props(r)
		if err != nil {
			t.Fatal(err)
		}
		var docs []any
		if d, ok := props["PolicyDocument"]; ok {
			docs = append(docs, d)
		}
		if ps, ok := props["Policies"].([]any); ok && strings.HasPrefix(r.typ, "AWS::IAM::") {
			for _, p := range ps {
				if m, ok := p.(map[string]any); ok {
					docs = append(docs, m["PolicyDocument"])
				}
			}
		}
		for i, d := range docs {
			m, _ := d.(map[string]any)
			list, ok := m["Statement"].([]any)
			if !ok {
				list = []any{m["Statement"]}
			}
			for j, s := range list {
				sm, _ := s.(map[string]any)
				grants = append(grants, grant{fmt.Sprintf("%s.PolicyDocument[%d].Statement[%d]", id, i, j), sm})
			}
		}
	}
	return grants
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, i := range x {
			if s, ok := scalarString(i); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// violations lists every wildcard grant not on the allow-list, every public
// principal and every service principal without a source condition. used
// collects the allow-list entries that matched.
func violations(grants []grant, used map[int]bool) []string {
	var out []string
	for _, g := range grants {
		s := g.doc
		if s["Effect"] != "Allow" {
			continue
		}
		for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
			if _, ok := s[k]; ok {
				out = append(out, fmt.Sprintf("%s: %s grants everything else", g.where, k))
			}
		}
		if p, ok := s["Principal"]; ok {
			pm, _ := p.(map[string]any)
			if p == "*" || (pm != nil && strings.Join(strs(pm["AWS"]), ",") == "*") {
				out = append(out, fmt.Sprintf("%s: public principal", g.where))
			}
			if pm != nil && pm["Service"] != nil {
				cond, _ := s["Condition"].(map[string]any)
				if !mentions(cond, "aws:SourceArn") && !mentions(cond, "aws:SourceAccount") {
					out = append(out, fmt.Sprintf("%s: service principal %v without aws:SourceArn/aws:SourceAccount condition", g.where, pm["Service"]))
				}
			}
		}
		resources := strs(s["Resource"])
		if len(resources) == 0 {
			out = append(out, fmt.Sprintf("%s: no Resource", g.where))
		}
		for _, a := range strs(s["Action"]) {
			for _, res := range resources {
				if !strings.Contains(a, "*") && !strings.Contains(res, "*") {
					continue
				}
				ok := false
				for i, al := range allowed {
					if al.action == a && al.resource == res {
						ok, used[i] = true, true
					}
				}
				if !ok {
					out = append(out, fmt.Sprintf("%s: %s on %s", g.where, a, res))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func mentions(cond map[string]any, key string) bool {
	for _, op := range cond {
		if m, ok := op.(map[string]any); ok {
			if _, ok := m[key]; ok {
				return true
			}
		}
	}
	return false
}

func evaluatorFor(t *testing.T, data []byte) *evaluator {
	t.Helper()
	root, err := decodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEvaluator(config{region: DefaultRegion, account: DefaultAccountID, stack: DefaultStackName, partition: "aws", urlSuffix: "amazonaws.com"}, root.(map[string]any), required)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func audit(t *testing.T, data []byte, used map[int]bool) []string {
	t.Helper()
	e := evaluatorFor(t, data)
	grants, problems := functionGrants(t, e, policyTemplates(t))
	grants = append(grants, resourcePolicies(t, e)...)
	if len(grants) == 0 {
		t.Fatal("no policy statements found")
	}
	return append(problems, violations(grants, used)...)
}

func TestLeastPrivilege(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, v := range audit(t, data, used) {
		t.Error(v)
	}
	for i, al := range allowed {
		if !used[i] {
			t.Errorf("allow-list entry %s on %s is not needed any more: remove it", al.action, al.resource)
		}
	}
}

// TestLeastPrivilegeDetects proves the audit fails on each kind of
// over-broad grant, so a passing TestLeastPrivilege means something.
func TestLeastPrivilegeDetects(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	tests := []struct{ name, old, new, want string }{
		{"wildcard resource",
			"              Resource: !GetAtt IdempotencyTable.Arn\n",
			"              Resource: \"*\"\n",
			"WorkerFunction.Policies[0][0]: dynamodb:GetItem on *"},
		{"wildcard action",
			"                - dynamodb:GetItem\n",
			"                - dynamodb:*\n",
			"WorkerFunction.Policies[0][0]: dynamodb:* on arn:aws:dynamodb:us-east-1:000000000000:table/linegate-IdempotencyTable"},
		{"SAM template with a wildcard",
			"        - SNSPublishMessagePolicy:\n            TopicName: !GetAtt OpsTopic.TopicName\n",
			"        - SSMParameterReadPolicy:\n            ParameterName: linegate/x\n",
			"WorkerFunction.Policies[1].SSMParameterReadPolicy[0]: ssm:DescribeParameters on *"},
		{"SAM template expanded with its parameter",
			"        - EventBridgePutEventsPolicy:\n            EventBusName: !Ref EventBus\n",
			"        - SQSSendMessagePolicy:\n            QueueName: !GetAtt InteractiveQueue.QueueName\n",
			"WebhookFunction.Policies[0].SQSSendMessagePolicy[0]: sqs:SendMessage* on arn:aws:sqs:us-east-1:000000000000:linegate-InteractiveQueue.fifo"},
		{"managed policy by name",
			"        - Statement:\n            - Sid: ReadChannelAccessToken\n              Effect: Allow\n              Action:\n                - ssm:GetParameter\n                - ssm:GetParameters\n              Resource: !Sub \"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ChannelAccessTokenParameter}\"\n        # Exactly what holding",
			"        - AmazonSSMReadOnlyAccess\n        # Exactly what holding",
			`WorkerFunction.Policies[3]: managed policy "AmazonSSMReadOnlyAccess" cannot be inspected; use statements`},
		{"service principal without condition",
			"            Condition:\n              ArnEquals:\n                aws:SourceArn: !GetAtt ReplayRule.Arn\n",
			"",
			"InteractiveQueuePolicy.PolicyDocument[0].Statement[0]: service principal events.amazonaws.com without aws:SourceArn/aws:SourceAccount condition"},
		{"public principal",
			"            Principal:\n              Service: cloudwatch.amazonaws.com\n",
			"            Principal: \"*\"\n",
			"OpsTopicPolicy.PolicyDocument[0].Statement[0]: public principal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(src, tc.old) != 1 {
				t.Fatalf("template has %d copies of %q", strings.Count(src, tc.old), tc.old)
			}
			got := audit(t, []byte(strings.Replace(src, tc.old, tc.new, 1)), map[int]bool{})
			found := false
			for _, v := range got {
				found = found || v == tc.want
			}
			if !found {
				t.Errorf("violations = %q, want %q among them", got, tc.want)
			}
		})
	}
}

// sqsGrants lists, per function, every SQS action its own policies grant
// (not SAM's event-source role), as "action on resource".
func sqsGrants(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	e := evaluatorFor(t, data)
	grants, _ := functionGrants(t, e, policyTemplates(t))
	out := map[string][]string{}
	for _, g := range grants {
		fn, _, _ := strings.Cut(g.where, ".")
		if strings.Contains(g.where, "(SAM ") {
			continue
		}
		for _, a := range strs(g.doc["Action"]) {
			if !strings.HasPrefix(a, "sqs:") {
				continue
			}
			for _, r := range strs(g.doc["Resource"]) {
				out[fn] = append(out[fn], a+" on "+r[strings.LastIndex(r, ":")+1:])
			}
		}
	}
	for fn := range out {
		sort.Strings(out[fn])
	}
	return out
}

// The webhook and the worker reach SQS with exactly the grants their work
// needs (docs/adr/0001, 0002): the webhook sends to the chat queue; the
// worker reads the redrive policy of, and changes visibility on, its own
// source queues, and sends to their dead-letter queues and the long-work
// queue. Nothing else, and the notifier nothing at all.
func TestSQSGrantsAreExact(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		// The quota governor reads, rewrites and counts held results.
		"QuotaFunction": {
			"sqs:DeleteMessage on linegate-HeldQueue", "sqs:GetQueueAttributes on linegate-HeldQueue",
			"sqs:ReceiveMessage on linegate-HeldQueue", "sqs:SendMessage on linegate-HeldQueue",
		},
		"WebhookFunction": {"sqs:SendMessage on linegate-InteractiveQueue.fifo"},
		"WorkerFunction": {
			// Settling failures on the queues records come from, and long work.
			"sqs:ChangeMessageVisibility on linegate-BackgroundQueue",
			"sqs:ChangeMessageVisibility on linegate-InteractiveQueue.fifo",
			"sqs:ChangeMessageVisibility on linegate-LongQueue",
			"sqs:GetQueueAttributes on linegate-BackgroundQueue",
			"sqs:GetQueueAttributes on linegate-InteractiveQueue.fifo",
			"sqs:GetQueueAttributes on linegate-LongQueue",
			"sqs:SendMessage on linegate-BackgroundDLQ",
			"sqs:SendMessage on linegate-InteractiveDLQ.fifo",
			"sqs:SendMessage on linegate-LongDLQ",
			"sqs:SendMessage on linegate-LongQueue",
			// Holding and resending results.
			"sqs:ChangeMessageVisibility on linegate-HeldQueue",
			"sqs:DeleteMessage on linegate-HeldQueue",
			"sqs:GetQueueAttributes on linegate-HeldQueue",
			"sqs:ReceiveMessage on linegate-HeldQueue",
			"sqs:SendMessage on linegate-HeldQueue",
			// ChatOps' Redrive: the DLQs it may empty and the queues they serve.
			"sqs:DeleteMessage on linegate-BackgroundDLQ", "sqs:DeleteMessage on linegate-InteractiveDLQ.fifo", "sqs:DeleteMessage on linegate-LongDLQ",
			"sqs:GetQueueAttributes on linegate-BackgroundDLQ", "sqs:GetQueueAttributes on linegate-InteractiveDLQ.fifo", "sqs:GetQueueAttributes on linegate-LongDLQ",
			"sqs:GetQueueUrl on linegate-BackgroundDLQ", "sqs:GetQueueUrl on linegate-InteractiveDLQ.fifo", "sqs:GetQueueUrl on linegate-LongDLQ",
			"sqs:ListDeadLetterSourceQueues on linegate-BackgroundDLQ", "sqs:ListDeadLetterSourceQueues on linegate-InteractiveDLQ.fifo", "sqs:ListDeadLetterSourceQueues on linegate-LongDLQ",
			"sqs:ListMessageMoveTasks on linegate-BackgroundDLQ", "sqs:ListMessageMoveTasks on linegate-InteractiveDLQ.fifo", "sqs:ListMessageMoveTasks on linegate-LongDLQ",
			"sqs:ReceiveMessage on linegate-BackgroundDLQ", "sqs:ReceiveMessage on linegate-InteractiveDLQ.fifo", "sqs:ReceiveMessage on linegate-LongDLQ",
			"sqs:SendMessage on linegate-BackgroundQueue", "sqs:SendMessage on linegate-InteractiveQueue.fifo",
			"sqs:StartMessageMoveTask on linegate-BackgroundDLQ", "sqs:StartMessageMoveTask on linegate-InteractiveDLQ.fifo", "sqs:StartMessageMoveTask on linegate-LongDLQ",
		},
	}
	for _, g := range want {
		slices.Sort(g)
	}
	got := sqsGrants(t, data)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("SQS grants\n got %v\nwant %v", got, want)
	}
	// The check sees a grant too many.
	const last = "                - !GetAtt LongQueue.Arn\n        - Statement:\n"
	if strings.Count(string(data), last) != 1 {
		t.Fatalf("the template does not end the worker's SQS grants with %q", last)
	}
	more := strings.Replace(string(data), last, "                - !GetAtt LongQueue.Arn\n                - !GetAtt RuleTargetDLQ.Arn\n        - Statement:\n", 1)
	if fmt.Sprint(sqsGrants(t, []byte(more))) == fmt.Sprint(want) {
		t.Fatal("a send to the rule-target DLQ went unnoticed")
	}
}
