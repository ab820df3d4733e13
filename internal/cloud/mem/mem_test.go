package mem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
)

var t0 = time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC)

func newCloud(t *testing.T, opts ...mem.Option) (*mem.Cloud, *testclock.Clock) {
	t.Helper()
	clk := testclock.New(t0)
	c := mem.New(append([]mem.Option{mem.WithClock(clk.Now)}, opts...)...)
	t.Cleanup(func() { _ = c.Close() })
	return c, clk
}

func createQueue(t *testing.T, c *mem.Cloud, name string, attrs map[string]string) (url, arn string) {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	return *out.QueueUrl, "arn:aws:sqs:us-east-1:123456789012:" + name
}

func send(t *testing.T, c *mem.Cloud, url, body string) {
	t.Helper()
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
}

func receive(t *testing.T, c *mem.Cloud, url string) []sqstypes.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

// await is the next value from ch; when none comes within 5 s it fails t
// with why.
func await[T any](t *testing.T, ch <-chan T, why string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal(why)
		var zero T
		return zero
	}
}

// checkJSON compares got (JSON) with testdata/name after masking
// generated IDs and indenting.
func checkJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	uuidRE := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	got = uuidRE.ReplaceAll(got, []byte("00000000-0000-0000-0000-000000000000"))
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("golden %s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	golden.Check(t, filepath.Join("testdata", name), buf.Bytes())
}

func TestQueueURLsAndARNsLookLikeAWS(t *testing.T) {
	c, _ := newCloud(t, mem.WithAccount("111122223333"), mem.WithRegion("ap-northeast-1"))
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *out.QueueUrl, "https://sqs.ap-northeast-1.amazonaws.com/111122223333/jobs"; got != want {
		t.Errorf("QueueUrl = %s, want %s", got, want)
	}
	a, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil || a.Attributes["QueueArn"] != "arn:aws:sqs:ap-northeast-1:111122223333:jobs" {
		t.Errorf("QueueArn = %v, %v", a.Attributes, err)
	}
	tp, err := c.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String("ops")})
	if err != nil || *tp.TopicArn != "arn:aws:sns:ap-northeast-1:111122223333:ops" {
		t.Errorf("TopicArn = %v, %v", tp, err)
	}
	bus, err := c.CreateEventBus(context.Background(), &eventbridge.CreateEventBusInput{Name: aws.String("b")})
	if err != nil || *bus.EventBusArn != "arn:aws:events:ap-northeast-1:111122223333:event-bus/b" {
		t.Errorf("EventBusArn = %v, %v", bus, err)
	}
	r, err := c.PutRule(context.Background(), &eventbridge.PutRuleInput{Name: aws.String("r"), EventBusName: aws.String("b"), EventPattern: aws.String(`{"source":["x"]}`)})
	if err != nil || *r.RuleArn != "arn:aws:events:ap-northeast-1:111122223333:rule/b/r" {
		t.Errorf("RuleArn = %v, %v", r, err)
	}
}

