package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/template"
)

// failingDeletes makes DeleteMessageBatch fail, as a throttled SQS would.
type failingDeletes struct{ sqsPoller }

func (failingDeletes) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return nil, errors.New("ThrottlingException")
}

type nopFlush struct{}

func (nopFlush) Flush() error { return nil }

// The event source mapping deletes a record only after its handler
// succeeded: a reported failure, a failed invocation, a mapping without
// ReportBatchItemFailures, or a failed delete all bring the record back.
func TestEventSourceDeletesOnlySuccesses(t *testing.T) {
	tests := []struct {
		name          string
		reportFailure bool // the handler reports the record failed
		invokeErr     bool // the invocation itself fails
		partial       bool // ReportBatchItemFailures on the mapping
		failDeletes   bool
		wantAgain     bool // the record is received again
	}{
		{name: "success is deleted", partial: true},
		{name: "reported failure comes back", reportFailure: true, partial: true, wantAgain: true},
		{name: "failed invocation: the whole batch comes back", invokeErr: true, partial: true, wantAgain: true},
		{name: "failure without ReportBatchItemFailures: the whole batch comes back", reportFailure: true, wantAgain: true},
		{name: "a failed delete means it comes back", partial: true, failDeletes: true, wantAgain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mem.New(mem.WithTimeScale(20))
			defer c.Close()
			ctx := context.Background()
			q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work"), Attributes: map[string]string{"VisibilityTimeout": "2"}})
			if err != nil {
				t.Fatal(err)
			}
			var poller sqsPoller = c
			if tt.failDeletes {
				poller = failingDeletes{c}
			}
			rt := &Runtime{log: telemetry.NewLogger(io.Discard), counters: newCounters(), out: newPrinter(io.Discard),
				events: newEventLog(0), top: &template.Topology{Region: "us-east-1"}, cfg: Config{TimeScale: 20}}
			var mu sync.Mutex
			receives := 0
			es := &eventSource{runtime: rt, sqs: poller, fn: template.Function{Name: "f", Timeout: time.Second},
				mapping: template.SQSMapping{BatchSize: 10, ReportBatchItemFailures: tt.partial},
				queue:   template.Queue{Name: "work"}, url: aws.ToString(q.QueueUrl), metrics: nopFlush{},
				handle: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					mu.Lock()
					receives += len(ev.Records)
					mu.Unlock()
					if tt.invokeErr {
						return events.SQSEventResponse{}, errors.New("function error")
					}
					if tt.reportFailure {
						return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[0].MessageId}}}, nil
					}
					return events.SQSEventResponse{}, nil
				}}
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { es.poll(pctx, make(chan struct{}), 0); close(done) }()
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{}`)}); err != nil {
				t.Fatal(err)
			}
			// The positive signal: a record that comes back is received a
			// second time; one that does not is gone from the queue (a
			// deleted record never comes back).
			url := aws.ToString(q.QueueUrl)
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n := receives
				mu.Unlock()
				st := c.QueueStats(url)
				if (tt.wantAgain && n >= 2) || (!tt.wantAgain && n >= 1 && st.Visible+st.InFlight == 0) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 10 s: received %d times, queue %+v; want it %s", n, st, map[bool]string{true: "received again", false: "deleted"}[tt.wantAgain])
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			mu.Lock()
			n := receives
			mu.Unlock()
			if !tt.wantAgain && n != 1 {
				t.Fatalf("received %d times, want once", n)
			}
			st := c.QueueStats(aws.ToString(q.QueueUrl))
			if left := st.Visible + st.InFlight; (left == 1) != tt.wantAgain {
				t.Fatalf("%d message(s) left in the queue", left)
			}
		})
	}
}

// With a batching window the mapping gathers like Lambda: until the batch
// is full or the window, counted from the first message, has passed — and
// a batch over SQS's 10 per receive is gathered over several receives.
func TestEventSourceBatchingWindow(t *testing.T) {
	tests := []struct {
		name      string
		batchSize int
		window    time.Duration
		wantFirst int // records in the first invocation
	}{
		{name: "no window: what one receive returns", batchSize: 100, wantFirst: 10},
		{name: "the window gathers the whole burst", batchSize: 100, window: time.Second, wantFirst: 25},
		{name: "a full batch goes before the window ends", batchSize: 12, window: 5 * time.Second, wantFirst: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mem.New()
			defer c.Close()
			ctx := context.Background()
			q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("ops"), Attributes: map[string]string{"VisibilityTimeout": "60"}})
			if err != nil {
				t.Fatal(err)
			}
			rt := &Runtime{log: telemetry.NewLogger(io.Discard), counters: newCounters(), out: newPrinter(io.Discard),
				events: newEventLog(0), top: &template.Topology{Region: "us-east-1"}, cfg: Config{TimeScale: 1}}
			batches := make(chan int, 10)
			es := &eventSource{runtime: rt, sqs: c, fn: template.Function{Name: "notifier", Timeout: time.Second},
				mapping: template.SQSMapping{BatchSize: tt.batchSize, BatchingWindow: tt.window, ReportBatchItemFailures: true},
				queue:   template.Queue{Name: "ops"}, url: aws.ToString(q.QueueUrl), metrics: nopFlush{}, alerts: true,
				handle: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					batches <- len(ev.Records)
					return events.SQSEventResponse{}, nil
				}}
			// The burst is in the queue before the poller starts, but for
			// its last 5 messages, which come 300 ms later.
			send := func(n int) {
				for range n {
					if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{}`)}); err != nil {
						t.Error(err)
					}
				}
			}
			send(20)
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { es.poll(pctx, make(chan struct{}), 0); close(done) }()
			time.Sleep(300 * time.Millisecond)
			send(5)
			select {
			case got := <-batches:
				if got != tt.wantFirst {
					t.Errorf("first invocation had %d records, want %d", got, tt.wantFirst)
				}
			case <-time.After(10 * time.Second):
				t.Error("no invocation within 10 s")
			}
			cancel()
			<-done
		})
	}
}

