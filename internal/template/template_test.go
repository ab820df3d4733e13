package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
)

const templatePath = "../../template.yaml"

// required are the values of the template's parameters that have no
// default (a deploy must give them).
var required = map[string]string{"OperatorLineIds": "U0000000000000000000000000000cafe"}

// withRequired is params plus the required parameters it does not set.
func withRequired(params map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range required {
		out[k] = v
	}
	for k, v := range params {
		out[k] = v
	}
	return out
}

func loadReal(t *testing.T, params map[string]string, opts ...Option) *Topology {
	t.Helper()
	top, err := Load(templatePath, withRequired(params), opts...)
	if err != nil {
		t.Fatalf("Load(%s): %v", templatePath, err)
	}
	return top
}

func TestGoldenTopology(t *testing.T) {
	top := loadReal(t, nil)
	got, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	// go test -update rewrites it from ../../template.yaml.
	golden.Check(t, filepath.Join("testdata", "topology.golden.json"), got)
}

func find[T any](t *testing.T, items []T, id func(T) string, want string) T {
	t.Helper()
	for _, it := range items {
		if id(it) == want {
			return it
		}
	}
	t.Fatalf("%q not found", want)
	var zero T
	return zero
}

func queueID(q Queue) string       { return q.LogicalID }
func ruleID(r Rule) string         { return r.LogicalID }
func functionID(f Function) string { return f.LogicalID }
func alarmID(a Alarm) string       { return a.LogicalID }