func TestQueueValidation(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		attrs map[string]string
		want  any
	}{
		{"unknown attribute", map[string]string{"Colour": "blue"}, new(*sqstypes.InvalidAttributeName)},
		{"visibility too long", map[string]string{"VisibilityTimeout": "43201"}, new(*sqstypes.InvalidAttributeValue)},
		{"redrive to a missing queue", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:nope","maxReceiveCount":3}`}, new(*sqstypes.InvalidAttributeValue)},
		{"redrive without count", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:nope"}`}, new(*sqstypes.InvalidAttributeValue)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("q%d", i)), Attributes: tt.attrs})
			if !errors.As(err, tt.want) {
				t.Fatalf("CreateQueue(%v) = %v, want %T", tt.attrs, err, tt.want)
			}
		})
	}
	if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bad name!")}); cloudtest.ErrorCode(err) != "InvalidParameterValue" {
		t.Errorf("bad queue name: %v", err)
	}
	// FIFO rules at creation: the name and the type agree; FIFO settings
	// need a FIFO queue; per-group throughput needs per-group deduplication;
	// a FIFO queue's dead-letter queue is FIFO.
	fifoCases := []struct {
		name  string
		attrs map[string]string
		code  string
	}{
		{"f", map[string]string{"FifoQueue": "true"}, "InvalidParameterValue"},
		{"s.fifo", nil, "InvalidParameterValue"},
		{"s2", map[string]string{"ContentBasedDeduplication": "true"}, "InvalidAttributeName"},
		{"t.fifo", map[string]string{"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId"}, "InvalidAttributeValue"},
		{"u.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "everywhere"}, "InvalidAttributeValue"},
	}
	for _, fc := range fifoCases {
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fc.name), Attributes: fc.attrs}); cloudtest.ErrorCode(err) != fc.code {
			t.Errorf("CreateQueue(%s, %v) = %v, want %s", fc.name, fc.attrs, err, fc.code)
		}
	}
	_, stdDLQArn := createQueue(t, c, "std-dlq", nil)
	if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("v.fifo"), Attributes: map[string]string{"FifoQueue": "true",
		"RedrivePolicy": `{"deadLetterTargetArn":"` + stdDLQArn + `","maxReceiveCount":3}`}}); cloudtest.ErrorCode(err) != "InvalidAttributeValue" {
		t.Errorf("FIFO queue with a standard DLQ: %v, want InvalidAttributeValue", err)
	}
	if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("ok.fifo"), Attributes: map[string]string{"FifoQueue": "true",
		"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId", "ContentBasedDeduplication": "true"}}); err != nil {
		t.Errorf("a high-throughput FIFO queue: %v", err)
	}
	// A redrive policy given as a numeric string, as CloudFormation writes it.
	_, dlqArn := createQueue(t, c, "dlq", nil)
	createQueue(t, c, "src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":"5"}`})
}

func TestQueueDoesNotExistCarriesAWSCode(t *testing.T) {
	c, _ := newCloud(t)
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/123456789012/none"), MessageBody: aws.String("x")})
	var qdne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &qdne) || cloudtest.ErrorCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("err = %v (code %q), want QueueDoesNotExist with the query-compatible code", err, cloudtest.ErrorCode(err))
	}
	var oe *smithy.OperationError
	if !errors.As(err, &oe) || oe.Operation() != "SendMessage" || oe.Service() != "SQS" {
		t.Errorf("err is not wrapped like the SDK's: %#v", err)
	}
}

func TestSendValidation(t *testing.T) {
	c, _ := newCloud(t)
	url, _ := createQueue(t, c, "q", map[string]string{"MaximumMessageSize": "1024"})
	ctx := context.Background()
	tests := []struct {
		name string
		in   sqs.SendMessageInput
		want string
	}{
		{"empty body", sqs.SendMessageInput{MessageBody: aws.String("")}, "InvalidParameterValue"},
		{"invalid character", sqs.SendMessageInput{MessageBody: aws.String("a\x00b")}, "InvalidMessageContents"},
		{"too large", sqs.SendMessageInput{MessageBody: aws.String(string(bytes.Repeat([]byte("x"), 1025)))}, "InvalidParameterValue"},
		{"delay too long", sqs.SendMessageInput{MessageBody: aws.String("x"), DelaySeconds: 901}, "InvalidParameterValue"},
		{"bad attribute type", sqs.SendMessageInput{MessageBody: aws.String("x"), MessageAttributes: map[string]sqstypes.MessageAttributeValue{"a": {DataType: aws.String("Date"), StringValue: aws.String("x")}}}, "InvalidParameterValue"},
		{"number not a number", sqs.SendMessageInput{MessageBody: aws.String("x"), MessageAttributes: map[string]sqstypes.MessageAttributeValue{"a": {DataType: aws.String("Number"), StringValue: aws.String("ten")}}}, "InvalidParameterValue"},
		{"unsupported system attribute", sqs.SendMessageInput{MessageBody: aws.String("x"), MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{"Other": {DataType: aws.String("String"), StringValue: aws.String("x")}}}, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.QueueUrl = aws.String(url)
			if _, err := c.SendMessage(ctx, &in); cloudtest.ErrorCode(err) != tt.want {
				t.Fatalf("SendMessage = %v (code %q), want %s", err, cloudtest.ErrorCode(err), tt.want)
			}
		})
	}
	if st := c.QueueStats(url); st != (mem.QueueStats{}) {
		t.Errorf("rejected messages were enqueued: %+v", st)
	}
}

func TestStaleReceiptHandle(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	url, _ := createQueue(t, c, "q", nil)
	send(t, c, url, "x")
	old := receive(t, c, url)[0]
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: old.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	cur := receive(t, c, url)[0]
	// AWS: an old handle "succeeds, but the message might not be deleted".
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: old.ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage(old handle) = %v, want success", err)
	}
	if st := c.QueueStats(url); st.InFlight != 1 {
		t.Fatalf("after deleting with an old handle: %+v, want the message still in flight", st)
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: old.ReceiptHandle, VisibilityTimeout: 5}); cloudtest.ErrorCode(err) != "InvalidParameterValue" {
		t.Errorf("ChangeMessageVisibility(old handle) = %v, want InvalidParameterValue", err)
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: cur.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if st := c.QueueStats(url); st != (mem.QueueStats{}) {
		t.Fatalf("after deleting with the current handle: %+v, want empty", st)
	}
	// Deleting again is a no-op success, as on AWS.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: cur.ReceiptHandle}); err != nil {
		t.Errorf("second delete = %v, want success", err)
	}
	var rhi *sqstypes.ReceiptHandleIsInvalid
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("garbage")}); !errors.As(err, &rhi) {
		t.Errorf("garbage handle = %v, want ReceiptHandleIsInvalid", err)
	}
	other, _ := createQueue(t, c, "other", nil)
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(other), ReceiptHandle: cur.ReceiptHandle}); !errors.As(err, &rhi) {
		t.Errorf("handle of another queue = %v, want ReceiptHandleIsInvalid", err)
	}
}

// ChangeMessageVisibility counts the new timeout from now, and only for a
// message still in flight. Each case changes a 10 s timeout after some
// seconds, then checks when the message shows again.
func TestChangeVisibility(t *testing.T) {
	tests := []struct {
		name             string
		after, timeout   time.Duration // when the change is made, and the new timeout
		wantNotInflight  bool
		hidden, reappear time.Duration // after the change: still hidden at hidden, visible at reappear
	}{
		{"extended from now", 8 * time.Second, 10 * time.Second, false, 9 * time.Second, 10 * time.Second},
		{"zero shows it at once", 2 * time.Second, 0, false, 0, 0},
		{"too late: the message is visible again", 11 * time.Second, 30 * time.Second, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, clk := newCloud(t)
			url, _ := createQueue(t, c, "q", map[string]string{"VisibilityTimeout": "10"})
			send(t, c, url, "x")
			m := receive(t, c, url)[0]
			clk.Advance(tt.after)
			_, err := c.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: int32(tt.timeout / time.Second)})
			var mni *sqstypes.MessageNotInflight
			if got := errors.As(err, &mni); got != tt.wantNotInflight || (err != nil && !got) {
				t.Fatalf("ChangeMessageVisibility = %v, want MessageNotInflight: %v", err, tt.wantNotInflight)
			}
			if tt.hidden > 0 {
				clk.Advance(tt.hidden)
				if got := receive(t, c, url); len(got) != 0 {
					t.Fatalf("message visible %v after the change", tt.hidden)
				}
			}
			clk.Advance(tt.reappear - tt.hidden)
			if got := receive(t, c, url); len(got) != 1 {
				t.Fatalf("message not visible %v after the change", tt.reappear)
			}
		})
	}
}

func TestRetentionAndPurgeCooldown(t *testing.T) {
	c, clk := newCloud(t)
	ctx := context.Background()
	url, _ := createQueue(t, c, "q", map[string]string{"MessageRetentionPeriod": "60"})
	send(t, c, url, "old")
	clk.Advance(30 * time.Second)
	send(t, c, url, "new")
	if st := c.QueueStats(url); st.Visible != 2 || st.OldestAge != 30*time.Second {
		t.Fatalf("stats = %+v, want 2 visible, oldest 30s", st)
	}
	clk.Advance(30 * time.Second)
	msgs := receive(t, c, url)
	if len(msgs) != 1 || *msgs[0].Body != "new" {
		t.Fatalf("after 60 s received %d messages, want only the newer one (retention)", len(msgs))
	}
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	var pip *sqstypes.PurgeQueueInProgress
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); !errors.As(err, &pip) {
		t.Fatalf("second purge within 60 s = %v, want PurgeQueueInProgress", err)
	}
	clk.Advance(60 * time.Second)
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatalf("purge after 60 s = %v", err)
	}
}

func TestQueueStatsScaledAgeAndQueues(t *testing.T) {
	c, clk := newCloud(t, mem.WithTimeScale(60))
	_, dlqArn := createQueue(t, c, "work-dlq", nil)
	url, _ := createQueue(t, c, "work", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":1}`})
	send(t, c, url, "a")
	send(t, c, url, "b")
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("c"), DelaySeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(400 * time.Millisecond) // 0.4 s is 24 s of cloud time at scale 60
	st := c.QueueStats(url)
	if st.Visible != 1 || st.InFlight != 1 || st.Delayed != 1 || st.OldestAge != 24*time.Second {
		t.Fatalf("stats = %+v, want 1 visible, 1 in flight, 1 delayed, oldest 24s", st)
	}
	clk.Advance(200 * time.Millisecond) // the 30 s visibility timeout lasts 0.5 s
	if st := c.QueueStats(url); st.Visible != 2 || st.InFlight != 0 {
		t.Fatalf("after the scaled visibility timeout: %+v, want 2 visible", st)
	}
	qs := c.Queues()
	if len(qs) != 2 || qs[0].Name != "work" || qs[0].DLQ || qs[1].Name != "work-dlq" || !qs[1].DLQ || qs[1].ARN != dlqArn || qs[0].URL != url {
		t.Fatalf("Queues() = %+v", qs)
	}
	if st := c.QueueStats("https://nowhere"); st != (mem.QueueStats{}) {
		t.Errorf("unknown queue stats = %+v, want zero", st)
	}
}

