package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/backoff"
	"github.com/linegate/linegate/pkg/bot"
)

const (
	chatQueueARN = "arn:aws:sqs:us-east-1:000000000000:linegate-InteractiveQueue.fifo"
	chatDLQARN   = "arn:aws:sqs:us-east-1:000000000000:linegate-InteractiveDLQ.fifo"
	longQueueURL = "https://sqs.us-east-1.amazonaws.com/000000000000/linegate-LongQueue"
	longQueueARN = "arn:aws:sqs:us-east-1:000000000000:linegate-LongQueue"
)

// fakeSQS stands in for the worker's queue calls: a redrive policy per
// queue URL, and every visibility change and send recorded.
type fakeSQS struct {
	mu         sync.Mutex
	policies   map[string]string // queue URL -> RedrivePolicy
	attrCalls  int
	visibility map[string][]int32 // receipt handle -> visibility timeouts set
	sent       []*sqs.SendMessageInput
	sendErr    error
}

func newFakeSQS(maxReceives int) *fakeSQS {
	src, _ := queueURL(chatQueueARN)
	long, _ := queueURL(longQueueARN)
	return &fakeSQS{visibility: map[string][]int32{}, policies: map[string]string{
		src:  fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, chatDLQARN, maxReceives),
		long: fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:linegate-LongDLQ","maxReceiveCount":"%d"}`, maxReceives),
	}}
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attrCalls++
	p, ok := f.policies[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, errors.New("no such queue: " + aws.ToString(in.QueueUrl))
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"RedrivePolicy": p}}, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := aws.ToString(in.ReceiptHandle)
	f.visibility[h] = append(f.visibility[h], in.VisibilityTimeout)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m")}, nil
}

func (f *fakeSQS) visibilityOf(handle string) []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.visibility[handle])
}

func (f *fakeSQS) sends() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// chatMessage is a record of the FIFO chat queue: group = chat.
func chatMessage(id, chat string, receive int, text string) events.SQSMessage {
	m := message(id, receive, textEventFrom(id, chat, text))
	m.EventSourceARN = chatQueueARN
	m.ReceiptHandle = "rh-" + id
	m.Attributes["MessageGroupId"] = chat
	m.Attributes["MessageDeduplicationId"] = id
	m.Attributes["ApproximateFirstReceiveTimestamp"] = "1700000000000"
	return m
}

func textEventFrom(id, user, text string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":%d,"source":{"type":"user","userId":%q},"webhookEventId":%q,"replyToken":"rt-%s","message":{"id":"1","type":"text","quoteToken":"q","text":%q}}`,
		time.Now().UnixMilli(), user, id, id, text))
}

// scriptRouter runs every text: "fail" fails transiently, "permanent" fails
// with bot.Permanent, "block:<id>" waits until the test releases <id>;
// every start and end is logged in order.
type scriptRouter struct {
	mu      sync.Mutex
	log     []string
	release map[string]chan struct{}
	running map[string]int // per chat, records running now
	overlap bool
}

func newScriptRouter() *scriptRouter {
	return &scriptRouter{release: map[string]chan struct{}{}, running: map[string]int{}}
}

func (s *scriptRouter) gate(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release[id] == nil {
		s.release[id] = make(chan struct{})
	}
	return s.release[id]
}

func (s *scriptRouter) record(what string) {
	s.mu.Lock()
	s.log = append(s.log, what)
	s.mu.Unlock()
}

