// Package cloudtest is the conformance suite for implementations of the
// cloud ports: it pins down the AWS semantics linegate relies on (SQS
// visibility, redrive and batches, EventBridge routing and per-entry errors,
// SNS notifications, EventBridge pattern matching) and runs them against any
// backend — the in-memory cloud and moto_server through the real SDK.
//
// AWS's documented behaviour is the reference. Where a backend differs, its
// harness lists a Divergence naming the case and the reason; the case is then
// skipped for that backend with the reason in the skip message, never
// silently.
package cloudtest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/cloud/pattern/patterntest"
)

// Harness adapts a backend to the suite.
type Harness struct {
	// Name labels the backend in skip messages ("mem", "moto").
	Name string
	// New returns a fresh, empty backend for one case. Register cleanup
	// with t.Cleanup.
	New func(t *testing.T) Backend
	// Divergences lists the cases this backend is known to get wrong,
	// each with the reason. Every entry must name an existing case.
	Divergences []Divergence
}

// Backend is one cloud under test: the real SDK clients of an endpoint, or
// the in-memory cloud in every field.
type Backend struct {
	SQS         SQS
	EventBridge EventBridge
	SNS         SNS
	// Sleep lets d of cloud time pass. Nil means time.Sleep; an in-memory
	// backend advances its clock instead.
	Sleep func(d time.Duration)
}

// SQS, EventBridge and SNS are the calls the suite makes: the same as the
// AWS endpoint of `linegate local` serves (internal/awswire), so a backend
// that passes the suite can be served over the wire.
type (
	SQS         = awswire.SQS
	EventBridge = awswire.EventBridge
	SNS         = awswire.SNS
)

// Divergence records that a backend departs from AWS's documented behaviour
// in one case. Case is the case's path below Run, e.g. "SQS/RedriveToDLQ"
// or "Pattern/array_of_objects".
type Divergence struct {
	Case   string
	Reason string
}

// wait bounds how long the suite waits for something that should happen.
const wait = 15 * time.Second

// callWait bounds one call (ctxFor). It is generous: a loaded machine slows
// a backend down by an order of magnitude (moto took 15-17 s for one
// PutEvents of 10 entries on 85 buses at a load average of 16 on 2 cores),
// and a slow call is no wrong answer; a hung backend still fails.
const callWait = 2 * time.Minute

type suite struct {
	h       Harness
	visited map[string]bool
}

// A testCase is one case of the suite: its name below its service (a
// Divergence names it "service/name") and its test.
type testCase struct {
	name string
	test func(t *testing.T, b Backend)
}

// Run runs every case as a subtest of t.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h, visited: map[string]bool{}}
	s.service(t, "SQS", []testCase{
		{"CreateAndGetQueueURL", testCreateAndGetQueueURL},
		{"CreateQueueConflict", testCreateQueueConflict},
		{"NonexistentQueueError", testNonexistentQueue},
		{"SendReceiveDelete", testSendReceiveDelete},
		{"VisibilityTimeoutHidesThenReveals", testVisibilityTimeout},
		{"ReceiveCountIncrements", testReceiveCount},
		{"ChangeMessageVisibilityZero", testChangeVisibilityZero},
		{"RedriveToDLQ", testRedrive},
		{"DelaySeconds", testDelay},
		{"BatchReceiveUpToTen", testBatchReceive},
		{"ReceiveMoreThanTenFails", testReceiveOverTen},
		{"SendBatchOverTenFails", testSendBatchOverTen},
		{"DeleteMessageBatchPartialFailure", testDeleteBatchPartial},
		{"MessageAttributesRoundTrip", testMessageAttributes},
		{"QueueAttributeCounts", testQueueCounts},
		{"PurgeQueue", testPurge},
		{"MoveTaskBackToSource", testMoveTask},
		{"FIFOOrderPerGroup", testFIFOOrder},
		{"FIFOSequenceNumbersIncrease", testFIFOSequence},
		{"FIFOGroupLockedWhileInFlight", testFIFOGroupLock},
		{"FIFOGroupExclusiveWithConcurrentConsumers", testFIFOExclusive},
		{"FIFOFollowerWaitsBehindHidden", testFIFOFollowerWaits},
		{"FIFODeduplication", testFIFODedup},
		{"FIFOGroupAndDedupRequired", testFIFORequired},
		{"FIFORedriveToFIFODLQ", testFIFORedrive},
	})
	s.service(t, "EventBridge", []testCase{
		{"LinegateRulesRouteChatLessToBackground", testLinegateRouting},
		{"DeliveredEventShape", testEventShape},
		{"DisabledRuleDoesNotDeliver", testDisabledRule},
		{"PutEventsPerEntryErrors", testPerEntryErrors},
		{"PutEventsDetailMustBeObject", testDetailMustBeObject},
		{"PutEventsOverTenEntriesFails", testOverTenEntries},
		{"PutEventsOverSizeLimitFails", testOverSize},
		{"TraceHeaderBecomesAWSTraceHeader", testTraceHeader},
		{"FIFOTargetMessageGroup", testFIFOTarget},
	})
	s.service(t, "SNS", []testCase{
		{"NotificationToSQS", testSNSNotification},
		{"RawDeliveryToSQS", testSNSRaw},
		{"PublishToMissingTopicFails", testSNSMissingTopic},
	})
	t.Run("Pattern", func(t *testing.T) { s.runPatterns(t) })
	t.Run("PatternInvalid", func(t *testing.T) { s.runInvalidPatterns(t) })
	for _, d := range h.Divergences {
		if !s.visited[d.Case] {
			t.Errorf("harness %s lists a divergence for %q, which names no case", h.Name, d.Case)
		}
	}
}

// service runs the cases of one service in t's subtest of that name.
func (s *suite) service(t *testing.T, service string, cases []testCase) {
	t.Run(service, func(t *testing.T) {
		for _, c := range cases {
			s.run(t, service+"/"+c.name, c.test)
		}
	})
}

// run runs one case on a fresh backend, unless the harness lists it as a
// divergence.
func (s *suite) run(t *testing.T, path string, fn func(t *testing.T, b Backend)) {
	t.Helper()
	name := path[strings.LastIndex(path, "/")+1:]
	t.Run(name, func(t *testing.T) {
		if s.skipDivergent(t, path) {
			return
		}
		fn(t, s.backend(t))
	})
}

func (s *suite) skipDivergent(t *testing.T, path string) bool {
	s.visited[path] = true
	if d := s.divergence(path); d != nil {
		t.Skipf("DIVERGENCE (%s differs from AWS): %s", s.h.Name, d.Reason)
		return true
	}
	return false
}

func (s *suite) divergence(path string) *Divergence {
	for i := range s.h.Divergences {
		if s.h.Divergences[i].Case == path {
			return &s.h.Divergences[i]
		}
	}
	return nil
}

func (s *suite) backend(t *testing.T) Backend {
	b := s.h.New(t)
	if b.Sleep == nil {
		b.Sleep = time.Sleep
	}
	return b
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	t.Cleanup(cancel)
	return ctx
}

// --- helpers ---------------------------------------------------------------

type queueRef struct{ url, arn string }

func createQueue(t *testing.T, b Backend, name string, attrs map[string]string) queueRef {
	t.Helper()
	ctx := ctxFor(t)
	out, err := b.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	at, err := b.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes(%s): %v", name, err)
	}
	return queueRef{url: *out.QueueUrl, arn: at.Attributes["QueueArn"]}
}