func TestTimeScaleWithRealClock(t *testing.T) {
	c := mem.New(mem.WithTimeScale(50))
	t.Cleanup(func() { _ = c.Close() })
	url, _ := createQueue(t, c, "q", map[string]string{"VisibilityTimeout": "10"}) // 0.2 s real
	send(t, c, url, "x")
	start := time.Now()
	if len(receive(t, c, url)) != 1 {
		t.Fatal("no message")
	}
	if got := receive(t, c, url); len(got) != 0 && time.Since(start) < 200*time.Millisecond {
		t.Fatalf("message reappeared before the scaled visibility timeout")
	}
	// The 20 s long poll lasts 0.4 s: long enough to see the message return.
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("long poll = %v, %v; want the message after 0.2 s", out, err)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Errorf("message reappeared after %v, want about 200ms", el)
	}
}

func TestLongPollWakesOnSendAndHonoursContext(t *testing.T) {
	c, _ := newCloud(t)
	url, _ := createQueue(t, c, "q", nil)
	go func() {
		time.Sleep(20 * time.Millisecond)
		send(t, c, url, "late")
	}()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("long poll = %v, %v; want the late message", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("long poll with an expiring context = %v after %v; want DeadlineExceeded early", err, time.Since(start))
	}
}

func TestCloseEndsLongPollsAndDeliveries(t *testing.T) {
	c := mem.New()
	url, _ := createQueue(t, c, "q", nil)
	tp, err := c.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String("t")})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	if _, err := c.SubscribeFunc(*tp.TopicArn, func(ctx context.Context, _ events.SNSEvent) error {
		close(started)
		<-ctx.Done() // a slow function: Close must cancel it
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(context.Background(), &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	<-started
	polled := make(chan error, 1)
	go func() {
		_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		polled <- err
	}()
	time.Sleep(10 * time.Millisecond)
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	await(t, done, "Close did not return")
	if err := await(t, polled, "long poll still waiting after Close"); !errors.Is(err, mem.ErrClosed) {
		t.Errorf("long poll after Close = %v, want ErrClosed", err)
	}
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")}); !errors.Is(err, mem.ErrClosed) {
		t.Errorf("SendMessage after Close = %v, want ErrClosed", err)
	}
}

func TestMoveTaskVariants(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	dlqURL, dlqArn := createQueue(t, c, "dlq", nil)
	srcURL, srcArn := createQueue(t, c, "src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":5}`})
	otherURL, otherArn := createQueue(t, c, "other", nil)

	var unsupported *sqstypes.UnsupportedOperation
	if _, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(srcArn)}); !errors.As(err, &unsupported) {
		t.Errorf("moving from a queue that is no DLQ = %v, want UnsupportedOperation", err)
	}
	var notFound *sqstypes.ResourceNotFoundException
	if _, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn + "x")}); !errors.As(err, &notFound) {
		t.Errorf("missing source = %v, want ResourceNotFoundException", err)
	}

	// A message sent straight to the DLQ has no source queue: without a
	// destination it stays, and the task says why.
	send(t, c, dlqURL, "orphan")
	if _, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn)}); err != nil {
		t.Fatal(err)
	}
	lt, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn)})
	if err != nil || len(lt.Results) != 1 || *lt.Results[0].Status != "FAILED" || lt.Results[0].FailureReason == nil {
		t.Fatalf("ListMessageMoveTasks = %+v, %v; want one FAILED task with a reason", lt, err)
	}
	// With a destination every message moves there.
	if _, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn), DestinationArn: aws.String(otherArn)}); err != nil {
		t.Fatal(err)
	}
	lt, err = c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn), MaxResults: aws.Int32(10)})
	if err != nil || len(lt.Results) != 2 || *lt.Results[0].Status != "COMPLETED" || lt.Results[0].ApproximateNumberOfMessagesMoved != 1 || *lt.Results[0].DestinationArn != otherArn {
		t.Fatalf("ListMessageMoveTasks = %+v, %v; want the newest COMPLETED first", lt, err)
	}
	if m := receive(t, c, otherURL); len(m) != 1 || *m[0].Body != "orphan" || m[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("destination got %+v", m)
	}
	if len(receive(t, c, srcURL)) != 0 || len(receive(t, c, dlqURL)) != 0 {
		t.Fatal("messages left behind")
	}
}

func TestPutEventsPerEntryOutcomes(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	url, arn := createQueue(t, c, "q", nil)
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("all"), EventPattern: aws.String(`{"source":[{"prefix":""}]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("all"), Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	c.FailPutEvents(func(e ebtypes.PutEventsRequestEntry) (string, bool) {
		if *e.DetailType == "throttle-me" {
			return "ThrottlingException", true
		}
		return "", false
	})
	e := func(bus, source, dt string) ebtypes.PutEventsRequestEntry {
		return ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus), Source: aws.String(source), DetailType: aws.String(dt), Detail: aws.String(`{}`)}
	}
	out, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		e("", "app", "ok"),
		e("nope", "app", "x"),
		e("default", "aws.ec2", "x"),
		e("arn:aws:events:us-east-1:123456789012:event-bus/default", "app", "throttle-me"),
		e("arn:aws:events:us-east-1:123456789012:event-bus/default", "app", "by-arn"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "ResourceNotFoundException", "NotAuthorizedForSourceException", "ThrottlingException", ""}
	for i, w := range want {
		if got := aws.ToString(out.Entries[i].ErrorCode); got != w {
			t.Errorf("entry %d code = %q, want %q", i, got, w)
		}
	}
	if out.FailedEntryCount != 3 {
		t.Errorf("FailedEntryCount = %d, want 3", out.FailedEntryCount)
	}
	if got := receive(t, c, url); len(got) != 2 {
		t.Errorf("delivered %d events, want the 2 accepted ones", len(got))
	}
	c.FailPutEvents(nil)
	out, err = c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{e("", "app", "throttle-me")}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Errorf("after removing the fault: %+v, %v", out, err)
	}
}