func (s *scriptRouter) entries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *scriptRouter) router() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		chat := e.Source.ChatID()
		s.mu.Lock()
		s.running[chat]++
		if s.running[chat] > 1 {
			s.overlap = true
		}
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.running[chat]--; s.mu.Unlock() }()
		s.record("start " + e.WebhookEventID)
		defer s.record("end " + e.WebhookEventID)
		switch {
		case text == "fail":
			return errors.New("transient")
		case text == "permanent":
			return bot.Permanent(errors.New("cannot ever work"))
		case strings.HasPrefix(text, "block:"):
			select {
			case <-s.gate(strings.TrimPrefix(text, "block:")):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return r
}

// Records of one chat run one after the other in batch order; chats run
// in parallel (a1 waits for b1 to start, which it could not if chats ran
// one at a time).
func TestChatsRunInOrderAndInParallel(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q), WithConcurrency(4))
	batch := events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "block:a1"), chatMessage("b1", "Ubob", 1, "x"),
		chatMessage("a2", "Ualice", 1, "x"), chatMessage("b2", "Ubob", 1, "x"), chatMessage("a3", "Ualice", 1, "x"),
	}}
	done := make(chan events.SQSEventResponse)
	go func() { resp, _ := f.proc.Handle(context.Background(), batch); done <- resp }()
	deadline := time.After(5 * time.Second)
	for !slices.Contains(s.entries(), "end b2") {
		select {
		case <-deadline:
			t.Fatalf("bob's records did not run while alice's first was blocked: %v", s.entries())
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(s.gate("a1"))
	resp := <-done
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	log := s.entries()
	order := func(ids ...string) {
		last := -1
		for _, id := range ids {
			i := slices.Index(log, "start "+id)
			if i < last {
				t.Fatalf("%s started out of order: %v", id, log)
			}
			last = slices.Index(log, "end "+id)
		}
	}
	order("a1", "a2", "a3")
	order("b1", "b2")
	if s.overlap {
		t.Fatalf("two records of one chat ran at once: %v", log)
	}
}

// The first failure of a chat stops it for the batch: its later records are
// reported failed without running and made visible at once, so they follow
// the failed one, which is hidden for its retry delay. Other chats go on.
func TestFailureStopsItsChatOnly(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q), WithRetryBackoff(backoff.Policy{First: 2 * time.Second, Max: time.Minute, Jitter: backoff.None}))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "x"), chatMessage("a2", "Ualice", 1, "fail"), chatMessage("b1", "Ubob", 1, "x"),
		chatMessage("a3", "Ualice", 1, "x"), chatMessage("a4", "Ualice", 1, "x"), chatMessage("b2", "Ubob", 1, "x"),
	}})
	if got := failedIDs(resp); !sameSet(got, []string{"a2", "a3", "a4"}) {
		t.Fatalf("failures %v, want a2 (failed) and a3, a4 (deferred)", got)
	}
	for _, id := range []string{"a3", "a4"} {
		if slices.Contains(s.entries(), "start "+id) {
			t.Fatalf("%s ran after its chat's a2 failed", id)
		}
		if v := q.visibilityOf("rh-" + id); !slices.Equal(v, []int32{0}) {
			t.Fatalf("%s visibility changes %v, want [0]", id, v)
		}
	}
	if v := q.visibilityOf("rh-a2"); !slices.Equal(v, []int32{2}) {
		t.Fatalf("a2 visibility changes %v, want its first retry delay [2]", v)
	}
	if !slices.Contains(s.entries(), "end b2") {
		t.Fatal("bob's chat was stopped by alice's failure")
	}
	outcomes := map[string]Outcome{}
	for _, r := range f.seen {
		outcomes[r.MessageID] = r.Outcome
	}
	if outcomes["a3"] != OutcomeDeferred || outcomes["a2"] != OutcomeFailed || outcomes["b2"] != OutcomeOK {
		t.Fatalf("outcomes %v", outcomes)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// What a failure becomes, by kind and receive count: a permanent failure
// and an undecodable record go to the DLQ on their first receive and are
// acknowledged; a transient failure is hidden for a delay growing with its
// receive count, and dead-lettered on its last allowed receive.
func TestFailureSettling(t *testing.T) {
	malformed := chatMessage("m1", "Ualice", 1, "x")
	malformed.Body = `{"detail":"not an envelope"}`
	tests := []struct {
		name       string
		msg        events.SQSMessage
		sendErr    error
		wantFailed bool
		wantDLQ    string // reason, "" for no dead letter
		wantVis    []int32
	}{
		{name: "permanent, first receive", msg: chatMessage("p1", "Ualice", 1, "permanent"), wantDLQ: "permanent"},
		{name: "undecodable, first receive", msg: malformed, wantDLQ: "malformed"},
		{name: "transient, receive 1", msg: chatMessage("t1", "Ualice", 1, "fail"), wantFailed: true, wantVis: []int32{2}},
		{name: "transient, receive 3", msg: chatMessage("t3", "Ualice", 3, "fail"), wantFailed: true, wantVis: []int32{8}},
		{name: "transient, receive 4", msg: chatMessage("t4", "Ualice", 4, "fail"), wantFailed: true, wantVis: []int32{16}},
		{name: "transient, last allowed receive", msg: chatMessage("t5", "Ualice", 5, "fail"), wantDLQ: "retries-exhausted"},
		{name: "permanent, dead-letter send fails: retried", msg: chatMessage("p2", "Ualice", 1, "permanent"), sendErr: errors.New("down"), wantFailed: true, wantVis: []int32{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newFakeSQS(5)
			q.sendErr = tt.sendErr
			m := &testmetrics.Recorder{}
			f := newFixture(t, newScriptRouter().router(), WithQueues(q), WithMetrics(m),
				WithRetryBackoff(backoff.Policy{First: 2 * time.Second, Max: time.Minute, Jitter: backoff.None}))
			resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{tt.msg}})
			if failed := len(resp.BatchItemFailures) == 1; failed != tt.wantFailed {
				t.Fatalf("reported failed %v, want %v", failed, tt.wantFailed)
			}
			if v := q.visibilityOf(tt.msg.ReceiptHandle); !slices.Equal(v, tt.wantVis) {
				t.Fatalf("visibility changes %v, want %v", v, tt.wantVis)
			}
			sent := q.sends()
			if tt.wantDLQ == "" {
				if len(sent) != 0 {
					t.Fatalf("sent %d dead letters, want none", len(sent))
				}
				return
			}
			if len(sent) != 1 {
				t.Fatalf("sent %d messages, want one dead letter", len(sent))
			}
			d := sent[0]
			dlq, _ := queueURL(chatDLQARN)
			if aws.ToString(d.QueueUrl) != dlq || aws.ToString(d.MessageBody) != tt.msg.Body ||
				aws.ToString(d.MessageAttributes[AttrDeadLetterReason].StringValue) != tt.wantDLQ ||
				aws.ToString(d.MessageAttributes[AttrDeadLetterSource].StringValue) != chatQueueARN {
				t.Fatalf("dead letter %+v", d)
			}
			if aws.ToString(d.MessageGroupId) != "Ualice" || aws.ToString(d.MessageDeduplicationId) != tt.msg.MessageId+"-1700000000000" {
				t.Fatalf("FIFO dead letter: group %q dedup %q", aws.ToString(d.MessageGroupId), aws.ToString(d.MessageDeduplicationId))
			}
			if aws.ToString(d.MessageSystemAttributes["AWSTraceHeader"].StringValue) == "" {
				t.Fatal("the dead letter lost its trace header")
			}
			if m.Total("RecordsDeadLettered") != 1 || f.seen[0].Outcome != OutcomeDeadLettered || f.seen[0].DeadLetterReason != tt.wantDLQ {
				t.Fatalf("metrics %v, result %+v", m.Counts(), f.seen[0])
			}
		})
	}
}