func send(t *testing.T, b Backend, q queueRef, body string) *sqs.SendMessageOutput {
	t.Helper()
	out, err := b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	return out
}

var allAttrs = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}

// receiveNow short-polls once.
func receiveNow(t *testing.T, b Backend, q queueRef, max int32) []sqstypes.Message {
	t.Helper()
	out, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(q.url), MaxNumberOfMessages: max, MessageSystemAttributeNames: allAttrs,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

// receiveN long-polls until n messages arrived (fails after wait).
func receiveN(t *testing.T, b Backend, q queueRef, n int) []sqstypes.Message {
	t.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(wait)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d messages from %s within %v, want %d", len(got), q.url, wait, n)
		}
		out, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(q.url), MaxNumberOfMessages: int32(min(n-len(got), 10)), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: allAttrs, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		got = append(got, out.Messages...)
	}
	return got
}

func expectNone(t *testing.T, b Backend, q queueRef, why string) {
	t.Helper()
	if msgs := receiveNow(t, b, q, 10); len(msgs) != 0 {
		t.Fatalf("%s: received %d messages, want none (first body %q)", why, len(msgs), aws.ToString(msgs[0].Body))
	}
}

func receiveCount(t *testing.T, m sqstypes.Message) int {
	t.Helper()
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	if err != nil {
		t.Fatalf("ApproximateReceiveCount = %q: %v", m.Attributes["ApproximateReceiveCount"], err)
	}
	return n
}

func changeVisibility(t *testing.T, b Backend, q queueRef, m sqstypes.Message, vt int32) {
	t.Helper()
	if _, err := b.SQS.ChangeMessageVisibility(ctxFor(t), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: vt}); err != nil {
		t.Fatalf("ChangeMessageVisibility(%d): %v", vt, err)
	}
}

func queueAttrs(t *testing.T, b Backend, q queueRef) map[string]string {
	t.Helper()
	out, err := b.SQS.GetQueueAttributes(ctxFor(t), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	return out.Attributes
}

// ErrorCode is the AWS error code err carries (as a smithy.APIError,
// wrapped or not), or "": how the suite, and a backend's own tests, tell
// AWS's errors apart without depending on their Go types.
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func redrivePolicy(dlqArn string, max int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlqArn, max)
}

// --- SQS cases ---------------------------------------------------------------

func testCreateAndGetQueueURL(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	q := createQueue(t, b, "orders", map[string]string{"VisibilityTimeout": "45"})
	got, err := b.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	if err != nil || aws.ToString(got.QueueUrl) != q.url {
		t.Fatalf("GetQueueUrl = %v, %v; want %s", got, err, q.url)
	}
	if !strings.HasSuffix(q.url, "/orders") {
		t.Errorf("queue URL %q does not end in the queue name", q.url)
	}
	if !strings.HasPrefix(q.arn, "arn:aws:sqs:") || !strings.HasSuffix(q.arn, ":orders") || len(strings.Split(q.arn, ":")) != 6 {
		t.Errorf("QueueArn = %q, want arn:aws:sqs:REGION:ACCOUNT:orders", q.arn)
	}
	again, err := b.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders"), Attributes: map[string]string{"VisibilityTimeout": "45"}})
	if err != nil || aws.ToString(again.QueueUrl) != q.url {
		t.Errorf("CreateQueue with identical attributes = %v, %v; want the same URL (idempotent)", again, err)
	}
	if v := queueAttrs(t, b, q)["VisibilityTimeout"]; v != "45" {
		t.Errorf("VisibilityTimeout attribute = %q, want 45", v)
	}
}

func testCreateQueueConflict(t *testing.T, b Backend) {
	createQueue(t, b, "conflict", map[string]string{"VisibilityTimeout": "45"})
	_, err := b.SQS.CreateQueue(ctxFor(t), &sqs.CreateQueueInput{QueueName: aws.String("conflict"), Attributes: map[string]string{"VisibilityTimeout": "60"}})
	var qne *sqstypes.QueueNameExists
	if !errors.As(err, &qne) {
		t.Fatalf("CreateQueue with a different VisibilityTimeout = %v, want QueueNameExists", err)
	}
}

func testNonexistentQueue(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	_, err := b.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var qdne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &qdne) {
		t.Fatalf("GetQueueUrl(missing) = %v, want QueueDoesNotExist", err)
	}
	q := createQueue(t, b, "present", nil)
	missing := strings.TrimSuffix(q.url, "present") + "missing"
	_, err = b.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(missing)})
	if !errors.As(err, &qdne) {
		t.Fatalf("ReceiveMessage(missing) = %v, want QueueDoesNotExist", err)
	}
}

func testSendReceiveDelete(t *testing.T, b Backend) {
	q := createQueue(t, b, "work", nil)
	body := `{"hello":"世界"}`
	sent := send(t, b, q, body)
	if aws.ToString(sent.MD5OfMessageBody) != md5Hex(body) {
		t.Errorf("MD5OfMessageBody = %s, want %s", aws.ToString(sent.MD5OfMessageBody), md5Hex(body))
	}
	m := receiveN(t, b, q, 1)[0]
	if aws.ToString(m.Body) != body || aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) {
		t.Fatalf("received %q (%s), want %q (%s)", aws.ToString(m.Body), aws.ToString(m.MessageId), body, aws.ToString(sent.MessageId))
	}
	if aws.ToString(m.MD5OfBody) != md5Hex(body) {
		t.Errorf("MD5OfBody = %s, want %s", aws.ToString(m.MD5OfBody), md5Hex(body))
	}
	sentAt, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
	if err != nil || sentAt <= 0 {
		t.Errorf("SentTimestamp = %q, want epoch milliseconds", m.Attributes["SentTimestamp"])
	}
	if _, err := b.SQS.DeleteMessage(ctxFor(t), &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	a := queueAttrs(t, b, q)
	if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("after delete: visible=%s notVisible=%s, want 0 and 0", a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"])
	}
	expectNone(t, b, q, "a deleted message must not come back")
}

func testVisibilityTimeout(t *testing.T, b Backend) {
	q := createQueue(t, b, "vis", map[string]string{"VisibilityTimeout": "1"})
	sent := send(t, b, q, "hide me")
	first := receiveN(t, b, q, 1)[0]
	expectNone(t, b, q, "within the visibility timeout")
	b.Sleep(1500 * time.Millisecond)
	again := receiveN(t, b, q, 1)[0]
	if aws.ToString(again.MessageId) != aws.ToString(sent.MessageId) {
		t.Fatalf("re-received %s, want %s", aws.ToString(again.MessageId), aws.ToString(sent.MessageId))
	}
	if aws.ToString(again.ReceiptHandle) == aws.ToString(first.ReceiptHandle) {
		t.Errorf("each receive must carry a new receipt handle")
	}
	if n := receiveCount(t, again); n != 2 {
		t.Errorf("ApproximateReceiveCount = %d, want 2", n)
	}
}

func testReceiveCount(t *testing.T, b Backend) {
	q := createQueue(t, b, "count", nil)
	send(t, b, q, "count me")
	var firstReceive string
	for want := 1; want <= 3; want++ {
		m := receiveN(t, b, q, 1)[0]
		if n := receiveCount(t, m); n != want {
			t.Fatalf("receive %d: ApproximateReceiveCount = %d", want, n)
		}
		if want == 1 {
			firstReceive = m.Attributes["ApproximateFirstReceiveTimestamp"]
		} else if got := m.Attributes["ApproximateFirstReceiveTimestamp"]; got != firstReceive {
			t.Errorf("ApproximateFirstReceiveTimestamp changed from %s to %s", firstReceive, got)
		}
		out, err := b.SQS.ChangeMessageVisibilityBatch(ctxFor(t), &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(q.url),
			Entries:  []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("m"), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}},
		})
		if err != nil || len(out.Successful) != 1 {
			t.Fatalf("ChangeMessageVisibilityBatch = %+v, %v", out, err)
		}
	}
}