func TestTargetFailureGoesToTargetDLQ(t *testing.T) {
	rec := &testmetrics.Recorder{}
	c, _ := newCloud(t, mem.WithMetrics(rec))
	ctx := context.Background()
	dlqURL, dlqArn := createQueue(t, c, "target-dlq", nil)
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventPattern: aws.String(`{"source":["app"]}`)}); err != nil {
		t.Fatal(err)
	}
	missing := "arn:aws:sqs:us-east-1:123456789012:deleted"
	if _, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), Targets: []ebtypes.Target{
		{Id: aws.String("with-dlq"), Arn: aws.String(missing), DeadLetterConfig: &ebtypes.DeadLetterConfig{Arn: aws.String(dlqArn)}},
		{Id: aws.String("without"), Arn: aws.String(missing)},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{"k":"v"}`)}}}); err != nil {
		t.Fatal(err)
	}
	msgs := receive(t, c, dlqURL)
	if len(msgs) != 1 {
		t.Fatalf("target DLQ got %d messages, want 1", len(msgs))
	}
	a := msgs[0].MessageAttributes
	if *a["RULE_ARN"].StringValue != "arn:aws:events:us-east-1:123456789012:rule/r" || *a["TARGET_ARN"].StringValue != missing || *a["ERROR_CODE"].StringValue == "" || *a["ERROR_MESSAGE"].StringValue == "" {
		t.Errorf("DLQ attributes = %+v", a)
	}
	var ev map[string]any
	if json.Unmarshal([]byte(*msgs[0].Body), &ev) != nil || ev["detail"].(map[string]any)["k"] != "v" {
		t.Errorf("DLQ body is not the event: %s", *msgs[0].Body)
	}
	if rec.Total("InvocationsSentToDlq") != 1 || rec.Total("FailedInvocations") != 1 {
		t.Errorf("metrics = %v, want one dead-lettered and one dropped", rec.Counts())
	}
}

func TestTargetInputAndSNSTarget(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	constURL, constArn := createQueue(t, c, "const", nil)
	pathURL, pathArn := createQueue(t, c, "path", nil)
	snsURL, snsQArn := createQueue(t, c, "via-sns", nil)
	tp, _ := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t")})
	if _, err := c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(snsQArn), Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventPattern: aws.String(`{"source":["app"]}`)}); err != nil {
		t.Fatal(err)
	}
	out, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), Targets: []ebtypes.Target{
		{Id: aws.String("c"), Arn: aws.String(constArn), Input: aws.String(`{"fixed":true}`)},
		{Id: aws.String("p"), Arn: aws.String(pathArn), InputPath: aws.String("$.detail.inner")},
		{Id: aws.String("s"), Arn: tp.TopicArn},
		{Id: aws.String("bad"), Arn: aws.String(constArn), InputTransformer: &ebtypes.InputTransformer{InputTemplate: aws.String("x")}},
	}})
	if err != nil || out.FailedEntryCount != 1 || *out.FailedEntries[0].TargetId != "bad" {
		t.Fatalf("PutTargets = %+v, %v; want only the InputTransformer target refused", out, err)
	}
	if _, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{"inner":{"a":1}}`)}}}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, c, constURL); len(m) != 1 || *m[0].Body != `{"fixed":true}` {
		t.Errorf("Input target got %+v", m)
	}
	if m := receive(t, c, pathURL); len(m) != 1 || *m[0].Body != `{"a":1}` {
		t.Errorf("InputPath target got %+v", m)
	}
	if m := receive(t, c, snsURL); len(m) != 1 || !json.Valid([]byte(*m[0].Body)) {
		t.Errorf("SNS target got %+v", m)
	}
	lt, err := c.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String("r")})
	if err != nil || len(lt.Targets) != 3 {
		t.Errorf("ListTargetsByRule = %+v, %v", lt, err)
	}
}