// TestRealTemplateSemantics checks the properties the design relies on,
// independently of the golden file.
func TestRealTemplateSemantics(t *testing.T) {
	top := loadReal(t, nil)
	worker := find(t, top.Functions, functionID, "WorkerFunction")
	if len(worker.SQSEvents) != 3 {
		t.Fatalf("worker SQS events = %+v, want 3 (chat, long work, background)", worker.SQSEvents)
	}
	for _, m := range worker.SQSEvents {
		if !m.ReportBatchItemFailures {
			t.Errorf("%s: partial batch failures not reported", m.Name)
		}
		if m.MaxConcurrency < 2 {
			t.Errorf("%s: MaxConcurrency %d < 2", m.Name, m.MaxConcurrency)
		}
		q := find(t, top.Queues, queueID, m.Queue)
		if min := 6*worker.Timeout + m.BatchingWindow; q.VisibilityTimeout < min {
			t.Errorf("%s: visibility %v < 6 x timeout + window (%v)", q.LogicalID, q.VisibilityTimeout, min)
		}
		if q.RedriveTarget == "" || q.MaxReceiveCount < 1 {
			t.Errorf("%s: no redrive (%+v)", q.LogicalID, q)
		}
		dlq := find(t, top.Queues, queueID, q.RedriveTarget)
		if dlq.MessageRetention != 14*24*time.Hour {
			t.Errorf("%s: retention %v, want 14 days", dlq.LogicalID, dlq.MessageRetention)
		}
	}
	// Every dead-letter queue is alarmed, alarm and OK both go to the ops topic.
	dlqs := map[string]bool{}
	for _, q := range top.Queues {
		if q.RedriveTarget != "" {
			dlqs[q.RedriveTarget] = true
		}
		if !q.SSE {
			t.Errorf("%s: not encrypted", q.LogicalID)
		}
	}
	for _, r := range top.Rules {
		for _, tg := range r.Targets {
			if tg.DLQLogicalID == "" {
				t.Errorf("%s/%s: no dead-letter queue", r.LogicalID, tg.ID)
			}
			dlqs[tg.DLQLogicalID] = true
		}
	}
	// The notifier reads the OpsQueue, which the ops topic feeds with the SNS
	// envelope kept, in large batches behind a batching window (ADR 3).
	notifier := find(t, top.Functions, functionID, "NotifierFunction")
	if len(notifier.SQSEvents) != 1 || len(notifier.SNSEvents) != 0 {
		t.Fatalf("notifier events: SQS %+v, SNS %+v; want the ops queue only", notifier.SQSEvents, notifier.SNSEvents)
	}
	ops := notifier.SQSEvents[0]
	if !ops.ReportBatchItemFailures || ops.BatchingWindow < 2*time.Second || ops.BatchSize <= 10 || ops.MaxConcurrency != 2 {
		t.Errorf("notifier mapping %+v: want batch item failures, a window of seconds, a large batch, 2 at once", ops)
	}
	opsQueue := find(t, top.Queues, queueID, ops.Queue)
	if opsQueue.VisibilityTimeout < 6*notifier.Timeout+ops.BatchingWindow || opsQueue.RedriveTarget == "" {
		t.Errorf("ops queue %+v: visibility under 6 x timeout + window, or no DLQ", opsQueue)
	}
	subscribed := false
	for _, sub := range top.Subscriptions {
		if sub.Topic == "OpsTopic" && sub.Queue == ops.Queue {
			subscribed = true
			if sub.RawMessageDelivery {
				t.Errorf("%s: raw message delivery drops the envelope the notifier reads", sub.LogicalID)
			}
		}
	}
	if !subscribed {
		t.Errorf("the ops topic does not deliver to %s: %+v", ops.Queue, top.Subscriptions)
	}
	for id := range dlqs {
		q := find(t, top.Queues, queueID, id)
		alarmed := false
		for _, a := range top.Alarms {
			if a.Namespace == "AWS/SQS" && a.MetricName == "ApproximateNumberOfMessagesVisible" && a.Dimensions["QueueName"] == q.Name {
				alarmed = true
				// The notifier's own DLQ escalates outside LINE too.
				want := "OpsTopic"
				if id == "NotifierFailureQueue" {
					want = "OpsTopic,EscalationTopic"
				}
				if strings.Join(a.AlarmActions, ",") != want || strings.Join(a.OKActions, ",") != want {
					t.Errorf("%s: actions %v / %v, want %s", a.LogicalID, a.AlarmActions, a.OKActions, want)
				}
				if a.TreatMissingData != "ignore" {
					t.Errorf("%s: TreatMissingData %s: a DLQ nobody calls stops reporting and would turn OK while it holds messages", a.LogicalID, a.TreatMissingData)
				}
				if a.Threshold != 0 || a.ComparisonOperator != "GreaterThanThreshold" {
					t.Errorf("%s: fires at %s %v", a.LogicalID, a.ComparisonOperator, a.Threshold)
				}
			}
		}
		if !alarmed {
			t.Errorf("dead-letter queue %s has no depth alarm", id)
		}
	}
	// Environment references resolve to the local physical names.
	webhook := find(t, top.Functions, functionID, "WebhookFunction")
	if got := webhook.Env["EVENT_BUS_NAME"]; got != top.Buses[0].Name {
		t.Errorf("EVENT_BUS_NAME = %q, want %q", got, top.Buses[0].Name)
	}
	if got, want := worker.Env["OPS_TOPIC_ARN"], find(t, top.Topics, func(x Topic) string { return x.LogicalID }, "OpsTopic").ARN; got != want {
		t.Errorf("OPS_TOPIC_ARN = %q, want %q", got, want)
	}
	if got := worker.Env["IDEMPOTENCY_TABLE"]; got != top.Tables[0].Name {
		t.Errorf("IDEMPOTENCY_TABLE = %q, want %q", got, top.Tables[0].Name)
	}
	if worker.Env["FUNCTION_TIMEOUT_SECONDS"] != strconv.Itoa(int(worker.Timeout/time.Second)) {
		t.Errorf("FUNCTION_TIMEOUT_SECONDS %q vs Timeout %v", worker.Env["FUNCTION_TIMEOUT_SECONDS"], worker.Timeout)
	}
	if len(webhook.APIEvents) != 1 || webhook.APIEvents[0].Method != "POST" || webhook.APIEvents[0].Path != "/webhook" {
		t.Errorf("webhook API events = %+v", webhook.APIEvents)
	}
	if got := top.Outputs["WebhookUrl"]; got != "https://webhookapi.execute-api.us-east-1.amazonaws.com/prod/webhook" {
		t.Errorf("WebhookUrl = %q", got)
	}
	// Chat events reach the FIFO chat queue from the webhook, not a rule: the
	// background rule takes events without a chat, the replay rule replayed
	// ones with a chat, to a standard queue the webhook reads and sends on
	// to the chat queue under each event's own chat.
	chat := find(t, top.Queues, queueID, "InteractiveQueue")
	if !chat.FIFO || !chat.ContentBasedDedup || chat.DeduplicationScope != "messageGroup" || chat.FifoThroughputLimit != "perMessageGroupId" {
		t.Errorf("chat queue %+v: want FIFO in high-throughput mode, deduplication per message group", chat)
	}
	if dlq := find(t, top.Queues, queueID, chat.RedriveTarget); !dlq.FIFO {
		t.Errorf("the chat queue's DLQ %s is not FIFO", dlq.LogicalID)
	}
	if got := webhook.Env["CHAT_QUEUE_URL"]; got != chat.URL {
		t.Errorf("CHAT_QUEUE_URL = %q, want %q", got, chat.URL)
	}
	long := find(t, top.Queues, queueID, "LongQueue")
	if long.FIFO || worker.Env["ROUTE_QUEUES"] != "long="+long.URL {
		t.Errorf("long-work queue %+v, ROUTE_QUEUES %q", long, worker.Env["ROUTE_QUEUES"])
	}
	mappings := map[string]SQSMapping{}
	for _, m := range worker.SQSEvents {
		mappings[m.Queue] = m
	}
	if m := mappings["InteractiveQueue"]; m.BatchingWindow != 0 {
		t.Errorf("the chat queue's mapping waits %v to fill a batch: quick replies come first", m.BatchingWindow)
	}
	if m := mappings["LongQueue"]; m.BatchSize != 1 || m.MaxConcurrency != 20 {
		t.Errorf("long-work mapping %+v: want one job per invocation on its own capacity (LongWorkMaxConcurrency)", m)
	}
	for _, r := range top.Rules {
		if r.LogicalID == "InteractiveRule" {
			t.Error("the interactive rule is back: chat events would reach the chat queue twice, unordered")
		}
	}
	patterns := map[string]string{
		"BackgroundRule": `{"detail":{"chat":[{"exists":false}]},"source":["line.webhook"]}`,
		"ReplayRule":     `{"detail":{"chat":[{"exists":true}]},"replay-name":[{"exists":true}],"source":["line.webhook"]}`,
	}
	for id, want := range patterns {
		if got := string(find(t, top.Rules, ruleID, id).Pattern); got != want {
			t.Errorf("%s pattern %s, want %s", id, got, want)
		}
	}
	replay := find(t, top.Rules, ruleID, "ReplayRule")
	if len(replay.Targets) != 1 || replay.Targets[0].QueueLogicalID != "ReplayQueue" || replay.Targets[0].MessageGroupID != "" {
		t.Errorf("replay targets %+v: want the standard replay queue, no message group", replay.Targets)
	}
	if q := find(t, top.Queues, queueID, "ReplayQueue"); q.FIFO || q.RedriveTarget != "ReplayDLQ" || q.VisibilityTimeout < 6*webhook.Timeout {
		t.Errorf("replay queue %+v: want standard, dead letters to ReplayDLQ, visibility >= 6 x the webhook's %v", q, webhook.Timeout)
	}
	if len(webhook.SQSEvents) != 1 || webhook.SQSEvents[0].Queue != "ReplayQueue" || !webhook.SQSEvents[0].ReportBatchItemFailures {
		t.Errorf("webhook SQS events %+v: want the replay queue, with partial batch failures", webhook.SQSEvents)
	}
	// No rule puts anything into a FIFO queue: a rule's target has one
	// constant message group, which would line every chat up behind one.
	queues := map[string]Queue{}
	for _, q := range top.Queues {
		queues[q.LogicalID] = q
	}
	for _, r := range top.Rules {
		for _, tg := range r.Targets {
			if queues[tg.QueueLogicalID].FIFO || tg.MessageGroupID != "" {
				t.Errorf("rule %s target %s sends to FIFO queue %s under the constant group %q", r.LogicalID, tg.ID, tg.QueueLogicalID, tg.MessageGroupID)
			}
		}
	}
}