func testChangeVisibilityZero(t *testing.T, b Backend) {
	q := createQueue(t, b, "cmv", map[string]string{"VisibilityTimeout": "30"})
	send(t, b, q, "again")
	m := receiveN(t, b, q, 1)[0]
	expectNone(t, b, q, "hidden for 30 s")
	changeVisibility(t, b, q, m, 0)
	again := receiveN(t, b, q, 1)[0]
	if aws.ToString(again.MessageId) != aws.ToString(m.MessageId) || receiveCount(t, again) != 2 {
		t.Fatalf("after ChangeMessageVisibility(0) received %s count %s, want %s count 2", aws.ToString(again.MessageId), again.Attributes["ApproximateReceiveCount"], aws.ToString(m.MessageId))
	}
}

// deadLetter sends one message to src and receives it until SQS moves it
// to the DLQ (maxReceiveCount is max), returning the message.
func deadLetter(t *testing.T, b Backend, src, dlq queueRef, max int, body string, attrs map[string]sqstypes.MessageAttributeValue) sqstypes.Message {
	t.Helper()
	if _, err := b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{QueueUrl: aws.String(src.url), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	for i := 1; i <= max; i++ {
		m := receiveN(t, b, src, 1)[0]
		if n := receiveCount(t, m); n != i {
			t.Fatalf("receive %d: ApproximateReceiveCount = %d", i, n)
		}
		changeVisibility(t, b, src, m, 0)
	}
	// The next receive finds the count at maxReceiveCount: the message goes
	// to the DLQ instead of being delivered.
	out, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(src.url), WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("receive past maxReceiveCount = %d messages, %v; want none (moved to the DLQ)", len(out.Messages), err)
	}
	return receiveN(t, b, dlq, 1)[0]
}

func testRedrive(t *testing.T, b Backend) {
	dlq := createQueue(t, b, "work-dlq", nil)
	src := createQueue(t, b, "work-src", map[string]string{"RedrivePolicy": redrivePolicy(dlq.arn, 2), "VisibilityTimeout": "30"})
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     any    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(queueAttrs(t, b, src)["RedrivePolicy"]), &rp); err != nil || rp.DeadLetterTargetArn != dlq.arn || fmt.Sprint(rp.MaxReceiveCount) != "2" {
		t.Errorf("RedrivePolicy attribute = %+v, %v; want the DLQ ARN and 2", rp, err)
	}
	attrs := map[string]sqstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("poison")}}
	m := deadLetter(t, b, src, dlq, 2, "poison", attrs)
	if aws.ToString(m.Body) != "poison" || aws.ToString(m.MessageAttributes["kind"].StringValue) != "poison" {
		t.Errorf("DLQ message body %q attrs %v, want the original body and attributes", aws.ToString(m.Body), m.MessageAttributes)
	}
}

func testDelay(t *testing.T, b Backend) {
	q := createQueue(t, b, "delay", nil)
	if _, err := b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String("later"), DelaySeconds: 1}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	expectNone(t, b, q, "during DelaySeconds")
	if d := queueAttrs(t, b, q)["ApproximateNumberOfMessagesDelayed"]; d != "1" {
		t.Errorf("ApproximateNumberOfMessagesDelayed = %q, want 1", d)
	}
	b.Sleep(1500 * time.Millisecond)
	if m := receiveN(t, b, q, 1)[0]; aws.ToString(m.Body) != "later" {
		t.Fatalf("received %q, want later", aws.ToString(m.Body))
	}
}

func testBatchReceive(t *testing.T, b Backend) {
	q := createQueue(t, b, "batch", nil)
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("e%d", i)), MessageBody: aws.String(fmt.Sprintf("m%d", i))})
	}
	out, err := b.SQS.SendMessageBatch(ctxFor(t), &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil || len(out.Successful) != 10 || len(out.Failed) != 0 {
		t.Fatalf("SendMessageBatch = %+v, %v; want 10 successful", out, err)
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(wait)
	for len(seen) < 10 && time.Now().Before(deadline) {
		r, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(r.Messages) > 10 {
			t.Fatalf("received %d messages, more than MaxNumberOfMessages", len(r.Messages))
		}
		for _, m := range r.Messages {
			seen[aws.ToString(m.Body)] = true
		}
	}
	if len(seen) != 10 {
		t.Fatalf("received %d distinct messages, want 10", len(seen))
	}
}

func testReceiveOverTen(t *testing.T, b Backend) {
	q := createQueue(t, b, "over", nil)
	_, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 11})
	if code := ErrorCode(err); code != "InvalidParameterValue" {
		t.Fatalf("ReceiveMessage(MaxNumberOfMessages=11) = %v (code %q), want InvalidParameterValue", err, code)
	}
}

func testSendBatchOverTen(t *testing.T, b Backend) {
	q := createQueue(t, b, "overbatch", nil)
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 11 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("e%d", i)), MessageBody: aws.String("x")})
	}
	_, err := b.SQS.SendMessageBatch(ctxFor(t), &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	var tooMany *sqstypes.TooManyEntriesInBatchRequest
	if !errors.As(err, &tooMany) {
		t.Fatalf("SendMessageBatch(11 entries) = %v, want TooManyEntriesInBatchRequest", err)
	}
}

func testDeleteBatchPartial(t *testing.T, b Backend) {
	q := createQueue(t, b, "delbatch", nil)
	send(t, b, q, "a")
	send(t, b, q, "b")
	msgs := receiveN(t, b, q, 2)
	out, err := b.SQS.DeleteMessageBatch(ctxFor(t), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("good"), ReceiptHandle: msgs[0].ReceiptHandle},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-receipt-handle")},
	}})
	if err != nil {
		t.Fatalf("DeleteMessageBatch: %v", err)
	}
	if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "good" {
		t.Errorf("Successful = %+v, want only good", out.Successful)
	}
	if len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" || aws.ToString(out.Failed[0].Code) != "ReceiptHandleIsInvalid" || !out.Failed[0].SenderFault {
		t.Errorf("Failed = %+v, want bad with ReceiptHandleIsInvalid and SenderFault", out.Failed)
	}
	// The undeleted message comes back; the deleted one does not.
	changeVisibility(t, b, q, msgs[1], 0)
	back := receiveN(t, b, q, 1)
	if aws.ToString(back[0].MessageId) != aws.ToString(msgs[1].MessageId) {
		t.Errorf("re-received %s, want the undeleted %s", aws.ToString(back[0].MessageId), aws.ToString(msgs[1].MessageId))
	}
}

