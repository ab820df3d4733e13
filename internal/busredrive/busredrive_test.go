package busredrive

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/redrive"
)

// fakeDLQ hands out its messages once each (as a visibility timeout would
// hide them) and records deletions.
type fakeDLQ struct {
	msgs    []types.Message
	given   int
	deleted []string
}

func (f *fakeDLQ) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	end := min(f.given+int(in.MaxNumberOfMessages), len(f.msgs))
	out := f.msgs[f.given:end]
	f.given = end
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeDLQ) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

// fakeBus refuses the entries whose index is in refuse, or fails the call.
type fakeBus struct {
	refuse map[int]bool
	fail   error
	got    []ebtypes.PutEventsRequestEntry
}

func (b *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if b.fail != nil {
		return nil, b.fail
	}
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		i := len(b.got)
		b.got = append(b.got, e)
		if b.refuse[i] {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("InternalFailure")})
			out.FailedEntryCount++
		} else {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("id" + strconv.Itoa(i))})
		}
	}
	return out, nil
}

func deadLetter(i int, rule string) types.Message {
	m := types.Message{MessageId: aws.String("m" + strconv.Itoa(i)), ReceiptHandle: aws.String("h" + strconv.Itoa(i)),
		Body: aws.String(`{"version":"0","detail-type":"message","source":"line.webhook","time":"2026-11-29T08:00:00Z","resources":[],"detail":{"n":` + strconv.Itoa(i) + `}}`)}
	if rule != "" {
		m.MessageAttributes = map[string]types.MessageAttributeValue{AttrRuleARN: {DataType: aws.String("String"), StringValue: aws.String(rule)}}
	}
	return m
}

// TestEventsAtLeastOnce: a message is deleted only after the bus accepted
// its event; refused events, failed calls and foreign messages stay.
func TestEventsAtLeastOnce(t *testing.T) {
	const rule = "arn:aws:events:us-east-1:123456789012:rule/linegate-abc/interactive"
	for _, tc := range []struct {
		name        string
		msgs        []types.Message
		bus         *fakeBus
		wantDeleted int
		wantErr     error
	}{
		{"all accepted", []types.Message{deadLetter(0, rule), deadLetter(1, rule), deadLetter(2, rule)}, &fakeBus{}, 3, nil},
		{"one refused", []types.Message{deadLetter(0, rule), deadLetter(1, rule)}, &fakeBus{refuse: map[int]bool{1: true}}, 1, redrive.ErrFailed},
		{"the call fails", []types.Message{deadLetter(0, rule)}, &fakeBus{fail: errors.New("throttled")}, 0, nil},
		{"not from EventBridge", []types.Message{deadLetter(0, "")}, &fakeBus{}, 0, ErrNotEventsDLQ},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &fakeDLQ{msgs: tc.msgs}
			res, err := Events(context.Background(), q, tc.bus, "https://sqs/dlq", EventsOptions{})
			if len(q.deleted) != tc.wantDeleted || res.Put != tc.wantDeleted {
				t.Errorf("deleted %v (put %d), want %d", q.deleted, res.Put, tc.wantDeleted)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.wantErr == nil && tc.bus.fail == nil && err != nil {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.bus.fail != nil && err == nil {
				t.Error("a failed PutEvents returned no error")
			}
			for _, e := range tc.bus.got {
				if aws.ToString(e.EventBusName) != "linegate-abc" || aws.ToString(e.Source) != "line.webhook" || aws.ToString(e.Detail) == "" || e.Time == nil {
					t.Errorf("entry %+v: want the event back on the rule's bus", e)
				}
			}
		})
	}
	if b := BusOfRule("arn:aws:events:us-east-1:1:rule/only"); b != "default" {
		t.Errorf("BusOfRule(default bus rule) = %q", b)
	}
}

// peekQueue is a DLQ of one message whose visibility timeout may run out
// before the peek makes it visible again.
type peekQueue struct {
	attrs     map[string]types.MessageAttributeValue
	changeErr error
	changed   int
}

func (q *peekQueue) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return &sqs.ReceiveMessageOutput{Messages: []types.Message{{ReceiptHandle: aws.String("rh"), MessageAttributes: q.attrs}}}, nil
}

func (q *peekQueue) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q.changed++
	return &sqs.ChangeMessageVisibilityOutput{}, q.changeErr
}

// The peek makes its message visible again; a message already visible again
// (its visibility timeout ran out between the calls: MessageNotInflight) is
// what the peek wanted, and any other failure is reported.
func TestIsEventsDLQPeek(t *testing.T) {
	rule := map[string]types.MessageAttributeValue{AttrRuleARN: {DataType: aws.String("String"), StringValue: aws.String("arn:aws:events:us-east-1:1:rule/b/r")}}
	for _, tt := range []struct {
		name      string
		attrs     map[string]types.MessageAttributeValue
		changeErr error
		want      bool
		wantErr   bool
	}{
		{name: "an EventBridge dead letter", attrs: rule, want: true},
		{name: "an SQS dead letter", want: false},
		{name: "visible again before the change", attrs: rule, changeErr: &types.MessageNotInflight{Message: aws.String("not in flight")}, want: true},
		{name: "the change fails", attrs: rule, changeErr: errors.New("network down"), wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := &peekQueue{attrs: tt.attrs, changeErr: tt.changeErr}
			got, err := IsEventsDLQ(context.Background(), q, "https://sqs/q")
			if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
				t.Fatalf("IsEventsDLQ = %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
			if q.changed != 1 {
				t.Fatalf("ChangeMessageVisibility called %d times, want 1", q.changed)
			}
		})
	}
}
