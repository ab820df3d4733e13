// Package cloud builds the real aws-sdk-go-v2 clients the laptop world uses
// against AWS or any AWS-compatible endpoint (moto_server, LocalStack).
//
// It declares no interfaces. Each consumer declares the narrow interface of
// the calls it makes — the local runtime's event source poller, alarm
// evaluator, redrive shim and provisioning, and the conformance suite
// (cloud/cloudtest) — as the Lambda world's packages do; these clients and
// the in-memory cloud (cloud/mem) satisfy every one of them unchanged.
package cloud

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Clients are the real clients of one configuration, one per service.
type Clients struct {
	EventBridge *eventbridge.Client
	SQS         *sqs.Client
	SNS         *sns.Client
}

// NewAWS builds the real clients from cfg. Point cfg at any AWS-compatible
// endpoint with cfg.BaseEndpoint.
func NewAWS(cfg aws.Config) Clients {
	return Clients{
		EventBridge: eventbridge.NewFromConfig(cfg),
		SQS:         sqs.NewFromConfig(cfg),
		SNS:         sns.NewFromConfig(cfg),
	}
}
