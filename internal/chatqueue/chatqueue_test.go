package chatqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/testmetrics"
)

// fakeQueue answers SendMessageBatch from a script and keeps what it
// accepted, in acceptance order: the order the queue would hold.
type fakeQueue struct {
	mu       sync.Mutex
	calls    [][]string // bodies per call
	accepted []string
	seen     map[string]int
	// entryErr scripts an entry's n-th sighting: nil accepts it.
	entryErr func(body string, n int) *sqstypes.BatchResultErrorEntry
	// callErr scripts the whole n-th call.
	callErr func(n int) error
	checks  []string // problems with the request, reported by the test
}

func (f *fakeQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var o sqs.Options
	for _, fn := range opts {
		fn(&o)
	}
	if _, nop := o.Retryer.(aws.NopRetryer); !nop {
		f.checks = append(f.checks, "the SDK's retryer is on: two retry layers")
	}
	var bodies []string
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
		if aws.ToString(e.MessageGroupId) == "" || aws.ToString(e.MessageDeduplicationId) == "" {
			f.checks = append(f.checks, "entry without group or deduplication id: "+aws.ToString(e.MessageBody))
		}
	}
	f.calls = append(f.calls, bodies)
	if f.callErr != nil {
		if err := f.callErr(len(f.calls)); err != nil {
			return nil, err
		}
	}
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		b := aws.ToString(e.MessageBody)
		f.seen[b]++
		if f.entryErr != nil {
			if fe := f.entryErr(b, f.seen[b]); fe != nil {
				fe.Id = e.Id
				out.Failed = append(out.Failed, *fe)
				continue
			}
		}
		f.accepted = append(f.accepted, b)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + b)})
	}
	return out, nil
}

func msgs(n int, size int) []Message {
	out := make([]Message, n)
	for i := range out {
		body := fmt.Sprintf("e%02d", i)
		if size > len(body) {
			body += strings.Repeat("x", size-len(body))
		}
		out[i] = Message{Body: []byte(body), Group: fmt.Sprintf("U%d", i%3), DedupID: fmt.Sprintf("id%d", i), EventID: fmt.Sprintf("id%d", i)}
	}
	return out
}

func bodies(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// inOrder reports whether got is a subsequence of all, each at most once.
func inOrder(got, all []string) bool {
	j := 0
	for _, g := range got {
		for j < len(all) && all[j] != g {
			j++
		}
		if j == len(all) {
			return false
		}
		j++
	}
	return true
}

var quiet = slog.New(slog.DiscardHandler)

func noSleep(context.Context, time.Duration) error { return nil }

var (
	throttled  = &smithy.GenericAPIError{Code: "RequestThrottled", Message: "slow down"}
	denied     = &smithy.GenericAPIError{Code: "AccessDenied", Message: "no", Fault: smithy.FaultClient}
	serverSide = func(string, int) *sqstypes.BatchResultErrorEntry { return nil }
)

func TestSendKeepsOrder(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []Message
		q         *fakeQueue
		wantCalls []int // entries per call
		wantErr   bool
		wantRetry int
	}{
		{name: "23 events: three calls of 10, 10 and 3", msgs: msgs(23, 0), q: &fakeQueue{}, wantCalls: []int{10, 10, 3}},
		{name: "summed size splits batches before 10", msgs: msgs(5, 400<<10), q: &fakeQueue{}, wantCalls: []int{2, 2, 1}},
		{name: "a throttled call is made again before the next batch", msgs: msgs(12, 0),
			q:         &fakeQueue{callErr: func(n int) error { return map[int]error{1: throttled}[n] }},
			wantCalls: []int{10, 10, 2}, wantRetry: 10},
		{name: "an entry that was not the sender's fault is re-sent alone, before the next batch", msgs: msgs(12, 0),
			q: &fakeQueue{entryErr: func(b string, n int) *sqstypes.BatchResultErrorEntry {
				if b == "e09" && n == 1 {
					return &sqstypes.BatchResultErrorEntry{Code: aws.String("InternalError"), SenderFault: false}
				}
				return serverSide(b, n)
			}},
			wantCalls: []int{10, 1, 2}, wantRetry: 1},
		{name: "the sender's fault fails at once and nothing later is sent", msgs: msgs(12, 0),
			q: &fakeQueue{entryErr: func(b string, n int) *sqstypes.BatchResultErrorEntry {
				if b == "e03" {
					return &sqstypes.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true}
				}
				return nil
			}},
			wantCalls: []int{10}, wantErr: true},
		{name: "a non-retryable call error fails at once", msgs: msgs(3, 0),
			q:         &fakeQueue{callErr: func(int) error { return denied }},
			wantCalls: []int{3}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			s := New(tt.q, "https://sqs/q.fifo", Config{Sleep: noSleep, Metrics: m, Log: quiet})
			res, err := s.Send(context.Background(), tt.msgs)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrNotQueued)) {
				t.Fatalf("err = %v, want error %v wrapping ErrNotQueued", err, tt.wantErr)
			}
			var got []int
			for _, c := range tt.q.calls {
				got = append(got, len(c))
			}
			if !slices.Equal(got, tt.wantCalls) {
				t.Fatalf("entries per call %v, want %v", got, tt.wantCalls)
			}
			if len(tt.q.checks) > 0 {
				t.Fatal(tt.q.checks)
			}
			if !inOrder(tt.q.accepted, bodies(tt.msgs)) {
				t.Fatalf("queue holds %v: not in the order given", tt.q.accepted)
			}
			if !tt.wantErr && (res.Queued != len(tt.msgs) || len(tt.q.accepted) != len(tt.msgs)) {
				t.Fatalf("queued %d, accepted %d of %d", res.Queued, len(tt.q.accepted), len(tt.msgs))
			}
			if tt.wantErr && res.Queued+len(res.Failed) != len(tt.msgs) {
				t.Fatalf("queued %d + failed %d != %d", res.Queued, len(res.Failed), len(tt.msgs))
			}
			if res.Retried != tt.wantRetry || int(m.Total(MetricQueueRetries)) != tt.wantRetry {
				t.Fatalf("retried %d (metric %v), want %d", res.Retried, m.Total(MetricQueueRetries), tt.wantRetry)
			}
			// What goes wrong is counted; a send the queue took whole on
			// the first try records nothing (SQS's NumberOfMessagesSent
			// counts it).
			if int(m.Total(MetricQueueFailures)) != len(res.Failed) || (len(res.Failed) == 0 && tt.wantRetry == 0 && len(m.Counts()) != 0) {
				t.Fatalf("metrics %v", m.Counts())
			}
		})
	}
}

