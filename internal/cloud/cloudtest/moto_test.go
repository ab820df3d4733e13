package cloudtest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud"
	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/motoserver"
)

// motoDivergences are the cases where moto_server departs from AWS's
// documented behaviour; AWS wins, so they are skipped for moto only.
var motoDivergences = []cloudtest.Divergence{
	{Case: "SQS/MoveTaskBackToSource", Reason: "moto 5.x does not implement StartMessageMoveTask/ListMessageMoveTasks (HTTP 500); AWS redrives a DLQ back to its source queues"},
	{Case: "SQS/FIFOGroupExclusiveWithConcurrentConsumers", Reason: "moto hands a FIFO group's next messages to concurrent long-polling consumers while one of the group is in flight (its group check is not atomic across requests); AWS never returns a group's message while another is in flight"},
	{Case: "SQS/FIFOSequenceNumbersIncrease", Reason: "moto gives FIFO messages random SequenceNumbers; AWS documents that a group's sequence numbers only increase"},
	{Case: "EventBridge/DeliveredEventShape", Reason: "moto omits the \"account\" field from the event it delivers to targets; AWS events always carry account"},
	{Case: "EventBridge/DisabledRuleDoesNotDeliver", Reason: "moto delivers events to the targets of DISABLED rules; AWS documents that a disabled rule matches nothing"},
	{Case: "EventBridge/PutEventsDetailMustBeObject", Reason: "moto accepts a Detail that is valid JSON but not an object; AWS answers MalformedDetail"},
	{Case: "EventBridge/PutEventsOverSizeLimitFails", Reason: "moto has no PutEvents size limit; AWS rejects requests whose total entry size exceeds 1 MB"},
	{Case: "EventBridge/TraceHeaderBecomesAWSTraceHeader", Reason: "moto drops the entry's TraceHeader; AWS passes it to SQS targets as the AWSTraceHeader system attribute"},
	{Case: "Pattern/array_of_objects", Reason: "moto's matcher does not descend into arrays of objects; EventBridge (event-ruler) flattens them so each element's fields match"},
	{Case: "PatternInvalid/not_object", Reason: "moto fails with HTTP 500 on a pattern that is a JSON array; AWS answers InvalidEventPatternException"},
	{Case: "PatternInvalid/empty_pattern", Reason: "moto accepts {} as a pattern; AWS rejects an empty pattern"},
	{Case: "PatternInvalid/unknown_operator", Reason: "moto accepts unknown filter operators; AWS rejects them"},
	{Case: "PatternInvalid/numeric_bad_operator", Reason: "moto does not validate numeric filters; AWS rejects unknown comparison operators"},
	{Case: "PatternInvalid/numeric_not_number", Reason: "moto does not validate numeric filters; AWS rejects non-numeric bounds"},
	{Case: "PatternInvalid/numeric_odd_length", Reason: "moto does not validate numeric filters; AWS rejects an operator without a value"},
	{Case: "PatternInvalid/numeric_two_lower_bounds", Reason: "moto does not validate numeric filters; AWS rejects two lower bounds"},
	{Case: "PatternInvalid/exists_not_boolean", Reason: "moto does not validate exists; AWS requires true or false"},
	{Case: "PatternInvalid/prefix_not_string", Reason: "moto does not validate prefix; AWS requires a string"},
	{Case: "PatternInvalid/cidr_bad", Reason: "moto does not validate CIDR blocks at PutRule; AWS rejects them"},
	{Case: "PatternInvalid/wildcard_consecutive", Reason: "moto does not validate wildcards; AWS rejects consecutive wildcard characters"},
	{Case: "PatternInvalid/anything_but_mixed_list", Reason: "moto does not validate anything-but lists; AWS requires only strings or only numbers"},
}

func TestConformanceMoto(t *testing.T) {
	ep := motoserver.Start(t)
	cfg := motoserver.Config(ep)
	cloudtest.Run(t, cloudtest.Harness{
		Name: "moto",
		New: func(t *testing.T) cloudtest.Backend {
			if err := motoserver.Reset(context.Background(), ep); err != nil {
				t.Fatalf("reset moto: %v", err)
			}
			c := cloud.NewAWS(cfg)
			return cloudtest.Backend{SQS: c.SQS, EventBridge: c.EventBridge, SNS: c.SNS}
		},
		Divergences: motoDivergences,
	})
}

// TestMD5OfMessageAttributesAgreesWithMoto cross-checks mem's implementation
// of SQS's attribute digest against moto's (which the real SDK accepts).
func TestMD5OfMessageAttributesAgreesWithMoto(t *testing.T) {
	ep := motoserver.Start(t)
	ctx := context.Background()
	attrs := map[string]sqstypes.MessageAttributeValue{
		"color":      {DataType: aws.String("String"), StringValue: aws.String("blue")},
		"count":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":       {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		"color.hint": {DataType: aws.String("String.custom"), StringValue: aws.String("日本")},
	}
	trace := map[string]sqstypes.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793")}}
	digests := func(q cloudtest.SQS) (string, string) {
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("md5")})
		if err != nil {
			t.Fatal(err)
		}
		sent, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("b"), MessageAttributes: attrs, MessageSystemAttributes: trace})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(sent.MD5OfMessageAttributes), aws.ToString(sent.MD5OfMessageSystemAttributes)
	}
	m := mem.New()
	defer m.Close()
	memAttrs, memSys := digests(m)
	motoAttrs, motoSys := digests(cloud.NewAWS(motoserver.Config(ep)).SQS)
	if memAttrs != motoAttrs || memAttrs == "" {
		t.Errorf("MD5OfMessageAttributes: mem %q, moto %q", memAttrs, motoAttrs)
	}
	// moto does not return MD5OfMessageSystemAttributes; mem computes it
	// with the same algorithm, so only check it is there.
	if memSys == "" || motoSys != "" && motoSys != memSys {
		t.Errorf("MD5OfMessageSystemAttributes: mem %q, moto %q", memSys, motoSys)
	}
}
