package stack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/linegate/linegate/internal/config"
)

// stacks is CloudFormation with a few stacks, each with one queue.
type stacks map[string]cftypes.Stack

func (s stacks) DescribeStackResources(_ context.Context, in *cloudformation.DescribeStackResourcesInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStackResourcesOutput, error) {
	if _, ok := s[aws.ToString(in.StackName)]; !ok {
		return nil, errors.New("Stack with id " + aws.ToString(in.StackName) + " does not exist")
	}
	return &cloudformation.DescribeStackResourcesOutput{StackResources: []cftypes.StackResource{{
		LogicalResourceId: aws.String("InteractiveDLQ"), ResourceType: aws.String("AWS::SQS::Queue"),
		PhysicalResourceId: aws.String("https://sqs/1/linegate-InteractiveDLQ-X.fifo")}}}, nil
}

func (s stacks) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	st, ok := s[aws.ToString(in.StackName)]
	if !ok {
		return nil, errors.New("Stack with id " + aws.ToString(in.StackName) + " does not exist")
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cftypes.Stack{st}}, nil
}

// The stack's resources are found by logical id, its outputs name queues and
// its parameters say how the functions get their token; a missing output or
// resource names itself.
func TestDescribe(t *testing.T) {
	cf := stacks{"linegate": {
		Outputs: []cftypes.Output{{OutputKey: aws.String("HeldQueueUrl"), OutputValue: aws.String("https://sqs/1/held")}},
		Parameters: []cftypes.Parameter{
			{ParameterKey: aws.String("ChannelAccessTokenMode"), ParameterValue: aws.String("stateless")},
			{ParameterKey: aws.String("ChannelId"), ParameterValue: aws.String("123")},
			{ParameterKey: aws.String("ChannelSecretParameter"), ParameterValue: aws.String("/linegate/channel-secret")},
		},
	}}
	s, err := Describe(context.Background(), cf, "linegate")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Physical("InteractiveDLQ"); err != nil || r.PhysicalID != "https://sqs/1/linegate-InteractiveDLQ-X.fifo" {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := s.Physical("LongDLQ"); !errors.Is(err, ErrNoResource) || !strings.Contains(err.Error(), "InteractiveDLQ") {
		t.Fatalf("missing resource: %v", err)
	}
	if u, err := s.Output("HeldQueueUrl"); err != nil || u != "https://sqs/1/held" {
		t.Fatalf("%q %v", u, err)
	}
	if _, err := s.Output("WebhookUrl"); err == nil || !strings.Contains(err.Error(), "no WebhookUrl output") {
		t.Fatalf("missing output: %v", err)
	}
	a := s.LineAuth()
	if a.Mode != config.TokenStateless || a.ChannelID != "123" || a.ChannelSecret.Param != "/linegate/channel-secret" || a.APIBaseURL != "https://api.line.me" {
		t.Fatalf("auth %+v", a)
	}
	if _, err := Describe(context.Background(), cf, "other"); err == nil {
		t.Fatal("an unknown stack opened")
	}
	empty, _ := Describe(context.Background(), stacks{"old": {}}, "old")
	if empty.LineAuth().Mode != config.TokenLongLived {
		t.Fatal("a stack without the parameter is long-lived")
	}
}