// A queue that keeps throttling fails the send by the deadline, reporting
// the throttling, not a bare timeout.
func TestSendGivesUpAtTheDeadline(t *testing.T) {
	q := &fakeQueue{callErr: func(int) error { return throttled }}
	s := New(q, "u", Config{Deadline: 60 * time.Millisecond, Retry: backoff.Policy{First: 5 * time.Millisecond, Max: 10 * time.Millisecond}, Log: quiet})
	start := time.Now()
	res, err := s.Send(context.Background(), msgs(2, 0))
	if !errors.Is(err, ErrNotQueued) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	if len(q.calls) < 2 || len(res.Failed) != 2 || res.Failed[0].Code != "RequestThrottled" {
		t.Fatalf("%d calls, failures %+v", len(q.calls), res.Failed)
	}
}

func TestSendNothing(t *testing.T) {
	q := &fakeQueue{}
	if res, err := New(q, "u", Config{}).Send(context.Background(), nil); err != nil || res.Calls != 0 || len(q.calls) != 0 {
		t.Fatalf("%+v %v, %d calls", res, err, len(q.calls))
	}
}

// The trace header, opaque here, travels as the SQS trace system attribute.
func TestSendCarriesGroupDedupAndTrace(t *testing.T) {
	var in *sqs.SendMessageBatchInput
	api := batchFunc(func(_ context.Context, i *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		in = i
		return &sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{{Id: i.Entries[0].Id}}}, nil
	})
	_, err := New(api, "https://q.fifo", Config{}).Send(context.Background(), []Message{{Body: []byte("b"), Group: "Uchat", DedupID: "01ID", TraceHeader: "opaque-trace-header"}})
	if err != nil {
		t.Fatal(err)
	}
	e := in.Entries[0]
	if aws.ToString(in.QueueUrl) != "https://q.fifo" || aws.ToString(e.MessageGroupId) != "Uchat" || aws.ToString(e.MessageDeduplicationId) != "01ID" ||
		aws.ToString(e.MessageSystemAttributes[telemetry.SQSTraceAttribute].StringValue) != "opaque-trace-header" {
		t.Fatalf("entry %+v", e)
	}
}

type batchFunc func(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)

func (f batchFunc) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return f(ctx, in)
}
