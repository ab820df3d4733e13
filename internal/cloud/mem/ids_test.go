package mem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
)

// The character range of SQS's ids, at its edges. MessageGroupId and
// MessageDeduplicationId: "up to 128 characters … alphanumeric characters
// and punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)"
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html),
// so '!' (0x21) and '~' (0x7e) pass and ' ' (0x20), DEL (0x7f) and any
// non-ASCII letter do not. A batch entry's Id: "alphanumeric characters,
// hyphens and underscores … up to 80"
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatchRequestEntry.html).
func TestSQSIdCharacterRange(t *testing.T) {
	c, _ := newCloud(t)
	url, _ := createQueue(t, c, "ids.fifo", map[string]string{"FifoQueue": "true"})
	ctx := context.Background()
	ids := []struct {
		name, id string
		ok       bool
	}{
		{"'!', the first punctuation", "a!", true},
		{"'~', the last punctuation", "~a", true},
		{"every punctuation character", `!"#$%&'()*+,-./:;<=>?@[\]^_` + "`{|}~", true},
		{"letters and digits", "azAZ09", true},
		{"128 characters", strings.Repeat("g", 128), true},
		{"129 characters", strings.Repeat("g", 129), false},
		{"a space (0x20)", "a b", false},
		{"DEL (0x7f)", "a\x7f", false},
		{"a tab", "a\tb", false},
		{"a non-ASCII letter", "é", false},
		{"a NUL", "a\x00", false},
	}
	for _, tt := range ids {
		t.Run("MessageGroupId: "+tt.name, func(t *testing.T) {
			_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"),
				MessageGroupId: aws.String(tt.id), MessageDeduplicationId: aws.String("d-" + tt.name[:1])})
			if (err == nil) != tt.ok || (err != nil && cloudtest.ErrorCode(err) != "InvalidParameterValue") {
				t.Fatalf("MessageGroupId %q: %v; want accepted=%v (else InvalidParameterValue)", tt.id, err, tt.ok)
			}
		})
		t.Run("MessageDeduplicationId: "+tt.name, func(t *testing.T) {
			_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"),
				MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(tt.id)})
			if (err == nil) != tt.ok || (err != nil && cloudtest.ErrorCode(err) != "InvalidParameterValue") {
				t.Fatalf("MessageDeduplicationId %q: %v; want accepted=%v (else InvalidParameterValue)", tt.id, err, tt.ok)
			}
		})
	}

	batchIDs := []struct {
		name, id string
		ok       bool
	}{
		{"letters, digits, '-' and '_'", "aZ09-_", true},
		{"80 characters", strings.Repeat("b", 80), true},
		{"81 characters", strings.Repeat("b", 81), false},
		{"'!' (punctuation other than - and _)", "a!", false},
		{"'.'", "a.b", false},
		{"'/' (the character before '0')", "a/", false},
		{"':' (the character after '9')", "a:", false},
		{"'@' (the character before 'A')", "@a", false},
		{"'[' (the character after 'Z')", "Z[", false},
		{"'`' (the character before 'a')", "`a", false},
		{"'{' (the character after 'z')", "z{", false},
		{"empty", "", false},
		{"a non-ASCII letter", "é", false},
	}
	for _, tt := range batchIDs {
		t.Run("batch entry Id: "+tt.name, func(t *testing.T) {
			_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{
				{Id: aws.String(tt.id), MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("b")}}})
			if (err == nil) != tt.ok || (err != nil && cloudtest.ErrorCode(err) != "AWS.SimpleQueueService.InvalidBatchEntryId") {
				t.Fatalf("batch entry Id %q: %v (code %q); want accepted=%v (else AWS.SimpleQueueService.InvalidBatchEntryId)", tt.id, err, cloudtest.ErrorCode(err), tt.ok)
			}
		})
	}
}