// A transient failure's receives are spaced by growing intervals: each
// delay is at least the one before, with the default equal jitter, and the
// sum until the DLQ stays within the documented half minute.
func TestRetryDelaysGrow(t *testing.T) {
	var prev, total time.Duration
	for trial := 0; trial < 200; trial++ {
		prev, total = 0, 0
		for n := 1; n < 5; n++ {
			d := time.Duration(visibilitySeconds(DefaultRetryBackoff.Delay(n))) * time.Second
			if d < prev {
				t.Fatalf("receive %d waits %v, less than receive %d's %v", n, d, n-1, prev)
			}
			prev = d
			total += d
		}
		if total > 30*time.Second || total < 15*time.Second {
			t.Fatalf("retry delays add up to %v, want 15-30 s", total)
		}
	}
}

// The redrive policy is asked of SQS once per queue, whatever the number
// of failures.
func TestRedrivePolicyIsCached(t *testing.T) {
	q := newFakeSQS(5)
	f := newFixture(t, newScriptRouter().router(), WithQueues(q))
	for i := range 5 {
		_, _ = f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{chatMessage(fmt.Sprint("f", i), "Ualice", 1, "fail")}})
	}
	if q.attrCalls != 1 {
		t.Fatalf("GetQueueAttributes called %d times, want 1", q.attrCalls)
	}
}

// Without an SQS client a failure just fails: the old contract.
func TestFailuresWithoutQueues(t *testing.T) {
	f := newFixture(t, newScriptRouter().router())
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("p", "Ualice", 1, "permanent"), chatMessage("q", "Ualice", 1, "x")}})
	if got := failedIDs(resp); !slices.Equal(got, []string{"p", "q"}) {
		t.Fatalf("failures %v, want the permanent failure and the record after it", got)
	}
}

// A permanent failure is dead-lettered and its chat goes on in the same
// batch.
func TestChatGoesOnAfterADeadLetter(t *testing.T) {
	s := newScriptRouter()
	q := newFakeSQS(5)
	f := newFixture(t, s.router(), WithQueues(q))
	resp, _ := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		chatMessage("a1", "Ualice", 1, "permanent"), chatMessage("a2", "Ualice", 1, "x")}})
	if len(resp.BatchItemFailures) != 0 || !slices.Contains(s.entries(), "end a2") {
		t.Fatalf("failures %v, log %v", failedIDs(resp), s.entries())
	}
}

func TestQueueURL(t *testing.T) {
	tests := []struct{ arn, want string }{
		{"arn:aws:sqs:us-east-1:123456789012:q.fifo", "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo"},
		{"arn:aws-cn:sqs:cn-north-1:123456789012:q", "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q"},
		{"arn:aws:sns:us-east-1:1:t", ""},
		{"not an arn", ""},
	}
	for _, tt := range tests {
		got, err := queueURL(tt.arn)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("queueURL(%q) = %q, %v; want %q", tt.arn, got, err, tt.want)
		}
	}
	if queueName("https://sqs/1/linegate-LongQueue") != "linegate-LongQueue" || queueName(longQueueARN) != "linegate-LongQueue" {
		t.Fatal("queueName")
	}
}
