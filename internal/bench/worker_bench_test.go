package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/cputime"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// batchSize is the template's SQS BatchSize.
const batchSize = 10

// sqsBatch builds a 10-record batch as the event source mapping delivers it:
// each body an EventBridge event carrying one LINE text event, with ids
// first..first+9.
func sqsBatch(first int) events.SQSEvent {
	var ev events.SQSEvent
	for i := first; i < first+batchSize; i++ {
		id := fmt.Sprintf("01JBENCH%018d", i)
		body := `{"version":"0","id":"` + strconv.Itoa(i) + `","detail-type":"message","source":"line.webhook","account":"000000000000",` +
			`"time":"2026-01-02T03:04:05Z","region":"us-east-1","resources":[],"detail":{"destination":"U00000000000000000000000000000000",` +
			`"receivedAt":"2026-01-02T03:04:05.123Z","event":{"replyToken":"r` + id + `","type":"message","mode":"active","timestamp":1767323045000,` +
			`"source":{"type":"user","userId":"U0123456789abcdef0123456789abcdef"},"webhookEventId":"` + id + `",` +
			`"deliveryContext":{"isRedelivery":false},"message":{"id":"1","type":"text","quoteToken":"q","text":"bench:` + strconv.Itoa(i) + `"}}}}`
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m" + strconv.Itoa(i), Body: body,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"})
	}
	return ev
}

func newProcessor(b *testing.B, store idempotency.Store) *worker.Processor {
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error { return nil })
	p, err := worker.New(r, store, worker.WithConcurrency(batchSize), worker.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkWorkerRecord is the worker's overhead per SQS record: unwrap the
// EventBridge envelope, parse the LINE event, claim and complete it in the
// in-memory idempotency store, dispatch to a no-op handler, report. One op
// is a 10-record batch; ns/record is reported too. "new" records run the
// handler; "duplicate" records were completed before and are skipped.
func BenchmarkWorkerRecord(b *testing.B) {
	ctx := context.Background()
	const pool = 100 // distinct batches before the store is renewed
	batches := make([]events.SQSEvent, pool)
	for i := range batches {
		batches[i] = sqsBatch(i * batchSize)
	}
	check := func(b *testing.B, resp events.SQSEventResponse, err error) {
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("%v %+v", err, resp)
		}
	}
	b.Run("new", func(b *testing.B) {
		defer cputime.PerOp(b)()
		b.ReportAllocs()
		var p *worker.Processor
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			if i%pool == 0 {
				p = newProcessor(b, idempotency.NewMemory()) // fresh ids for the next round
			}
			resp, err := p.Handle(ctx, batches[i%pool])
			check(b, resp, err)
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*batchSize), "ns/record")
	})
	b.Run("duplicate", func(b *testing.B) {
		b.ReportAllocs()
		p := newProcessor(b, idempotency.NewMemory())
		for _, batch := range batches {
			resp, err := p.Handle(ctx, batch)
			check(b, resp, err)
		}
		defer cputime.PerOp(b)()
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			resp, err := p.Handle(ctx, batches[i%pool])
			check(b, resp, err)
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*batchSize), "ns/record")
	})
}

// The benchmark's batch is what the worker really accepts: every record is
// handled (not failed as malformed), and a second pass finds them done.
func TestBenchmarkBatchIsValid(t *testing.T) {
	var outcomes []worker.Outcome
	r := bot.NewRouter()
	handled := 0
	r.OnText("", func(_ context.Context, _ *bot.Event, text string) error {
		if _, _, ok := parseText(text); ok {
			handled++
		}
		return nil
	})
	p, err := worker.New(r, idempotency.NewMemory(), worker.WithConcurrency(1), worker.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))),
		worker.WithObserver(func(res worker.Result) { outcomes = append(outcomes, res.Outcome) }))
	if err != nil {
		t.Fatal(err)
	}
	batch := sqsBatch(0)
	for range 2 {
		if resp, err := p.Handle(context.Background(), batch); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%v %+v", err, resp)
		}
	}
	if handled != batchSize || len(outcomes) != 2*batchSize || outcomes[0] != worker.OutcomeOK || outcomes[batchSize] != worker.OutcomeDuplicate {
		t.Fatalf("handled %d, outcomes %v", handled, outcomes)
	}
}
