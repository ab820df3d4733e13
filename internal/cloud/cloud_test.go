package cloud_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/cloud"
)

func TestNewAWSBuildsEveryClient(t *testing.T) {
	c := cloud.NewAWS(aws.Config{Region: "us-east-1"})
	if c.EventBridge == nil || c.SQS == nil || c.SNS == nil {
		t.Fatalf("NewAWS = %+v, want a client for each service", c)
	}
	if got := c.SQS.Options().Region; got != "us-east-1" {
		t.Errorf("SQS region = %q, want the configuration's", got)
	}
}