// The loader refuses what AWS refuses around FIFO queues.
func TestFIFORules(t *testing.T) {
	tests := []struct {
		name  string
		edits map[string]string
		want  string
	}{
		{"batching window on a FIFO mapping", map[string]string{"            MaximumBatchingWindowInSeconds: 0\n            FunctionResponseTypes:\n              - ReportBatchItemFailures\n            ScalingConfig:\n              MaximumConcurrency: !Ref WorkerMaxConcurrency\n": "            MaximumBatchingWindowInSeconds: 1\n            FunctionResponseTypes:\n              - ReportBatchItemFailures\n            ScalingConfig:\n              MaximumConcurrency: !Ref WorkerMaxConcurrency\n"}, "no batching window"},
		{"standard DLQ of a FIFO queue", map[string]string{"      FifoQueue: true\n      SqsManagedSseEnabled: true\n      MessageRetentionPeriod: 1209600\n": "      SqsManagedSseEnabled: true\n      MessageRetentionPeriod: 1209600\n"}, "same type"},
		{"FIFO target without a message group", map[string]string{replayTarget: fifoTarget}, "MessageGroupId"},
		{"FIFO target without content-based deduplication", map[string]string{
			replayTarget: fifoTarget + "          SqsParameters:\n            MessageGroupId: g\n",
			"      ContentBasedDeduplication: true\n": "",
		}, "ContentBasedDeduplication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(rewriteAll(t, tt.edits), required)
			if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrSyntax mentioning %q", err, tt.want)
			}
		})
	}
}

// TestVisibilityFollowsWorkerTimeout proves the mapping keeps the SQS
// visibility timeout at least 6 x the worker timeout for every allowed value.
func TestVisibilityFollowsWorkerTimeout(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	allowed := doc.(map[string]any)["Parameters"].(map[string]any)["WorkerTimeoutSeconds"].(map[string]any)["AllowedValues"].([]any)
	if len(allowed) < 2 {
		t.Fatalf("AllowedValues = %v", allowed)
	}
	for _, v := range allowed {
		s, _ := scalarString(v)
		t.Run(s, func(t *testing.T) {
			top := loadReal(t, map[string]string{"WorkerTimeoutSeconds": s})
			worker := find(t, top.Functions, functionID, "WorkerFunction")
			if got := worker.Timeout.String(); got != s+"s" && worker.Timeout != mustSeconds(t, s) {
				t.Fatalf("worker timeout %v, want %ss", worker.Timeout, s)
			}
			for _, m := range worker.SQSEvents {
				q := find(t, top.Queues, queueID, m.Queue)
				if q.VisibilityTimeout < 6*worker.Timeout+m.BatchingWindow {
					t.Errorf("%s: visibility %v < 6 x %v + %v", q.LogicalID, q.VisibilityTimeout, worker.Timeout, m.BatchingWindow)
				}
			}
		})
	}
}