func TestEventBridgeAdminErrors(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	var rnf *ebtypes.ResourceNotFoundException
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventBusName: aws.String("nope"), EventPattern: aws.String(`{"source":["a"]}`)}); !errors.As(err, &rnf) {
		t.Errorf("PutRule on a missing bus = %v", err)
	}
	if _, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("nope"), Targets: []ebtypes.Target{{Id: aws.String("a"), Arn: aws.String("arn:aws:sqs:us-east-1:1:q")}}}); !errors.As(err, &rnf) {
		t.Errorf("PutTargets on a missing rule = %v", err)
	}
	var exists *ebtypes.ResourceAlreadyExistsException
	c.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String("b")})
	if _, err := c.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String("b")}); !errors.As(err, &exists) {
		t.Errorf("second CreateEventBus = %v", err)
	}
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r")}); cloudtest.ErrorCode(err) != "ValidationException" {
		t.Errorf("PutRule without pattern or schedule = %v", err)
	}
	c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventPattern: aws.String(`{"source":["a"]}`)})
	var targets []ebtypes.Target
	for i := range 6 {
		targets = append(targets, ebtypes.Target{Id: aws.String(fmt.Sprint(i)), Arn: aws.String("arn:aws:sqs:us-east-1:1:q")})
	}
	var limit *ebtypes.LimitExceededException
	if _, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), Targets: targets}); !errors.As(err, &limit) {
		t.Errorf("six targets = %v, want LimitExceededException", err)
	}
}