func testMessageAttributes(t *testing.T, b Backend) {
	q := createQueue(t, b, "attrs", nil)
	attrs := map[string]sqstypes.MessageAttributeValue{
		"color":      {DataType: aws.String("String"), StringValue: aws.String("blue")},
		"count":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":       {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		"color.hint": {DataType: aws.String("String.custom"), StringValue: aws.String("navy")},
	}
	trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	sent, err := b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{
		QueueUrl: aws.String(q.url), MessageBody: aws.String("with attributes"), MessageAttributes: attrs,
		MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)}},
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	m := receiveN(t, b, q, 1)[0]
	if len(m.MessageAttributes) != len(attrs) {
		t.Fatalf("received %d attributes, want %d: %v", len(m.MessageAttributes), len(attrs), m.MessageAttributes)
	}
	for k, want := range attrs {
		got := m.MessageAttributes[k]
		if aws.ToString(got.DataType) != aws.ToString(want.DataType) || aws.ToString(got.StringValue) != aws.ToString(want.StringValue) || string(got.BinaryValue) != string(want.BinaryValue) {
			t.Errorf("attribute %s = %s/%q/%v, want %s/%q/%v", k, aws.ToString(got.DataType), aws.ToString(got.StringValue), got.BinaryValue, aws.ToString(want.DataType), aws.ToString(want.StringValue), want.BinaryValue)
		}
	}
	if aws.ToString(m.MD5OfMessageAttributes) == "" || aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) {
		t.Errorf("MD5OfMessageAttributes received %q, sent %q; want equal and set", aws.ToString(m.MD5OfMessageAttributes), aws.ToString(sent.MD5OfMessageAttributes))
	}
	if got := m.Attributes["AWSTraceHeader"]; got != trace {
		t.Errorf("AWSTraceHeader = %q, want %q", got, trace)
	}
	// Selecting attributes by name.
	changeVisibility(t, b, q, m, 0)
	out, err := b.SQS.ReceiveMessage(ctxFor(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), WaitTimeSeconds: 1, MessageAttributeNames: []string{"count", "blob"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("ReceiveMessage with selected attributes = %+v, %v", out, err)
	}
	got := out.Messages[0].MessageAttributes
	if len(got) != 2 || got["count"].DataType == nil || got["blob"].DataType == nil {
		t.Errorf("selected attributes = %v, want count and blob", keys(got))
	}
}

func testQueueCounts(t *testing.T, b Backend) {
	q := createQueue(t, b, "counts", nil)
	for i := range 3 {
		send(t, b, q, fmt.Sprint(i))
	}
	receiveN(t, b, q, 1)
	a := queueAttrs(t, b, q)
	if a["ApproximateNumberOfMessages"] != "2" || a["ApproximateNumberOfMessagesNotVisible"] != "1" || a["ApproximateNumberOfMessagesDelayed"] != "0" {
		t.Errorf("visible=%s notVisible=%s delayed=%s, want 2, 1, 0", a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"])
	}
	if a["QueueArn"] != q.arn || a["VisibilityTimeout"] != "30" {
		t.Errorf("QueueArn=%s VisibilityTimeout=%s, want %s and the default 30", a["QueueArn"], a["VisibilityTimeout"], q.arn)
	}
}

func testPurge(t *testing.T, b Backend) {
	q := createQueue(t, b, "purge", nil)
	send(t, b, q, "a")
	send(t, b, q, "b")
	if _, err := b.SQS.PurgeQueue(ctxFor(t), &sqs.PurgeQueueInput{QueueUrl: aws.String(q.url)}); err != nil {
		t.Fatalf("PurgeQueue: %v", err)
	}
	expectNone(t, b, q, "after PurgeQueue")
}

func testMoveTask(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	dlq := createQueue(t, b, "move-dlq", nil)
	src := createQueue(t, b, "move-src", map[string]string{"RedrivePolicy": redrivePolicy(dlq.arn, 1)})
	dead := deadLetter(t, b, src, dlq, 1, "redrive me", nil)
	changeVisibility(t, b, dlq, dead, 0)
	if _, err := b.SQS.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlq.arn)}); err != nil {
		t.Fatalf("StartMessageMoveTask: %v", err)
	}
	deadline := time.Now().Add(wait)
	for {
		out, err := b.SQS.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlq.arn)})
		if err != nil {
			t.Fatalf("ListMessageMoveTasks: %v", err)
		}
		if len(out.Results) > 0 && aws.ToString(out.Results[0].Status) == "COMPLETED" {
			if out.Results[0].ApproximateNumberOfMessagesMoved != 1 {
				t.Errorf("ApproximateNumberOfMessagesMoved = %d, want 1", out.Results[0].ApproximateNumberOfMessagesMoved)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("move task not COMPLETED within %v: %+v", wait, out.Results)
		}
		time.Sleep(200 * time.Millisecond)
	}
	back := receiveN(t, b, src, 1)[0]
	if aws.ToString(back.Body) != "redrive me" {
		t.Fatalf("source queue received %q, want the redriven message", aws.ToString(back.Body))
	}
	if n := receiveCount(t, back); n != 1 {
		t.Errorf("ApproximateReceiveCount after redrive = %d, want 1 (reset)", n)
	}
}

// --- EventBridge cases -------------------------------------------------------

type busRef struct{ name string }

func createBus(t *testing.T, b Backend, name string) busRef {
	t.Helper()
	if _, err := b.EventBridge.CreateEventBus(ctxFor(t), &eventbridge.CreateEventBusInput{Name: aws.String(name)}); err != nil {
		t.Fatalf("CreateEventBus(%s): %v", name, err)
	}
	return busRef{name: name}
}

func putRule(t *testing.T, b Backend, bus busRef, name, pattern string, state ebtypes.RuleState, targets ...string) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := b.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventBusName: aws.String(bus.name), EventPattern: aws.String(pattern), State: state}); err != nil {
		t.Fatalf("PutRule(%s, %s): %v", name, pattern, err)
	}
	var ts []ebtypes.Target
	for i, arn := range targets {
		ts = append(ts, ebtypes.Target{Id: aws.String(fmt.Sprintf("t%d", i)), Arn: aws.String(arn)})
	}
	out, err := b.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), EventBusName: aws.String(bus.name), Targets: ts})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("PutTargets(%s) = %+v, %v", name, out, err)
	}
}

func putEvents(t *testing.T, b Backend, entries ...ebtypes.PutEventsRequestEntry) *eventbridge.PutEventsOutput {
	t.Helper()
	out, err := b.EventBridge.PutEvents(ctxFor(t), &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	return out
}

// deliveredEvent is the EventBridge event a rule target receives.
type deliveredEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// testLinegateRouting: linegate's bus rules. Events without a chat go to
// the background queue; events with one do not (the webhook sends them to
// the chat queue itself). An "all" rule stands in for a user's own rule.
func testLinegateRouting(t *testing.T, b Backend) {
	bus := createBus(t, b, "linegate")
	all := createQueue(t, b, "all", nil)
	background := createQueue(t, b, "background", nil)
	putRule(t, b, bus, "all", `{"source":["line.webhook"]}`, ebtypes.RuleStateEnabled, all.arn)
	putRule(t, b, bus, "background", `{"source":["line.webhook"],"detail":{"chat":[{"exists":false}]}}`, ebtypes.RuleStateEnabled, background.arn)

	detail := func(typ string) string {
		chat := ""
		if typ == "message" || typ == "follow" {
			chat = `"chat":"U0456",`
		}
		return fmt.Sprintf(`{"destination":"U0123","receivedAt":"2024-01-01T00:00:00.123456789Z",%s"event":{"type":%q,"webhookEventId":"01H-%s","text":"日本語 \"quoted\""}}`, chat, typ, typ)
	}
	var entries []ebtypes.PutEventsRequestEntry
	for _, typ := range []string{"message", "follow", "activated", "botSuspended"} {
		entries = append(entries, ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus.name), Source: aws.String("line.webhook"), DetailType: aws.String(typ), Detail: aws.String(detail(typ))})
	}
	out := putEvents(t, b, entries...)
	if out.FailedEntryCount != 0 {
		t.Fatalf("PutEvents FailedEntryCount = %d: %+v", out.FailedEntryCount, out.Entries)
	}
	ids := map[string]string{}
	for i, e := range out.Entries {
		ids[*entries[i].DetailType] = aws.ToString(e.EventId)
	}
	for q, want := range map[queueRef][]string{all: {"message", "follow", "activated", "botSuspended"}, background: {"activated", "botSuspended"}} {
		got := map[string]bool{}
		for _, m := range receiveN(t, b, q, len(want)) {
			var ev deliveredEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("body is not an EventBridge event: %v", err)
			}
			got[ev.DetailType] = true
			if ev.Source != "line.webhook" || ev.ID != ids[ev.DetailType] {
				t.Errorf("event source %q id %q; want line.webhook and the PutEvents EventId %s", ev.Source, ev.ID, ids[ev.DetailType])
			}
			if !jsonEqual(ev.Detail, []byte(detail(ev.DetailType))) {
				t.Errorf("detail = %s, want %s", ev.Detail, detail(ev.DetailType))
			}
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("queue %s got %v, want %v", q.url, got, want)
			}
		}
		expectNone(t, b, q, "no other event is routed here")
	}
}