func mustSeconds(t *testing.T, s string) time.Duration {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * time.Second
}

// replayTarget is the replay rule's target; fifoTarget the chat queue as a
// rule target, which the loader must refuse without a message group and
// content-based deduplication.
const (
	replayTarget = "        - Id: ReplayQueue\n          Arn: !GetAtt ReplayQueue.Arn\n"
	fifoTarget   = "        - Id: InteractiveQueue\n          Arn: !GetAtt InteractiveQueue.Arn\n"
)

// rewriteAll writes template.yaml with every old string replaced by its new
// one to a temporary file and returns its path.
func rewriteAll(t *testing.T, edits map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for old, new := range edits {
		if !strings.Contains(s, old) {
			t.Fatalf("template has no %q", old)
		}
		s = strings.ReplaceAll(s, old, new)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func rewrite(t *testing.T, old, new string) string {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if !strings.Contains(s, old) {
		t.Fatalf("template has no %q", old)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(s, old, new)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEditsChangeTopology(t *testing.T) {
	t.Run("maxReceiveCount literal", func(t *testing.T) {
		top, err := Load(rewrite(t, "maxReceiveCount: !Ref MaxReceiveCount", "maxReceiveCount: 3"), required)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"InteractiveQueue", "LongQueue", "BackgroundQueue"} {
			if got := find(t, top.Queues, queueID, id).MaxReceiveCount; got != 3 {
				t.Errorf("%s MaxReceiveCount = %d, want 3", id, got)
			}
		}
	})
	t.Run("maxReceiveCount parameter", func(t *testing.T) {
		top := loadReal(t, map[string]string{"MaxReceiveCount": "7", "EventBusName": "other", "OperatorLineIds": "U0123456789abcdef0123456789abcdef,C0123456789abcdef0123456789abcdef"})
		if got := find(t, top.Queues, queueID, "InteractiveQueue").MaxReceiveCount; got != 7 {
			t.Errorf("MaxReceiveCount = %d, want 7", got)
		}
		if r := find(t, top.Rules, ruleID, "ReplayRule"); r.Bus != "other" || top.Buses[0].Name != "other" {
			t.Errorf("bus override not applied: rule bus %q, bus %q", r.Bus, top.Buses[0].Name)
		}
		if got := find(t, top.Functions, functionID, "NotifierFunction").Env["OPERATOR_LINE_IDS"]; !strings.HasPrefix(got, "U0123") || !strings.Contains(got, ",C0123") {
			t.Errorf("OPERATOR_LINE_IDS = %q", got)
		}
	})
	t.Run("added rule", func(t *testing.T) {
		extra := `  UnfollowRule:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: !Ref EventBus
      EventPattern:
        source: [!Ref EventSource]
        detail-type: [unfollow]
      Targets:
        - Id: audit
          Arn: !GetAtt BackgroundQueue.Arn
          RetryPolicy: {MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 120}

Outputs:`
		top, err := Load(rewrite(t, "\nOutputs:", "\n"+extra), required)
		if err != nil {
			t.Fatal(err)
		}
		r := find(t, top.Rules, ruleID, "UnfollowRule")
		if r.Name != "linegate-UnfollowRule" || r.Bus != "linegate-00000000-0000-0000-0000-000000000000" || r.BusLogicalID != "EventBus" {
			t.Errorf("rule naming: %+v", r)
		}
		if string(r.Pattern) != `{"detail-type":["unfollow"],"source":["line.webhook"]}` {
			t.Errorf("pattern = %s", r.Pattern)
		}
		want := Target{ID: "audit", QueueLogicalID: "BackgroundQueue", MaxRetryAttempts: 3, MaxEventAge: 2 * time.Minute}
		if len(r.Targets) != 1 || r.Targets[0] != want {
			t.Errorf("targets = %+v, want %+v", r.Targets, want)
		}
	})
	t.Run("previous secret condition", func(t *testing.T) {
		top := loadReal(t, map[string]string{"PreviousChannelSecretParameter": "/linegate/old"})
		if got := find(t, top.Functions, functionID, "WebhookFunction").Env["LINE_CHANNEL_SECRET_PREVIOUS_PARAM"]; got != "/linegate/old" {
			t.Errorf("previous secret env = %q", got)
		}
	})
}

func TestOptions(t *testing.T) {
	top := loadReal(t, nil,
		WithRegion("cn-north-1"), WithAccountID("123456789012"), WithStackName("demo"),
		WithQueueURL(func(name string) string { return "http://localhost:4566/123456789012/" + name }))
	q := find(t, top.Queues, queueID, "InteractiveQueue")
	if q.Name != "demo-InteractiveQueue.fifo" || q.ARN != "arn:aws-cn:sqs:cn-north-1:123456789012:demo-InteractiveQueue.fifo" ||
		q.URL != "http://localhost:4566/123456789012/demo-InteractiveQueue.fifo" {
		t.Errorf("queue = %+v", q)
	}
	if got := top.Outputs["WebhookUrl"]; got != "https://webhookapi.execute-api.cn-north-1.amazonaws.com.cn/prod/webhook" {
		t.Errorf("WebhookUrl = %q", got)
	}
	if got := top.Outputs["InteractiveQueueUrl"]; got != q.URL {
		t.Errorf("queue Ref = %q, want %q", got, q.URL)
	}
	a := find(t, top.Alarms, alarmID, "ReplayRuleFailedInvocationsAlarm")
	if a.Name != "demo-replay-rule-failed" || a.Dimensions["RuleName"] != find(t, top.Rules, ruleID, "ReplayRule").Name {
		t.Errorf("alarm = %+v", a)
	}
}

const miniTemplate = `AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Env: {Type: String, Default: prod}
  Ids: {Type: CommaDelimitedList, Default: "a,b,c"}
  Count: {Type: Number, Default: 3}
Mappings:
  Sizes:
    prod: {Size: large}
    "10": {V: 70}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  NotProd: !Not [!Condition IsProd]
  Both: !And [!Condition IsProd, !Equals [a, a]]
  Either: !Or [!Condition NotProd, !Equals [a, b]]
Resources:
  Q: {Type: AWS::SQS::Queue}
  Named: {Type: AWS::SQS::Queue, Properties: {QueueName: !Sub "${Env}-named"}}
  Fifo: {Type: AWS::SQS::Queue, Properties: {FifoQueue: true}}
  T: {Type: AWS::SNS::Topic}
  Bus: {Type: AWS::Events::EventBus, Properties: {Name: b1}}
  R: {Type: AWS::Events::Rule, Properties: {EventBusName: !Ref Bus, EventPattern: {source: [x]}}}
  DefaultRule: {Type: AWS::Events::Rule, Properties: {Name: dr, EventPattern: '{"source": ["y"]}'}}
  Tbl: {Type: AWS::DynamoDB::Table, Properties: {TableName: tbl}}
Outputs:
  O:
    Value: EXPR
`

func evalExpr(expr string) (string, error) {
	top, err := Parse([]byte(strings.Replace(miniTemplate, "EXPR", expr, 1)), nil)
	if err != nil {
		return "", err
	}
	return top.Outputs["O"], nil
}

func TestIntrinsics(t *testing.T) {
	tests := []struct{ name, expr, want string }{
		{"Ref parameter", "!Ref Env", "prod"},
		{"Ref long form", `{"Ref": "Env"}`, "prod"},
		{"Ref number parameter", "!Ref Count", "3"},
		{"Ref pseudo region", "!Ref AWS::Region", "us-east-1"},
		{"Ref pseudo account", "!Ref AWS::AccountId", "000000000000"},
		{"Ref pseudo partition", "!Ref AWS::Partition", "aws"},
		{"Ref pseudo stack", "!Ref AWS::StackName", "linegate"},
		{"Ref pseudo suffix", "!Ref AWS::URLSuffix", "amazonaws.com"},
		{"Ref queue is URL", "!Ref Q", "https://sqs.us-east-1.amazonaws.com/000000000000/linegate-Q"},
		{"Ref named queue", "!Ref Named", "https://sqs.us-east-1.amazonaws.com/000000000000/prod-named"},
		{"Ref topic is ARN", "!Ref T", "arn:aws:sns:us-east-1:000000000000:linegate-T"},
		{"Ref bus is name", "!Ref Bus", "b1"},
		{"Ref rule is name", "!Ref R", "linegate-R"},
		{"Ref table is name", "!Ref Tbl", "tbl"},
		{"GetAtt dotted", "!GetAtt Q.Arn", "arn:aws:sqs:us-east-1:000000000000:linegate-Q"},
		{"GetAtt list", "!GetAtt [Named, QueueName]", "prod-named"},
		{"GetAtt long form", `{"Fn::GetAtt": ["Q", "QueueUrl"]}`, "https://sqs.us-east-1.amazonaws.com/000000000000/linegate-Q"},
		{"GetAtt fifo name", "!GetAtt Fifo.QueueName", "linegate-Fifo.fifo"},
		{"GetAtt topic name", "!GetAtt T.TopicName", "linegate-T"},
		{"GetAtt bus arn", "!GetAtt Bus.Arn", "arn:aws:events:us-east-1:000000000000:event-bus/b1"},
		{"GetAtt rule arn custom bus", "!GetAtt R.Arn", "arn:aws:events:us-east-1:000000000000:rule/b1/linegate-R"},
		{"GetAtt rule arn default bus", "!GetAtt DefaultRule.Arn", "arn:aws:events:us-east-1:000000000000:rule/dr"},
		{"GetAtt table arn", "!GetAtt Tbl.Arn", "arn:aws:dynamodb:us-east-1:000000000000:table/tbl"},
		{"Sub string", `!Sub "${AWS::StackName}-${Env}/${Q.QueueName}"`, "linegate-prod/linegate-Q"},
		{"Sub literal", `!Sub "${!Literal}-${Env}"`, "${Literal}-prod"},
		{"Sub list with vars", `!Sub ["${a}-${Env}-${b}", {a: !Ref Count, b: !GetAtt T.TopicName}]`, "3-prod-linegate-T"},
		{"Sub no vars", `!Sub plain`, "plain"},
		{"Join", `!Join [",", [a, !Ref Env, 5]]`, "a,prod,5"},
		{"Join list parameter", `!Join ["+", !Ref Ids]`, "a+b+c"},
		{"Select", `!Select [1, [x, y, z]]`, "y"},
		{"Select string index", `!Select ["2", !Ref Ids]`, "c"},
		{"Split", `!Join ["|", !Split [",", "a,b,,c"]]`, "a|b||c"},
		{"If true", `!If [IsProd, yes, no]`, "yes"},
		{"If false", `!If [NotProd, yes, no]`, "no"},
		{"If And", `!If [Both, yes, no]`, "yes"},
		{"If Or", `!If [Either, yes, no]`, "no"},
		{"If NoValue in list", `!Join [",", [a, !If [NotProd, b, !Ref AWS::NoValue], c]]`, "a,c"},
		{"FindInMap", `!FindInMap [Sizes, !Ref Env, Size]`, "large"},
		{"FindInMap numeric key", `!FindInMap [Sizes, "10", V]`, "70"},
		{"Base64", `!Base64 hello`, "aGVsbG8="},
		{"GetAZs", `!Select [0, !GetAZs ""]`, "us-east-1a"},
		{"GetAZs region", `!Select [2, !GetAZs eu-west-1]`, "eu-west-1c"},
		{"Cidr", `!Join [",", !Cidr ["10.0.0.0/16", 3, 8]]`, "10.0.0.0/24,10.0.1.0/24,10.0.2.0/24"},
		{"Cidr ipv6", `!Join [",", !Cidr ["2001:db8::/56", 2, 64]]`, "2001:db8::/64,2001:db8:0:1::/64"},
		{"Equals via If", `!If [IsProd, !Sub "${Env}!", x]`, "prod!"},
		{"nested long forms", `{"Fn::Join": ["-", [{"Fn::Select": [0, {"Fn::Split": ["/", "a/b"]}]}, {"Fn::Base64": "x"}]]}`, "a-eA=="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evalExpr(tc.expr)
			if err != nil {
				t.Fatalf("%s: %v", tc.expr, err)
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func TestImportValue(t *testing.T) {
	src := strings.Replace(miniTemplate, "EXPR", "!ImportValue shared-vpc", 1)
	top, err := Parse([]byte(src), nil, WithImports(map[string]string{"shared-vpc": "vpc-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if top.Outputs["O"] != "vpc-1" {
		t.Errorf("ImportValue = %q", top.Outputs["O"])
	}
	if _, err := Parse([]byte(src), nil); !errors.Is(err, ErrUnknownRef) {
		t.Errorf("ImportValue without export: err = %v, want ErrUnknownRef", err)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		src      string // a full template, or an expression for miniTemplate
		params   map[string]string
		sentinel error
		contains string
	}{
		{"unsupported intrinsic", `{"Fn::Foo": [1]}`, nil, ErrUnsupported, "Outputs.O.Value: unsupported intrinsic Fn::Foo"},
		{"unsupported tag", `!Length [a]`, nil, ErrUnsupported, "tag !Length"},
		{"unknown Ref", `!Ref Nope`, nil, ErrUnknownRef, `Outputs.O.Value.Ref: unknown reference "Nope"`},
		{"unknown GetAtt resource", `!GetAtt Nope.Arn`, nil, ErrUnknownRef, `"Nope"`},
		{"unknown attribute", `!GetAtt Q.Bogus`, nil, ErrUnsupported, "attribute Q.Bogus of AWS::SQS::Queue"},
		{"bad GetAtt form", `!GetAtt NoDot`, nil, ErrSyntax, "Resource.Attribute"},
		{"unknown condition", `!If [Nope, a, b]`, nil, ErrUnknownRef, `condition "Nope"`},
		{"unknown mapping key", `!FindInMap [Sizes, dev, Size]`, nil, ErrUnknownRef, `key "dev"`},
		{"select out of range", `!Select [5, [a]]`, nil, ErrSyntax, "out of range"},
		{"split empty delimiter", `!Join ["", !Split ["", abc]]`, nil, ErrSyntax, "empty delimiter"},
		{"sub of a list", `!Sub "${Ids}"`, nil, ErrSyntax, "${Ids} is a list"},
		{"join wrong arity", `!Join [","]`, nil, ErrSyntax, "Fn::Join takes a list of [2] items"},
		{"output not a string", `[a, b]`, nil, ErrSyntax, "Outputs.O.Value: invalid template: want a string"},
		{"unknown override", `x`, map[string]string{"Nope": "1"}, ErrParameter, `undeclared parameter "Nope"`},
		{"yaml error", "Resources: [\n  - : :\n", nil, ErrSyntax, "yaml"},
		{"not a mapping", "- a\n- b\n", nil, ErrSyntax, "not a mapping"},
		{"no resources", "Parameters: {}\n", nil, ErrSyntax, "at least one resource"},
		{"duplicate key", "Resources:\n  A: {Type: AWS::SNS::Topic}\n  A: {Type: AWS::SNS::Topic}\n", nil, ErrSyntax, `duplicate key "A"`},
		{"missing type", "Resources:\n  A: {Properties: {}}\n", nil, ErrSyntax, "Resources.A.Type"},
		{"other transform", "Transform: AWS::LanguageExtensions\nResources:\n  A: {Type: AWS::SNS::Topic}\n", nil, ErrUnsupported, "transform AWS::LanguageExtensions"},
		{"missing parameter value", "Parameters:\n  P: {Type: String}\nResources:\n  A: {Type: AWS::SNS::Topic, Properties: {TopicName: !Ref P}}\n", nil, ErrParameter, `parameter "P" has no Default`},
		{"allowed values", "Parameters:\n  P: {Type: String, Default: a, AllowedValues: [a, b]}\nResources:\n  A: {Type: AWS::SNS::Topic}\n", map[string]string{"P": "c"}, ErrParameter, "AllowedValues"},
		{"allowed pattern", "Parameters:\n  P: {Type: String, Default: a, AllowedPattern: '[a-z]+'}\nResources:\n  A: {Type: AWS::SNS::Topic}\n", map[string]string{"P": "A1"}, ErrParameter, "AllowedPattern"},
		{"min value", "Parameters:\n  P: {Type: Number, Default: 5, MinValue: 2}\nResources:\n  A: {Type: AWS::SNS::Topic}\n", map[string]string{"P": "1"}, ErrParameter, "MinValue"},
		{"not a number", "Parameters:\n  P: {Type: Number, Default: 5}\nResources:\n  A: {Type: AWS::SNS::Topic}\n", map[string]string{"P": "x"}, ErrParameter, "not a number"},
		{"condition cycle", "Conditions:\n  A: !Condition B\n  B: !Not [!Condition A]\nResources:\n  T: {Type: AWS::SNS::Topic, Condition: A}\n", nil, ErrSyntax, "depends on itself"},
		{"name cycle", "Resources:\n  T: {Type: AWS::SNS::Topic, Properties: {TopicName: !GetAtt T.TopicName}}\n", nil, ErrSyntax, "depends on itself"},
		{"ref to disabled resource", "Conditions:\n  No: !Equals [a, b]\nResources:\n  T: {Type: AWS::SNS::Topic, Condition: No}\n  U: {Type: AWS::SNS::Topic, Properties: {DisplayName: !Ref T}}\n", nil, ErrUnknownRef, `condition "No" is false`},
		{"bad redrive target", "Resources:\n  Q: {Type: AWS::SQS::Queue, Properties: {RedrivePolicy: {deadLetterTargetArn: arn:aws:sqs:x:1:elsewhere, maxReceiveCount: 3}}}\n", nil, ErrSyntax, "Resources.Q.Properties.RedrivePolicy.deadLetterTargetArn"},
		{"bad rule target", "Resources:\n  R: {Type: AWS::Events::Rule, Properties: {EventPattern: {source: [a]}, Targets: [{Id: x, Arn: arn:aws:lambda:x:1:function:f}]}}\n", nil, ErrSyntax, "Resources.R.Properties.Targets[0].Arn"},
		{"subscription of another protocol", "Resources:\n  T: {Type: AWS::SNS::Topic}\n  S: {Type: AWS::SNS::Subscription, Properties: {TopicArn: !Ref T, Protocol: sms, Endpoint: '+81'}}\n", nil, ErrUnsupported, `Resources.S.Properties.Protocol: unsupported protocol "sms"`},
		{"email subscription without an address", "Resources:\n  T: {Type: AWS::SNS::Topic}\n  S: {Type: AWS::SNS::Subscription, Properties: {TopicArn: !Ref T, Protocol: email, Endpoint: ops}}\n", nil, ErrSyntax, `"ops" is not an email address`},
		{"subscription to a queue elsewhere", "Resources:\n  T: {Type: AWS::SNS::Topic}\n  S: {Type: AWS::SNS::Subscription, Properties: {TopicArn: !Ref T, Protocol: sqs, Endpoint: arn:aws:sqs:x:1:elsewhere}}\n", nil, ErrSyntax, "Resources.S.Properties.Endpoint"},
		{"subscription of a topic elsewhere", "Resources:\n  Q: {Type: AWS::SQS::Queue}\n  S: {Type: AWS::SNS::Subscription, Properties: {TopicArn: arn:aws:sns:x:1:elsewhere, Protocol: sqs, Endpoint: !GetAtt Q.Arn}}\n", nil, ErrSyntax, "Resources.S.Properties.TopicArn"},
		{"unsupported event type", "Transform: AWS::Serverless-2016-10-31\nResources:\n  F: {Type: AWS::Serverless::Function, Properties: {Events: {Tick: {Type: Kinesis, Properties: {Stream: s}}}}}\n", nil, ErrUnsupported, `Resources.F.Properties.Events.Tick.Type: unsupported event type "Kinesis"`},
		{"globals without SAM", "Globals: {Function: {Timeout: 3}}\nResources:\n  A: {Type: AWS::SNS::Topic}\n", nil, ErrSyntax, "Globals"},
		{"merge key", "Resources:\n  A: &a {Type: AWS::SNS::Topic}\n  B:\n    <<: *a\n", nil, ErrSyntax, "merge keys"},
		{"alias bomb", aliasBomb(), nil, ErrSyntax, "more than"},
		{"rule bus cycle", "Resources:\n  R: {Type: AWS::Events::Rule, Properties: {EventBusName: !GetAtt R.Arn}}\n", nil, ErrSyntax, "Resources.R.Properties.EventBusName: invalid template: depends on itself"},
		{"endless reference chain", refChain(2100), nil, ErrSyntax, "nest deeper than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if !strings.Contains(src, "\n") {
				src = strings.Replace(miniTemplate, "EXPR", src, 1)
			}
			_, err := Parse([]byte(src), tc.params)
			if err == nil {
				t.Fatalf("Parse succeeded, want %v", tc.sentinel)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("err = %q, want it to contain %q", err, tc.contains)
			}
		})
	}
}

// aliasBomb is a "billion laughs" document: each level doubles ten times.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + strconv.Itoa(i-1))
		}
		b.WriteString("]\n")
	}
	b.WriteString("Resources:\n  A: {Type: AWS::SNS::Topic}\n")
	return b.String()
}

// refChain is n queues, each named after the next one.
func refChain(n int) string {
	var b strings.Builder
	b.WriteString("Resources:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  Q%d: {Type: AWS::SQS::Queue, Properties: {QueueName: !GetAtt Q%d.QueueName}}\n", i, i+1)
	}
	fmt.Fprintf(&b, "  Q%d: {Type: AWS::SQS::Queue}\n", n)
	return b.String()
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func TestGlobalsMerge(t *testing.T) {
	src := `Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Timeout: 9
    MemorySize: 512
    Environment: {Variables: {A: global, B: global}}
Resources:
  Q: {Type: AWS::SQS::Queue}
  F:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://bucket/key
      MemorySize: 1024
      Environment: {Variables: {B: local, Q: !Ref Q}}
      Events:
        Work: {Type: SQS, Properties: {Queue: !GetAtt Q.Arn}}
        Off: {Type: SQS, Properties: {Queue: !GetAtt Q.Arn, Enabled: false}}
  G: {Type: AWS::Serverless::Function, Properties: {CodeUri: {Bucket: b, Key: k}}}
`
	top, err := Parse([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := find(t, top.Functions, functionID, "F")
	if f.Timeout != 9*time.Second || f.MemorySize != 1024 || f.CodeURI != "s3://bucket/key" {
		t.Errorf("function = %+v", f)
	}
	if f.Env["A"] != "global" || f.Env["B"] != "local" || f.Env["Q"] != top.Queues[0].URL {
		t.Errorf("env = %v", f.Env)
	}
	want := SQSMapping{Name: "Work", Queue: "Q", BatchSize: 10}
	if len(f.SQSEvents) != 1 || f.SQSEvents[0] != want {
		t.Errorf("SQS events = %+v, want [%+v] (disabled mapping left out)", f.SQSEvents, want)
	}
	g := find(t, top.Functions, functionID, "G")
	if g.CodeURI != "" || g.Timeout != 9*time.Second || g.MaxAsyncRetries != 2 {
		t.Errorf("G = %+v", g)
	}
}