// A batch of more than 10 records (the notifier's mapping takes up to 100)
// is deleted in full once its handler succeeded: SQS's DeleteMessageBatch
// takes at most 10 entries, so the deletes go in groups of 10; one call
// for them all would fail and leave every record to come back after its
// visibility timeout, to be handled again.
func TestEventSourceDeletesBatchesOverTen(t *testing.T) {
	c := mem.New()
	defer c.Close()
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("ops"), Attributes: map[string]string{"VisibilityTimeout": "600"}})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(q.QueueUrl)
	for i := range 25 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	rt := &Runtime{log: telemetry.NewLogger(io.Discard), counters: newCounters(), out: newPrinter(io.Discard),
		events: newEventLog(0), top: &template.Topology{Region: "us-east-1"}, cfg: Config{TimeScale: 1}}
	handled := make(chan int, 10)
	es := &eventSource{runtime: rt, sqs: c, fn: template.Function{Name: "notifier", Timeout: time.Second},
		mapping: template.SQSMapping{BatchSize: 100, BatchingWindow: 200 * time.Millisecond, ReportBatchItemFailures: true},
		queue:   template.Queue{Name: "ops"}, url: url, metrics: nopFlush{}, alerts: true,
		handle: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			handled <- len(ev.Records)
			return events.SQSEventResponse{}, nil
		}}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { es.poll(pctx, make(chan struct{}), 0); close(done) }()
	defer func() { cancel(); <-done }()
	total := 0
	deadline := time.After(10 * time.Second)
	for total < 25 {
		select {
		case n := <-handled:
			total += n
		case <-deadline:
			t.Fatalf("%d of 25 records handled within 10 s", total)
		}
	}
	// Handled; the positive signal of their deletion is an empty queue
	// (with a 600 s visibility timeout, an undeleted record stays in flight).
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st := c.QueueStats(url)
		if st.Visible+st.InFlight == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("queue %+v 10 s after its 25 records were handled: the deletes failed", st)
		}
	}
}