// --- SQS FIFO cases ----------------------------------------------------------

func createFIFO(t *testing.T, b Backend, name string, attrs map[string]string) queueRef {
	t.Helper()
	all := map[string]string{"FifoQueue": "true"}
	for k, v := range attrs {
		all[k] = v
	}
	return createQueue(t, b, name+".fifo", all)
}

func sendFIFO(t *testing.T, b Backend, q queueRef, group, dedup, body string) *sqs.SendMessageOutput {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(body), MessageGroupId: aws.String(group)}
	if dedup != "" {
		in.MessageDeduplicationId = aws.String(dedup)
	}
	out, err := b.SQS.SendMessage(ctxFor(t), in)
	if err != nil {
		t.Fatalf("SendMessage(%s/%s): %v", group, dedup, err)
	}
	return out
}

// sendEach sends each body to group, deduplicated by the body itself.
func sendEach(t *testing.T, b Backend, q queueRef, group string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		sendFIFO(t, b, q, group, body, body)
	}
}

func bodies(msgs []sqstypes.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

// testFIFOOrder: a batch of two groups' messages comes back in send order
// per group, with the FIFO attributes.
func testFIFOOrder(t *testing.T, b Backend) { fifoOrder(t, b, false) }

// testFIFOSequence: SequenceNumber increases within a group, as documented
// ("continues to increase for a particular MessageGroupId").
func testFIFOSequence(t *testing.T, b Backend) { fifoOrder(t, b, true) }

func fifoOrder(t *testing.T, b Backend, checkSequence bool) {
	q := createFIFO(t, b, "order", map[string]string{"VisibilityTimeout": "30"})
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 6 {
		g := []string{"A", "B"}[i%2]
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint(g, i)),
			MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(fmt.Sprint("d", i))})
	}
	out, err := b.SQS.SendMessageBatch(ctxFor(t), &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil || len(out.Successful) != 6 {
		t.Fatalf("SendMessageBatch = %+v, %v", out, err)
	}
	for _, r := range out.Successful {
		if aws.ToString(r.SequenceNumber) == "" {
			t.Errorf("entry %s has no SequenceNumber", aws.ToString(r.Id))
		}
	}
	got := map[string][]string{}
	seq := map[string]string{}
	for _, m := range receiveN(t, b, q, 6) {
		g, s := m.Attributes["MessageGroupId"], m.Attributes["SequenceNumber"]
		if g == "" || s == "" || m.Attributes["MessageDeduplicationId"] == "" {
			t.Fatalf("FIFO attributes missing: %v", m.Attributes)
		}
		if checkSequence && (len(s) < len(seq[g]) || len(s) == len(seq[g]) && s <= seq[g]) {
			t.Errorf("group %s: SequenceNumber %s after %s", g, s, seq[g])
		}
		seq[g] = s
		got[g] = append(got[g], aws.ToString(m.Body))
	}
	if fmt.Sprint(got["A"]) != "[A0 A2 A4]" || fmt.Sprint(got["B"]) != "[B1 B3 B5]" {
		t.Fatalf("received %v: each group in send order", got)
	}
}

// testFIFOGroupLock: while a group's message is in flight none of the group
// after it is returned; another group is. Deleting it releases the next.
func testFIFOGroupLock(t *testing.T, b Backend) {
	q := createFIFO(t, b, "lock", map[string]string{"VisibilityTimeout": "30"})
	sendEach(t, b, q, "A", "a1", "a2")
	sendEach(t, b, q, "B", "b1")
	first := receiveNow(t, b, q, 1)
	if len(first) != 1 || aws.ToString(first[0].Body) != "a1" {
		t.Fatalf("first receive %v, want a1", bodies(first))
	}
	if got := bodies(receiveN(t, b, q, 1)); fmt.Sprint(got) != "[b1]" {
		t.Fatalf("with a1 in flight received %v, want b1 only", got)
	}
	expectNone(t, b, q, "a2 waits while a1 is in flight")
	if _, err := b.SQS.DeleteMessage(ctxFor(t), &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if got := bodies(receiveN(t, b, q, 1)); fmt.Sprint(got) != "[a2]" {
		t.Fatalf("after deleting a1 received %v, want a2", got)
	}
}

// testFIFOExclusive: with several consumers long-polling at once (as an
// event source mapping's pollers do), no two messages of a group are ever
// in flight together, and each group is consumed in send order.
func testFIFOExclusive(t *testing.T, b Backend) {
	q := createFIFO(t, b, "exclusive", map[string]string{"VisibilityTimeout": "60"})
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	var mu sync.Mutex
	got := map[string][]string{}
	inFlight := map[string]int{}
	var problems []string
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				out, err := b.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 1, WaitTimeSeconds: 1,
					MessageSystemAttributeNames: allAttrs})
				if err != nil || len(out.Messages) == 0 {
					continue
				}
				m := out.Messages[0]
				g := m.Attributes["MessageGroupId"]
				mu.Lock()
				if inFlight[g]++; inFlight[g] > 1 {
					problems = append(problems, fmt.Sprintf("%s received while another of group %s was in flight", aws.ToString(m.Body), g))
				}
				got[g] = append(got[g], aws.ToString(m.Body))
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // the handler's work
				mu.Lock()
				inFlight[g]--
				mu.Unlock()
				if _, err := b.SQS.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
					mu.Lock()
					problems = append(problems, "delete: "+err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the consumers are polling
	want := map[string][]string{}
	for g := range 4 {
		group := fmt.Sprint("g", g)
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := range 10 {
			body := fmt.Sprintf("%s-%d", group, i)
			want[group] = append(want[group], body)
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body),
				MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(body)})
		}
		if _, err := b.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries}); err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		mu.Lock()
		done := fmt.Sprint(got) == fmt.Sprint(want)
		n := 0
		for _, l := range got {
			n += len(l)
		}
		mu.Unlock()
		if done || n >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if len(problems) > 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumed %v\nwant %v\n%s", got, want, strings.Join(problems, "\n"))
	}
}

