package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/stack"
)

// devStack is a plain CloudFormation stack with the resources the CLI
// resolves: a work queue and its redrive-policy DLQ, a rule target's DLQ,
// the bus, and a sink queue standing in for the interactive queue.
const devStack = `{
  "Parameters": {"ChannelSecretParameter": {"Type": "String", "Default": "/dev/channel-secret"}},
  "Resources": {
    "InteractiveDLQ": {"Type": "AWS::SQS::Queue"},
    "InteractiveQueue": {"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["InteractiveDLQ", "Arn"]}, "maxReceiveCount": 5}}},
    "RuleTargetDLQ": {"Type": "AWS::SQS::Queue"},
    "EventBus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": "dev-bus-1234"}}
  }
}`

// createStack creates devStack on moto and waits for it.
func createStack(t *testing.T, ep string) {
	t.Helper()
	ctx := context.Background()
	cf := cloudformation.NewFromConfig(motoserver.Config(ep))
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("dev"), TemplateBody: aws.String(devStack)}); err != nil {
		t.Fatalf("create stack: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("dev")})
		if err == nil && len(out.Stacks) == 1 && out.Stacks[0].StackStatus == "CREATE_COMPLETE" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack not created within 15 s: %+v %v", out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStackLookupOnMoto resolves logical ids through CloudFormation: a queue
// is its URL (with CloudFormation's generated name), the bus its name, and an
// unknown logical id is ErrNoResource naming what the stack has.
func TestStackLookupOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	createStack(t, ep)
	st, err := stack.Describe(context.Background(), cloudformation.NewFromConfig(motoserver.Config(ep)), "dev")
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := st.Physical("InteractiveDLQ")
	if err != nil || dlq.Type != "AWS::SQS::Queue" || !strings.HasPrefix(dlq.PhysicalID, "http") || !strings.Contains(dlq.PhysicalID, "InteractiveDLQ") {
		t.Errorf("InteractiveDLQ = %+v, %v; want its queue URL", dlq, err)
	}
	// AWS's physical id of a bus is its name; moto 5 leaves it empty.
	if bus, err := st.Physical("EventBus"); err != nil || bus.Type != "AWS::Events::EventBus" {
		t.Errorf("EventBus = %+v, %v", bus, err)
	} else if bus.PhysicalID != "dev-bus-1234" {
		t.Logf("DIVERGENCE (moto differs from AWS): the bus's physical id is %q, AWS's is its name", bus.PhysicalID)
	}
	if st.Parameters["ChannelSecretParameter"] != "/dev/channel-secret" {
		t.Errorf("parameters = %v", st.Parameters)
	}
	if _, err := st.Physical("Nope"); err == nil || !strings.Contains(err.Error(), "RuleTargetDLQ") {
		t.Errorf("unknown logical id: %v; want ErrNoResource listing the stack's resources", err)
	}
}

// TestRedriveRuleTargetDLQOnMoto redrives a rule target's DLQ named by
// logical id through the stack: EventBridge's dead letters (the event as
// the body, RULE_ARN naming the rule and so the bus) go back onto the bus,
// whose rule delivers them again, and leave the DLQ.
func TestRedriveRuleTargetDLQOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	createStack(t, ep)
	ctx := context.Background()
	cfg := motoserver.Config(ep)
	st, err := stack.Describe(ctx, cloudformation.NewFromConfig(cfg), "dev")
	if err != nil {
		t.Fatal(err)
	}
	q := sqs.NewFromConfig(cfg)
	eb := eventbridge.NewFromConfig(cfg)
	sink := st.Resources["InteractiveQueue"].PhysicalID
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(sink), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("interactive"), EventBusName: aws.String("dev-bus-1234"), EventPattern: aws.String(`{"source":["line.webhook"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("interactive"), EventBusName: aws.String("dev-bus-1234"),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}
	dlq := st.Resources["RuleTargetDLQ"].PhysicalID
	for i := range 3 {
		body := `{"version":"0","id":"e` + string(rune('0'+i)) + `","detail-type":"message","source":"line.webhook","account":"123456789012","time":"2026-11-29T08:00:00Z","region":"us-east-1","resources":[],"detail":{"event":{"webhookEventId":"W` + string(rune('0'+i)) + `"}}}`
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(body), MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"RULE_ARN":   {DataType: aws.String("String"), StringValue: aws.String("arn:aws:events:us-east-1:123456789012:rule/dev-bus-1234/interactive")},
			"ERROR_CODE": {DataType: aws.String("String"), StringValue: aws.String("SQS.AccessDenied")},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI("redrive", "--stack", "dev", "--queue", "RuleTargetDLQ", "--endpoint-url", ep)
	if code != 0 || !strings.Contains(out, "3 event(s) put back") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	got := map[string]bool{}
	for range 10 {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(sink), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			var ev struct {
				Detail struct {
					Event struct{ WebhookEventID string }
				}
			}
			_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &ev)
			got[ev.Detail.Event.WebhookEventID] = true
		}
		if len(got) == 3 {
			break
		}
	}
	if len(got) != 3 {
		t.Errorf("the bus delivered %v again, want W0, W1, W2", got)
	}
	left, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	if left.Attributes["ApproximateNumberOfMessages"] != "0" || left.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("the DLQ still holds messages: %v", left.Attributes)
	}
}

// TestEnvJSONOnMoto writes the env file of a deployed stack: Ref variables
// become the stack's physical ids and parameter values, and
// AWS_ENDPOINT_URL is emptied so the SDK calls AWS.
func TestEnvJSONOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	createStack(t, ep)
	tpl := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(tpl, []byte(`Globals:
  Function:
    Environment:
      Variables:
        AWS_ENDPOINT_URL: ""
Resources:
  EventBus: {Type: AWS::Events::EventBus}
  WebhookFunction:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          EVENT_BUS_NAME: !Ref EventBus
          LINE_CHANNEL_SECRET_PARAM: !Ref ChannelSecretParameter
          DLQ: !Ref RuleTargetDLQ
          PLAIN: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "env.dev.json")
	if code, stdout, stderr := runCLI("env-json", "--stack", "dev", "--template", tpl, "--out", out, "--endpoint-url", ep); code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]map[string]string
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	w := env["WebhookFunction"]
	if w["LINE_CHANNEL_SECRET_PARAM"] != "/dev/channel-secret" || !strings.Contains(w["DLQ"], "RuleTargetDLQ") ||
		w["AWS_ENDPOINT_URL"] != "" || len(w) != 4 {
		t.Errorf("WebhookFunction = %v", w)
	}
	if _, ok := w["EVENT_BUS_NAME"]; !ok {
		t.Errorf("EVENT_BUS_NAME (a Ref to the bus) is missing: %v", w) // its value is moto's empty physical id
	}
}