// TestDeliveredShapes pins the exact JSON a target receives, against golden
// files: the EventBridge event, the SNS notification in SQS, and the Lambda
// SNS event of SubscribeFunc.
func TestDeliveredShapes(t *testing.T) {
	c, _ := newCloud(t, mem.WithTimeScale(1e6))
	ctx := context.Background()
	url, arn := createQueue(t, c, "events", nil)
	c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventPattern: aws.String(`{"source":["line.webhook"]}`)})
	c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}})
	if _, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("line.webhook"), DetailType: aws.String("message"),
		Detail: aws.String(`{"destination":"U1","receivedAt":"2024-01-02T03:04:05.678Z","event":{"type":"message","text":"こんにちは"}}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, "eventbridge_event.json", []byte(*receive(t, c, url)[0].Body))

	subURL, subArn := createQueue(t, c, "sub", nil)
	tp, _ := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("ops")})
	c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(subArn)})
	got := make(chan events.SNSEvent, 1)
	if _, err := c.SubscribeFunc(*tp.TopicArn, func(_ context.Context, ev events.SNSEvent) error { got <- ev; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, &sns.PublishInput{TopicArn: tp.TopicArn, Subject: aws.String("ALARM: dlq"), Message: aws.String(`{"AlarmName":"dlq"}`),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("alarm")}}}); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, "sns_notification.json", []byte(*receive(t, c, subURL)[0].Body))
	b, _ := json.Marshal(await(t, got, "SubscribeFunc was not called"))
	checkJSON(t, "sns_lambda_event.json", b)
}

func TestSubscribeFuncRetriesThenFailureHook(t *testing.T) {
	type failure struct {
		ev  events.SNSEvent
		err error
	}
	failed := make(chan failure, 1)
	c, _ := newCloud(t, mem.WithTimeScale(1e5), mem.WithInvokeFailure(func(_ string, ev events.SNSEvent, err error) { failed <- failure{ev, err} }))
	ctx := context.Background()
	tp, _ := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t")})

	var flaky, broken atomic.Int32
	okAfterTwo := make(chan struct{})
	c.SubscribeFunc(*tp.TopicArn, func(_ context.Context, ev events.SNSEvent) error {
		if flaky.Add(1) < 3 {
			return errors.New("transient")
		}
		close(okAfterTwo)
		return nil
	})
	c.SubscribeFunc(*tp.TopicArn, func(_ context.Context, ev events.SNSEvent) error {
		if broken.Add(1) == 2 {
			panic("boom") // a panic counts as a failed attempt
		}
		return errors.New("always")
	})
	pub, err := c.Publish(ctx, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	await(t, okAfterTwo, "flaky function was not retried to success")
	if f := await(t, failed, "failure hook not called"); f.ev.Records[0].SNS.MessageID != *pub.MessageId || f.err == nil {
		t.Errorf("failure hook got %+v", f)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if flaky.Load() != 3 || broken.Load() != 3 {
		t.Errorf("attempts: flaky %d, broken %d; want 3 each (1 + 2 retries)", flaky.Load(), broken.Load())
	}
}

func TestSNSValidation(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	tp, _ := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t")})
	again, _ := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t")})
	if *again.TopicArn != *tp.TopicArn {
		t.Errorf("CreateTopic is not idempotent")
	}
	var ipe *snstypes.InvalidParameterException
	var ipve *snstypes.InvalidParameterValueException
	var nf *snstypes.NotFoundException
	tests := []struct {
		name string
		err  error
		want any
	}{
		{"empty message", pub(c, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("")}), &ipe},
		{"subject with newline", pub(c, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("m"), Subject: aws.String("a\nb")}), &ipe},
		{"json structure without default", pub(c, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String(`{"sqs":"x"}`), MessageStructure: aws.String("json")}), &ipe},
		{"attribute without value", pub(c, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("m"), MessageAttributes: map[string]snstypes.MessageAttributeValue{"a": {DataType: aws.String("String")}}}), &ipve},
		{"missing topic", pub(c, &sns.PublishInput{TopicArn: aws.String(*tp.TopicArn + "x"), Message: aws.String("m")}), &nf},
		{"http protocol", sub(c, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("https"), Endpoint: aws.String("https://example.com")}), &ipe},
		{"filter policy", sub(c, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String("arn:aws:sqs:us-east-1:123456789012:q"), Attributes: map[string]string{"FilterPolicy": "{}"}}), &ipe},
	}
	for _, tt := range tests {
		if !errors.As(tt.err, tt.want) {
			t.Errorf("%s: err = %v, want %T", tt.name, tt.err, tt.want)
		}
	}
	// MessageStructure json picks the protocol's message.
	url, arn := createQueue(t, c, "q", nil)
	c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn), Attributes: map[string]string{"RawMessageDelivery": "true"}})
	if err := pub(c, &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String(`{"default":"d","sqs":"for sqs"}`), MessageStructure: aws.String("json")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, c, url); len(m) != 1 || *m[0].Body != "for sqs" {
		t.Errorf("json structure delivered %+v", m)
	}
}

func pub(c *mem.Cloud, in *sns.PublishInput) error {
	_, err := c.Publish(context.Background(), in)
	return err
}

func sub(c *mem.Cloud, in *sns.SubscribeInput) error {
	_, err := c.Subscribe(context.Background(), in)
	return err
}

// TestConcurrentConsumers runs producers and consumers at once (for -race)
// and checks every message is processed and deleted exactly once.
func TestConcurrentConsumers(t *testing.T) {
	c, _ := newCloud(t)
	url, _ := createQueue(t, c, "q", map[string]string{"VisibilityTimeout": "300"})
	const n = 200
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 4 {
				send(t, c, url, fmt.Sprintf("%d-%d", p, i))
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var consumers sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 4 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for ctx.Err() == nil {
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				for _, m := range out.Messages {
					mu.Lock()
					seen[*m.Body]++
					done := len(seen) == n
					mu.Unlock()
					if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Error(err)
					}
					if done {
						cancel()
					}
				}
			}
		}()
	}
	wg.Wait()
	consumers.Wait()
	if len(seen) != n {
		t.Fatalf("processed %d distinct messages, want %d", len(seen), n)
	}
	for body, k := range seen {
		if k != 1 {
			t.Errorf("%s received %d times within its visibility timeout", body, k)
		}
	}
	if st := c.QueueStats(url); st != (mem.QueueStats{}) {
		t.Errorf("queue not empty: %+v", st)
	}
}

// TestNoGoroutinesAfterClose: deliveries waiting for a retry (a minute away
// at scale 1) end with Close.
func TestNoGoroutinesAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	c := mem.New()
	tp, _ := c.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String("t")})
	var calls atomic.Int32
	c.SubscribeFunc(*tp.TopicArn, func(context.Context, events.SNSEvent) error { calls.Add(1); return errors.New("fail") })
	for range 5 {
		if _, err := c.Publish(context.Background(), &sns.PublishInput{TopicArn: tp.TopicArn, Message: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
	}
	for calls.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before New", runtime.NumGoroutine(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