// testFIFOFollowerWaits: the worker's failure path. The failed message is
// hidden for a retry delay, the one after it made visible at once: nothing
// of the group comes until the failed one reappears, then both, in order.
func testFIFOFollowerWaits(t *testing.T, b Backend) {
	q := createFIFO(t, b, "follow", map[string]string{"VisibilityTimeout": "30"})
	sendEach(t, b, q, "A", "a1", "a2")
	got := receiveN(t, b, q, 2)
	if fmt.Sprint(bodies(got)) != "[a1 a2]" {
		t.Fatalf("received %v, want a1 a2", bodies(got))
	}
	changeVisibility(t, b, q, got[0], 2)
	changeVisibility(t, b, q, got[1], 0)
	expectNone(t, b, q, "a2 waits behind a1's retry delay")
	b.Sleep(2500 * time.Millisecond)
	again := receiveN(t, b, q, 2)
	if fmt.Sprint(bodies(again)) != "[a1 a2]" || receiveCount(t, again[0]) != 2 {
		t.Fatalf("after a1's delay received %v, want a1 (receive 2) then a2", bodies(again))
	}
}

// testFIFODedup: a deduplication id sent again within the interval is
// accepted and not delivered again; content-based deduplication hashes the
// body.
func testFIFODedup(t *testing.T, b Backend) {
	q := createFIFO(t, b, "dedup", nil)
	first := sendFIFO(t, b, q, "A", "same", "one")
	again := sendFIFO(t, b, q, "A", "same", "two")
	if aws.ToString(first.SequenceNumber) == "" || aws.ToString(again.MessageId) == "" {
		t.Fatalf("sends: %+v %+v", first, again)
	}
	if got := bodies(receiveN(t, b, q, 1)); fmt.Sprint(got) != "[one]" {
		t.Fatalf("received %v, want one", got)
	}
	expectNone(t, b, q, "the duplicate send is not delivered")
	c := createFIFO(t, b, "content", map[string]string{"ContentBasedDeduplication": "true"})
	sendFIFO(t, b, c, "A", "", "body")
	sendFIFO(t, b, c, "A", "", "body")
	m := receiveN(t, b, c, 1)
	if len(m[0].Attributes["MessageDeduplicationId"]) == 0 {
		t.Errorf("content-based deduplication id missing: %v", m[0].Attributes)
	}
	expectNone(t, b, c, "the same content is delivered once")
}

// testFIFORequired: a FIFO message needs a group, and a deduplication id
// unless the queue deduplicates by content.
func testFIFORequired(t *testing.T, b Backend) {
	q := createFIFO(t, b, "required", nil)
	_, err := b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	if code := ErrorCode(err); code != "MissingParameter" {
		t.Errorf("no MessageGroupId: %v, want MissingParameter", err)
	}
	_, err = b.SQS.SendMessage(ctxFor(t), &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String("x"), MessageGroupId: aws.String("A")})
	if code := ErrorCode(err); code != "InvalidParameterValue" {
		t.Errorf("no MessageDeduplicationId: %v, want InvalidParameterValue", err)
	}
}

// testFIFORedrive: past maxReceiveCount a FIFO message moves to its FIFO
// DLQ with its group; the group's next message follows in the same receive.
func testFIFORedrive(t *testing.T, b Backend) {
	dlq := createFIFO(t, b, "fdlq", nil)
	q := createFIFO(t, b, "fsrc", map[string]string{"RedrivePolicy": redrivePolicy(dlq.arn, 1), "VisibilityTimeout": "30"})
	sendEach(t, b, q, "A", "a1", "a2")
	first := receiveNow(t, b, q, 1)
	if fmt.Sprint(bodies(first)) != "[a1]" {
		t.Fatalf("first receive %v", bodies(first))
	}
	changeVisibility(t, b, q, first[0], 0)
	if got := bodies(receiveN(t, b, q, 1)); fmt.Sprint(got) != "[a2]" {
		t.Fatalf("past maxReceiveCount received %v, want a2 (a1 moved to the DLQ)", got)
	}
	d := receiveN(t, b, dlq, 1)[0]
	if aws.ToString(d.Body) != "a1" || d.Attributes["MessageGroupId"] != "A" {
		t.Fatalf("DLQ holds %q in group %q, want a1 in A", aws.ToString(d.Body), d.Attributes["MessageGroupId"])
	}
}

// testFIFOTarget: an EventBridge rule's FIFO queue target puts every event
// in the target's message group (the queue deduplicates by content).
func testFIFOTarget(t *testing.T, b Backend) {
	bus := createBus(t, b, "fifo")
	q := createFIFO(t, b, "replays", map[string]string{"ContentBasedDeduplication": "true"})
	ctx := ctxFor(t)
	if _, err := b.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventBusName: aws.String(bus.name), EventPattern: aws.String(`{"source":["app"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), EventBusName: aws.String(bus.name), Targets: []ebtypes.Target{
		{Id: aws.String("q"), Arn: aws.String(q.arn), SqsParameters: &ebtypes.SqsParameters{MessageGroupId: aws.String("replay")}}}}); err != nil {
		t.Fatal(err)
	}
	putEvents(t, b, ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus.name), Source: aws.String("app"), DetailType: aws.String("t"), Detail: aws.String(`{"n":1}`)})
	m := receiveN(t, b, q, 1)[0]
	if m.Attributes["MessageGroupId"] != "replay" {
		t.Fatalf("delivered with attributes %v, want MessageGroupId replay", m.Attributes)
	}
}

func testEventShape(t *testing.T, b Backend) {
	bus := createBus(t, b, "shape")
	q := createQueue(t, b, "shape", nil)
	putRule(t, b, bus, "all", `{"source":["app"]}`, ebtypes.RuleStateEnabled, q.arn)
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	out := putEvents(t, b, ebtypes.PutEventsRequestEntry{
		EventBusName: aws.String(bus.name), Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{"k":1}`),
		Resources: []string{"arn:aws:sqs:us-east-1:123456789012:r"}, Time: &at,
	})
	var ev deliveredEvent
	if err := json.Unmarshal([]byte(aws.ToString(receiveN(t, b, q, 1)[0].Body)), &ev); err != nil {
		t.Fatalf("body is not an EventBridge event: %v", err)
	}
	want := deliveredEvent{Version: "0", ID: aws.ToString(out.Entries[0].EventId), DetailType: "x", Source: "app", Account: ev.Account, Time: "2024-05-06T07:08:09Z", Region: ev.Region, Resources: []string{"arn:aws:sqs:us-east-1:123456789012:r"}, Detail: ev.Detail}
	if fmt.Sprint(ev) != fmt.Sprint(want) || len(ev.Account) != 12 || !strings.Contains(q.arn, ":"+ev.Region+":"+ev.Account+":") {
		t.Errorf("event = %+v\nwant    %+v with the queue's 12-digit account and region (%s)", ev, want, q.arn)
	}
}

