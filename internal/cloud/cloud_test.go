package cloud_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/cloud"
)

// The real SDK clients satisfy the ports unchanged.
var (
	_ cloud.EventBus   = (*eventbridge.Client)(nil)
	_ cloud.EventAdmin = (*eventbridge.Client)(nil)
	_ cloud.Queues     = (*sqs.Client)(nil)
	_ cloud.Topics     = (*sns.Client)(nil)
)

func TestNewAWSBuildsEveryPort(t *testing.T) {
	c := cloud.NewAWS(aws.Config{Region: "us-east-1"})
	if _, ok := c.Bus.(*eventbridge.Client); !ok {
		t.Errorf("Bus = %T, want *eventbridge.Client", c.Bus)
	}
	if any(c.Admin) != any(c.Bus) {
		t.Errorf("Admin and Bus should share one EventBridge client")
	}
	if _, ok := c.Queues.(*sqs.Client); !ok {
		t.Errorf("Queues = %T, want *sqs.Client", c.Queues)
	}
	if _, ok := c.Topics.(*sns.Client); !ok {
		t.Errorf("Topics = %T, want *sns.Client", c.Topics)
	}
}
