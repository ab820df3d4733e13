package mem_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/testclock"
)

// persisted starts a cloud on the state directory dir with the queues a
// chat pipeline has: a FIFO queue redriving to a FIFO DLQ after 2
// receives, and a standard queue fed by a bus rule.
func persisted(t *testing.T, dir string, clk *testclock.Clock) (c *mem.Cloud, fifoURL, stdURL string, closeAll func()) {
	t.Helper()
	st, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c = mem.New(mem.WithClock(clk.Now))
	if err := c.Persist(st); err != nil {
		t.Fatal(err)
	}
	_, dlqArn := createQueue(t, c, "chat-dlq.fifo", map[string]string{"FifoQueue": "true"})
	fifoURL, _ = createQueue(t, c, "chat.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30",
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":2}`})
	stdURL, stdArn := createQueue(t, c, "work", nil)
	ctx := context.Background()
	if _, err := c.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("all"), EventPattern: aws.String(`{"source":["test"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("all"), Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(stdArn)}}}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeAll = func() { once.Do(func() { _ = c.Close(); _ = st.Close() }) }
	t.Cleanup(closeAll)
	return c, fifoURL, stdURL, closeAll
}

func sendFIFO(t *testing.T, c *mem.Cloud, url, group, dedup string) *sqs.SendMessageOutput {
	t.Helper()
	out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(dedup),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func receiveAll(t *testing.T, c *mem.Cloud, url string) []sqstypes.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

// What the SQS API acknowledged before a restart is there after it, as
// AWS keeps it: messages sent directly and through a bus rule, a FIFO
// group still locked by its in-flight message until the visibility timeout
// ends, then received again with its receive count, its deduplication id
// still dropping a resend within five minutes, sequence numbers still
// increasing, and a deleted message gone.
func TestPersistedQueuesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(t0)
	c, fifo, std, closeAll := persisted(t, dir, clk)
	ctx := context.Background()
	first := sendFIFO(t, c, fifo, "chat-1", "e1")
	sendFIFO(t, c, fifo, "chat-1", "e2")
	sendFIFO(t, c, fifo, "chat-2", "e3")
	if _, err := c.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("test"), DetailType: aws.String("t"), Detail: aws.String(`{"n":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	send(t, c, std, "direct")
	got := receiveAll(t, c, fifo) // e1, e2 (chat-1 in order), e3
	if len(got) != 3 {
		t.Fatalf("first receive: %d messages, want 3", len(got))
	}
	for _, m := range got {
		if aws.ToString(m.Body) == "e3" {
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(fifo), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeAll() // a SIGKILL'd process closes nothing; localstate's own test covers that

	c, fifo, std, _ = persisted(t, dir, clk)
	if got := receiveAll(t, c, fifo); len(got) != 0 {
		t.Fatalf("after the restart the in-flight chat-1 handed out %d messages before its visibility timeout", len(got))
	}
	clk.Advance(31 * time.Second)
	got = receiveAll(t, c, fifo)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, aws.ToString(m.Body)+"#"+m.Attributes["ApproximateReceiveCount"])
	}
	if len(bodies) != 2 || bodies[0] != "e1#2" || bodies[1] != "e2#2" {
		t.Fatalf("after the visibility timeout: %v, want [e1#2 e2#2] (e3 was deleted)", bodies)
	}
	again := sendFIFO(t, c, fifo, "chat-1", "e1")
	if aws.ToString(again.MessageId) != aws.ToString(first.MessageId) {
		t.Errorf("a resend of e1 within the deduplication window got a new message %s, want the first send's %s", aws.ToString(again.MessageId), aws.ToString(first.MessageId))
	}
	next := sendFIFO(t, c, fifo, "chat-3", "e4")
	a, _ := strconv.ParseUint(aws.ToString(first.SequenceNumber), 10, 64)
	b, _ := strconv.ParseUint(aws.ToString(next.SequenceNumber), 10, 64)
	if b <= a {
		t.Errorf("sequence number after the restart %d, not above %d", b, a)
	}
	if got := receiveAll(t, c, std); len(got) != 2 {
		t.Errorf("standard queue after the restart: %d messages, want the bus's and the direct one", len(got))
	}
}

// countingJournal records how far the cloud appended and waited.
type countingJournal struct {
	mu               sync.Mutex
	appended, waited uint64
}

func (j *countingJournal) Append(changes ...localstate.Change) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appended++
	return j.appended
}

func (j *countingJournal) Wait(_ context.Context, ticket uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.waited = max(j.waited, ticket)
	return nil
}

func (j *countingJournal) Each(string, func(k, v []byte) error) error { return nil }

// Every call that changes a queue waits for its change before returning;
// one that changes nothing appends nothing.
func TestCallsWaitForTheirChange(t *testing.T) {
	c, _ := newCloud(t)
	j := &countingJournal{}
	if err := c.Persist(j); err != nil {
		t.Fatal(err)
	}
	url, _ := createQueue(t, c, "q", nil)
	ctx := context.Background()
	check := func(what string, wantAppend bool) {
		t.Helper()
		j.mu.Lock()
		defer j.mu.Unlock()
		if wantAppend && (j.appended == 0 || j.waited != j.appended) {
			t.Errorf("%s: appended %d, waited for %d: want it to wait for its own change", what, j.appended, j.waited)
		}
	}
	send(t, c, url, "a")
	check("SendMessage", true)
	m := receiveAll(t, c, url)
	check("ReceiveMessage", true)
	before := j.appended
	if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")}); err != nil {
		t.Fatal(err)
	}
	if j.appended != before {
		t.Errorf("GetQueueUrl appended to the journal")
	}
	if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url),
		Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: m[0].ReceiptHandle}}}); err != nil {
		t.Fatal(err)
	}
	check("DeleteMessageBatch", true)
	if j.appended != before+1 {
		t.Errorf("DeleteMessageBatch appended %d times, want once", j.appended-before)
	}
}