func testDisabledRule(t *testing.T, b Backend) {
	bus := createBus(t, b, "disabled")
	on := createQueue(t, b, "on", nil)
	off := createQueue(t, b, "off", nil)
	putRule(t, b, bus, "on", `{"source":["app"]}`, ebtypes.RuleStateEnabled, on.arn)
	putRule(t, b, bus, "off", `{"source":["app"]}`, ebtypes.RuleStateDisabled, off.arn)
	putEvents(t, b, ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus.name), Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{}`)})
	receiveN(t, b, on, 1)
	expectNone(t, b, off, "a DISABLED rule delivers nothing")
	d, err := b.EventBridge.DescribeRule(ctxFor(t), &eventbridge.DescribeRuleInput{Name: aws.String("off"), EventBusName: aws.String(bus.name)})
	if err != nil || d.State != ebtypes.RuleStateDisabled || aws.ToString(d.EventPattern) == "" {
		t.Errorf("DescribeRule(off) = %+v, %v; want DISABLED with its pattern", d, err)
	}
	lt, err := b.EventBridge.ListTargetsByRule(ctxFor(t), &eventbridge.ListTargetsByRuleInput{Rule: aws.String("off"), EventBusName: aws.String(bus.name)})
	if err != nil || len(lt.Targets) != 1 || aws.ToString(lt.Targets[0].Arn) != off.arn {
		t.Errorf("ListTargetsByRule(off) = %+v, %v; want the one queue target", lt, err)
	}
}

func testPerEntryErrors(t *testing.T, b Backend) {
	bus := createBus(t, b, "entries")
	q := createQueue(t, b, "entries", nil)
	putRule(t, b, bus, "all", `{"source":["app"]}`, ebtypes.RuleStateEnabled, q.arn)
	e := func(source, detailType, detail *string) ebtypes.PutEventsRequestEntry {
		return ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus.name), Source: source, DetailType: detailType, Detail: detail}
	}
	s := aws.String
	out := putEvents(t, b,
		e(s("app"), s("ok"), s(`{"n":1}`)),
		e(nil, s("x"), s(`{}`)),
		e(s("app"), nil, s(`{}`)),
		e(s("app"), s("x"), s(`{"broken":`)),
	)
	want := []string{"", "InvalidArgument", "InvalidArgument", "MalformedDetail"}
	if out.FailedEntryCount != 3 || len(out.Entries) != len(want) {
		t.Fatalf("FailedEntryCount = %d with %d entries, want 3 of 4: %+v", out.FailedEntryCount, len(out.Entries), out.Entries)
	}
	for i, w := range want {
		got := out.Entries[i]
		if aws.ToString(got.ErrorCode) != w {
			t.Errorf("entry %d ErrorCode = %q, want %q", i, aws.ToString(got.ErrorCode), w)
		}
		if (w == "") != (aws.ToString(got.EventId) != "") {
			t.Errorf("entry %d EventId = %q; only accepted entries have one", i, aws.ToString(got.EventId))
		}
		if w != "" && aws.ToString(got.ErrorMessage) == "" {
			t.Errorf("entry %d has no ErrorMessage", i)
		}
	}
	var ev deliveredEvent
	if m := receiveN(t, b, q, 1)[0]; json.Unmarshal([]byte(aws.ToString(m.Body)), &ev) != nil || ev.DetailType != "ok" {
		t.Errorf("delivered %s, want only the valid entry", aws.ToString(m.Body))
	}
	expectNone(t, b, q, "rejected entries are not delivered")
}

func testDetailMustBeObject(t *testing.T, b Backend) {
	for _, detail := range []string{`[1,2]`, `"text"`, `42`} {
		out := putEvents(t, b, ebtypes.PutEventsRequestEntry{Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(detail)})
		if out.FailedEntryCount != 1 || aws.ToString(out.Entries[0].ErrorCode) != "MalformedDetail" {
			t.Errorf("Detail %s: FailedEntryCount %d code %q, want MalformedDetail (Detail must be a JSON object)", detail, out.FailedEntryCount, aws.ToString(out.Entries[0].ErrorCode))
		}
	}
}

func testOverTenEntries(t *testing.T, b Backend) {
	var entries []ebtypes.PutEventsRequestEntry
	for range 11 {
		entries = append(entries, ebtypes.PutEventsRequestEntry{Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{}`)})
	}
	_, err := b.EventBridge.PutEvents(ctxFor(t), &eventbridge.PutEventsInput{Entries: entries})
	if code := ErrorCode(err); code != "ValidationException" {
		t.Fatalf("PutEvents(11 entries) = %v (code %q), want ValidationException", err, code)
	}
}

