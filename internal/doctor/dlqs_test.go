package doctor

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/stack"
	"github.com/linegate/linegate/internal/template"
)

// extraDLQ is what someone adds to the template: a queue with a dead-letter
// queue of its own.
const extraDLQ = `
  AuditQueue:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt AuditDLQ.Arn
        maxReceiveCount: 3

  AuditDLQ:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 1209600

`

// deployed is the stack CloudFormation would make of a template: its
// resources, and SQS and EventBridge answering with the template's
// redrive policies and rule targets.
func deployed(t *testing.T, src string) (Stack, []string) {
	t.Helper()
	top, err := template.Parse([]byte(src), map[string]string{"OperatorLineIds": "U0000000000000000000000000000cafe"})
	if err != nil {
		t.Fatal(err)
	}
	info := &stack.Stack{Name: top.StackName, Resources: map[string]stack.Resource{}, Outputs: map[string]string{}}
	queues, rules := fakeQueues{}, fakeRules{}
	arn := map[string]string{}
	for _, q := range top.Queues {
		arn[q.LogicalID] = q.ARN
	}
	want := map[string]bool{}
	for _, q := range top.Queues {
		info.Resources[q.LogicalID] = stack.Resource{Type: "AWS::SQS::Queue", PhysicalID: q.URL}
		fq := fakeQueue{arn: q.ARN, depth: "0"}
		if q.RedriveTarget != "" {
			b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": arn[q.RedriveTarget], "maxReceiveCount": q.MaxReceiveCount})
			fq.redrive = string(b)
			want[q.RedriveTarget] = true
		}
		queues[q.URL] = fq
	}
	for _, r := range top.Rules {
		info.Resources[r.LogicalID] = stack.Resource{Type: "AWS::Events::Rule", PhysicalID: r.Bus + "|" + r.Name}
		for _, tg := range r.Targets {
			et := ebtypes.Target{Id: aws.String(tg.ID), Arn: aws.String(arn[tg.QueueLogicalID])}
			if tg.DLQLogicalID != "" {
				et.DeadLetterConfig = &ebtypes.DeadLetterConfig{Arn: aws.String(arn[tg.DLQLogicalID])}
				want[tg.DLQLogicalID] = true
			}
			rules[r.Bus+"|"+r.Name] = append(rules[r.Bus+"|"+r.Name], et)
		}
	}
	var names []string
	for id := range want {
		names = append(names, id)
	}
	slices.Sort(names)
	return Stack{Info: info, SQS: queues, Events: rules}, names
}

// doctor checks every DLQ the stack has, found from the redrive policies
// and the rule targets' dead-letter configs: the template's own (LongDLQ
// included, which a hand-written list missed) and one someone adds.
func TestDLQsComeFromTheStack(t *testing.T) {
	data, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "  # ---------------------------------------------------------------- worker\n"
	if strings.Count(string(data), anchor) != 1 {
		t.Fatalf("the template has no single %q to add a DLQ before", anchor)
	}
	tests := []struct {
		name, src string
		must      []string
	}{
		{"the template", string(data), []string{"InteractiveDLQ", "LongDLQ", "BackgroundDLQ", "RuleTargetDLQ", "NotifierFailureQueue"}},
		{"a DLQ added to the template", strings.Replace(string(data), anchor, extraDLQ+anchor, 1), []string{"AuditDLQ", "LongDLQ"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, want := deployed(t, tt.src)
			qs, err := s.DLQs(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, q := range qs {
				id, _ := strings.CutPrefix(q.Redrive, "linegate redrive --stack linegate --queue ")
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("doctor checks %v, the stack's DLQs are %v", got, want)
			}
			for _, m := range tt.must {
				if !slices.Contains(got, m) {
					t.Errorf("%s is not checked", m)
				}
			}
		})
	}
}

// A DLQ that a redrive policy names but the stack does not hold (deleted
// by hand) is an error, not a queue silently skipped.
func TestDLQOutsideTheStack(t *testing.T) {
	data, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := deployed(t, string(data))
	delete(s.Info.Resources, "LongDLQ")
	if _, err := s.DLQs(context.Background()); err == nil || !strings.Contains(err.Error(), "LongDLQ") {
		t.Fatalf("err %v, want the missing DLQ named", err)
	}
}