func testOverSize(t *testing.T, b Backend) {
	big := `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	_, err := b.EventBridge.PutEvents(ctxFor(t), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(big)}}})
	if err == nil {
		t.Fatalf("PutEvents with a 1 MB detail succeeded; the total entry size must be under 1 MB")
	}
}

func testTraceHeader(t *testing.T, b Backend) {
	bus := createBus(t, b, "traced")
	q := createQueue(t, b, "traced", nil)
	putRule(t, b, bus, "all", `{"source":["app"]}`, ebtypes.RuleStateEnabled, q.arn)
	trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	putEvents(t, b, ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus.name), Source: aws.String("app"), DetailType: aws.String("x"), Detail: aws.String(`{}`), TraceHeader: aws.String(trace)})
	if got := receiveN(t, b, q, 1)[0].Attributes["AWSTraceHeader"]; got != trace {
		t.Errorf("AWSTraceHeader = %q, want the entry's TraceHeader %q", got, trace)
	}
}

// --- SNS cases ---------------------------------------------------------------

func subscribeQueue(t *testing.T, b Backend, name string, raw bool) (topicArn string, q queueRef) {
	t.Helper()
	ctx := ctxFor(t)
	tp, err := b.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	q = createQueue(t, b, name+"-sub", nil)
	in := &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(q.arn)}
	if raw {
		in.Attributes = map[string]string{"RawMessageDelivery": "true"}
	}
	if _, err := b.SNS.Subscribe(ctx, in); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return *tp.TopicArn, q
}

func testSNSNotification(t *testing.T, b Backend) {
	topicArn, q := subscribeQueue(t, b, "ops", false)
	if !strings.HasPrefix(topicArn, "arn:aws:sns:") || !strings.HasSuffix(topicArn, ":ops") {
		t.Errorf("TopicArn = %q, want arn:aws:sns:REGION:ACCOUNT:ops", topicArn)
	}
	pub, err := b.SNS.Publish(ctxFor(t), &sns.PublishInput{
		TopicArn: aws.String(topicArn), Message: aws.String(`{"AlarmName":"dlq-depth"}`), Subject: aws.String("ALARM"),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("alarm")}},
	})
	if err != nil || aws.ToString(pub.MessageId) == "" {
		t.Fatalf("Publish = %+v, %v", pub, err)
	}
	// SignatureVersion is "1" by default on AWS and "2" when the topic asks
	// for SHA256 signatures; consumers must accept both.
	var n struct {
		Type, MessageId, TopicArn, Subject, Message, Timestamp, SignatureVersion string
		MessageAttributes                                                        map[string]struct{ Type, Value string }
	}
	body := aws.ToString(receiveN(t, b, q, 1)[0].Body)
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		t.Fatalf("body is not an SNS notification: %v\n%s", err, body)
	}
	if n.Type != "Notification" || n.MessageId != aws.ToString(pub.MessageId) || n.TopicArn != topicArn || n.Subject != "ALARM" || n.Message != `{"AlarmName":"dlq-depth"}` || (n.SignatureVersion != "1" && n.SignatureVersion != "2") {
		t.Errorf("notification = %+v", n)
	}
	if _, err := time.Parse(time.RFC3339Nano, n.Timestamp); err != nil {
		t.Errorf("Timestamp %q: %v", n.Timestamp, err)
	}
	if a := n.MessageAttributes["kind"]; a.Type != "String" || a.Value != "alarm" {
		t.Errorf("MessageAttributes = %+v, want kind String alarm", n.MessageAttributes)
	}
}

func testSNSRaw(t *testing.T, b Backend) {
	topicArn, q := subscribeQueue(t, b, "raw", true)
	if _, err := b.SNS.Publish(ctxFor(t), &sns.PublishInput{
		TopicArn: aws.String(topicArn), Message: aws.String("plain"),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("crash")}},
	}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	m := receiveN(t, b, q, 1)[0]
	if aws.ToString(m.Body) != "plain" {
		t.Errorf("raw body = %q, want plain", aws.ToString(m.Body))
	}
	if got := m.MessageAttributes["kind"]; aws.ToString(got.StringValue) != "crash" {
		t.Errorf("raw delivery attributes = %v, want kind=crash", m.MessageAttributes)
	}
}

func testSNSMissingTopic(t *testing.T, b Backend) {
	tp, err := b.SNS.CreateTopic(ctxFor(t), &sns.CreateTopicInput{Name: aws.String("exists")})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	missing := strings.TrimSuffix(*tp.TopicArn, "exists") + "missing"
	_, err = b.SNS.Publish(ctxFor(t), &sns.PublishInput{TopicArn: aws.String(missing), Message: aws.String("x")})
	var nf *snstypes.NotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("Publish to a missing topic = %v, want NotFoundException", err)
	}
}

// --- Pattern cases -----------------------------------------------------------

// runPatterns checks every documented example end to end. Each example gets
// its own bus with two rules: the example's pattern routing to a queue, and
// a catch-all routing to a sentinel queue. All events are published in
// batches of 10 (one PutEvents per batch keeps slow backends fast); once a
// sentinel has its event, the example's queue must hold it exactly when the
// example says the pattern matches.
//
// Every example's setup, and every PutEvents batch, has a deadline of its
// own: on a slow backend (moto on a loaded machine) the setup of 85
// examples takes long, and one deadline shared by all of it failed the
// later examples for the time the earlier ones took.
func (s *suite) runPatterns(t *testing.T) {
	b := s.backend(t)
	type row struct {
		ex          patterntest.Example
		detail      json.RawMessage
		q, sentinel queueRef
		entry       ebtypes.PutEventsRequestEntry
		err         error
	}
	var rows []*row
	for i, ex := range patterntest.Examples {
		r := &row{ex: ex}
		rows = append(rows, r)
		if s.divergence("Pattern/"+ex.Name) != nil {
			continue
		}
		r.err = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), callWait)
			defer cancel()
			var ev deliveredEvent
			if err := json.Unmarshal([]byte(ex.Event), &ev); err != nil {
				return fmt.Errorf("example event: %w", err)
			}
			r.detail = ev.Detail
			name := fmt.Sprintf("p%d", i)
			if _, err := b.EventBridge.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)}); err != nil {
				return fmt.Errorf("CreateEventBus: %w", err)
			}
			var err error
			if r.q, err = tryCreateQueue(ctx, b, name); err != nil {
				return err
			}
			if r.sentinel, err = tryCreateQueue(ctx, b, name+"-all"); err != nil {
				return err
			}
			if err := tryPutRule(ctx, b, name, "pattern", ex.Pattern, r.q.arn); err != nil {
				return err
			}
			if err := tryPutRule(ctx, b, name, "all", fmt.Sprintf(`{"source":[%q]}`, ev.Source), r.sentinel.arn); err != nil {
				return err
			}
			r.entry = ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(name), Source: aws.String(ev.Source), DetailType: aws.String(ev.DetailType),
				Detail: aws.String(string(ev.Detail)), Resources: ev.Resources,
			}
			return nil
		}()
	}
	var batch []*row
	flush := func() {
		if len(batch) == 0 {
			return
		}
		entries := make([]ebtypes.PutEventsRequestEntry, len(batch))
		for i, r := range batch {
			entries[i] = r.entry
		}
		ctx, cancel := context.WithTimeout(context.Background(), callWait)
		out, err := b.EventBridge.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		cancel()
		for i, r := range batch {
			switch {
			case err != nil:
				r.err = fmt.Errorf("PutEvents: %w", err)
			case aws.ToString(out.Entries[i].ErrorCode) != "":
				r.err = fmt.Errorf("PutEvents rejected the entry: %s %s", aws.ToString(out.Entries[i].ErrorCode), aws.ToString(out.Entries[i].ErrorMessage))
			}
		}
		batch = batch[:0]
	}
	for _, r := range rows {
		if r.err == nil && r.entry.Source != nil {
			if batch = append(batch, r); len(batch) == 10 {
				flush()
			}
		}
	}
	flush()

	for _, r := range rows {
		t.Run(r.ex.Name, func(t *testing.T) {
			if s.skipDivergent(t, "Pattern/"+r.ex.Name) {
				return
			}
			if r.err != nil {
				t.Fatalf("setting up the example: %v (pattern %s)", r.err, r.ex.Pattern)
			}
			receiveN(t, b, r.sentinel, 1)
			msgs := receiveNow(t, b, r.q, 10)
			if got := len(msgs) == 1; got != r.ex.Want || len(msgs) > 1 {
				t.Fatalf("pattern delivered %d events, want match=%v\npattern: %s\nevent:   %s\ndoc:     %s", len(msgs), r.ex.Want, r.ex.Pattern, r.ex.Event, r.ex.Doc)
			}
			if r.ex.Want {
				var got deliveredEvent
				if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &got); err != nil || !jsonEqual(got.Detail, r.detail) {
					t.Errorf("delivered detail %s (%v), want %s", got.Detail, err, r.detail)
				}
			}
		})
	}
}

func tryCreateQueue(ctx context.Context, b Backend, name string) (queueRef, error) {
	out, err := b.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return queueRef{}, fmt.Errorf("CreateQueue(%s): %w", name, err)
	}
	at, err := b.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return queueRef{}, fmt.Errorf("GetQueueAttributes(%s): %w", name, err)
	}
	return queueRef{url: *out.QueueUrl, arn: at.Attributes["QueueArn"]}, nil
}

func tryPutRule(ctx context.Context, b Backend, bus, name, pattern, target string) error {
	if _, err := b.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventBusName: aws.String(bus), EventPattern: aws.String(pattern)}); err != nil {
		return fmt.Errorf("PutRule(%s): %w", name, err)
	}
	out, err := b.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), EventBusName: aws.String(bus), Targets: []ebtypes.Target{{Id: aws.String("t"), Arn: aws.String(target)}}})
	if err != nil {
		return fmt.Errorf("PutTargets(%s): %w", name, err)
	}
	if out.FailedEntryCount != 0 {
		return fmt.Errorf("PutTargets(%s): %d failed entries", name, out.FailedEntryCount)
	}
	return nil
}

// runInvalidPatterns checks PutRule rejects every documented invalid pattern.
func (s *suite) runInvalidPatterns(t *testing.T) {
	b := s.backend(t)
	for _, in := range patterntest.InvalidPatterns {
		path := "PatternInvalid/" + in.Name
		t.Run(in.Name, func(t *testing.T) {
			if s.skipDivergent(t, path) {
				return
			}
			_, err := b.EventBridge.PutRule(ctxFor(t), &eventbridge.PutRuleInput{Name: aws.String("invalid-" + strings.ReplaceAll(in.Name, "_", "-")), EventPattern: aws.String(in.Pattern)})
			var iep *ebtypes.InvalidEventPatternException
			if !errors.As(err, &iep) {
				t.Fatalf("PutRule(%s) = %v, want InvalidEventPatternException (%s)", in.Pattern, err, in.Doc)
			}
		})
	}
}
