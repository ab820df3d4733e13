package eventbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/backoff"
)

// fakeBus answers PutEvents from a script: fail(detail, attempt) returns the
// error code for an entry on its n-th sighting ("" = accepted).
type fakeBus struct {
	mu       sync.Mutex
	calls    [][]types.PutEventsRequestEntry
	seen     map[string]int
	accepted []string
	fail     func(detail string, attempt int) string
	callErr  func(call int) error
	block    bool
}

func (f *fakeBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, in.Entries)
	if f.callErr != nil {
		if err := f.callErr(len(f.calls)); err != nil {
			return nil, err
		}
	}
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		d := aws.ToString(e.Detail)
		f.seen[d]++
		code := ""
		if f.fail != nil {
			code = f.fail(d, f.seen[d])
		}
		if code != "" {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, types.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("scripted")})
			continue
		}
		f.accepted = append(f.accepted, d)
		out.Entries = append(out.Entries, types.PutEventsResultEntry{EventId: aws.String("id")})
	}
	return out, nil
}

func entries(n, size int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		d := fmt.Sprintf(`{"i":%d,"pad":"`, i)
		d += strings.Repeat("x", max(0, size-len(d)-2)) + `"}`
		out[i] = Entry{DetailType: "message", Detail: []byte(d), EventID: fmt.Sprintf("ev%d", i), TraceHeader: "opaque-trace-header"}
	}
	return out
}

func noSleep(context.Context, time.Duration) error { return nil }

// wantOneFailed checks that a Publish failed with ErrNotAccepted for one
// entry only, failed (its EventID and Code), having accepted the others.
func wantOneFailed(t *testing.T, res Result, err error, accepted int, failed Failure) {
	t.Helper()
	if !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v, want ErrNotAccepted", err)
	}
	if res.Accepted != accepted || len(res.Failed) != 1 || res.Failed[0].EventID != failed.EventID || res.Failed[0].Code != failed.Code {
		t.Fatalf("res = %+v, want %d accepted and %s failed with %s", res, accepted, failed.EventID, failed.Code)
	}
}

func TestBatching(t *testing.T) {
	tests := []struct {
		name      string
		n, size   int
		limit     int
		wantCalls []int // entries per call, in any order
	}{
		{name: "one", n: 1, size: 100, limit: MaxRequestBytes, wantCalls: []int{1}},
		{name: "ten fit one call", n: 10, size: 100, limit: MaxRequestBytes, wantCalls: []int{10}},
		{name: "eleven need two", n: 11, size: 100, limit: MaxRequestBytes, wantCalls: []int{10, 1}},
		{name: "hundred", n: 100, size: 100, limit: MaxRequestBytes, wantCalls: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}},
		// each entry is 300 + len("line.webhook") + len("message") = 319 bytes: 3 fit under 1000
		{name: "byte limit splits", n: 7, size: 300, limit: 1000, wantCalls: []int{3, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bus := &fakeBus{}
			p := NewPublisher(bus, "bus", WithLimits(tt.limit, tt.limit), WithParallelism(1))
			res, err := p.Publish(context.Background(), entries(tt.n, tt.size))
			if err != nil || res.Accepted != tt.n {
				t.Fatalf("res %+v err %v", res, err)
			}
			if len(bus.calls) != len(tt.wantCalls) {
				t.Fatalf("calls = %d, want %d", len(bus.calls), len(tt.wantCalls))
			}
			for i, c := range bus.calls {
				if len(c) != tt.wantCalls[i] {
					t.Fatalf("call %d carried %d entries, want %d", i, len(c), tt.wantCalls[i])
				}
				size := 0
				for _, e := range c {
					size += len(*e.Source) + len(*e.DetailType) + len(*e.Detail)
					if *e.EventBusName != "bus" || *e.Source != DefaultSource || aws.ToString(e.TraceHeader) != "opaque-trace-header" {
						t.Fatalf("entry fields wrong: %+v", e)
					}
				}
				if size > tt.limit {
					t.Fatalf("call %d is %d bytes, over %d", i, size, tt.limit)
				}
			}
		})
	}
}

func TestRetriesOnlyFailedRetryableEntries(t *testing.T) {
	in := entries(10, 50)
	bus := &fakeBus{fail: func(d string, attempt int) string {
		switch {
		case strings.HasPrefix(d, `{"i":2,`) && attempt == 1:
			return "ThrottlingException"
		case strings.HasPrefix(d, `{"i":5,`) && attempt <= 2:
			return "InternalFailure"
		case strings.HasPrefix(d, `{"i":7,`):
			return "MalformedDetail" // never retried
		}
		return ""
	}}
	p := NewPublisher(bus, "bus", WithSleep(noSleep))
	res, err := p.Publish(context.Background(), in)
	wantOneFailed(t, res, err, 9, Failure{EventID: "ev7", Code: "MalformedDetail"}) // entry 7 is not retryable
	if len(bus.calls) != 3 {
		t.Fatalf("calls = %d, want 3 (all, then 2 and 5, then 5)", len(bus.calls))
	}
	if len(bus.calls[1]) != 2 || len(bus.calls[2]) != 1 {
		t.Fatalf("retry calls carried %d and %d entries, want 2 and 1", len(bus.calls[1]), len(bus.calls[2]))
	}
	if bus.seen[string(in[7].Detail)] != 1 {
		t.Fatal("non-retryable entry was re-sent")
	}
	if len(bus.accepted) != 9 {
		t.Fatalf("bus accepted %d, want 9 (no duplicates)", len(bus.accepted))
	}
}

func TestWholeCallErrorIsRetried(t *testing.T) {
	bus := &fakeBus{callErr: func(call int) error {
		if call == 1 {
			return errors.New("connection reset")
		}
		return nil
	}}
	p := NewPublisher(bus, "bus", WithSleep(noSleep))
	res, err := p.Publish(context.Background(), entries(3, 40))
	if err != nil || res.Accepted != 3 || res.Retried != 3 {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestDeadlineHonoured(t *testing.T) {
	bus := &fakeBus{block: true}
	p := NewPublisher(bus, "bus", WithDeadline(50*time.Millisecond))
	start := time.Now()
	res, err := p.Publish(context.Background(), entries(3, 40))
	if !errors.Is(err, ErrNotAccepted) || res.Accepted != 0 || len(res.Failed) != 3 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Publish took %v with a 50ms deadline", el)
	}
	for _, f := range res.Failed {
		if f.Code != "DeadlineExceeded" {
			t.Fatalf("failure code %q", f.Code)
		}
	}
}

func TestRetriesStopAtDeadline(t *testing.T) {
	bus := &fakeBus{fail: func(string, int) string { return "ThrottlingException" }}
	var slept time.Duration
	var mu sync.Mutex
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept += d
		mu.Unlock()
		return backoff.Sleep(ctx, d)
	}
	p := NewPublisher(bus, "bus", WithDeadline(120*time.Millisecond), WithBackoff(10*time.Millisecond, 40*time.Millisecond), WithSleep(sleep))
	res, err := p.Publish(context.Background(), entries(2, 40))
	if !errors.Is(err, ErrNotAccepted) || len(res.Failed) != 2 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(bus.calls) < 3 {
		t.Fatalf("only %d calls: backoff should allow several tries in 120ms", len(bus.calls))
	}
	if slept > 200*time.Millisecond {
		t.Fatalf("slept %v in total, past the deadline", slept)
	}
}

func TestOversizedEntryFailsAloneAndOthersGo(t *testing.T) {
	in := entries(3, 100)
	in[1] = Entry{DetailType: "message", Detail: []byte(`{"big":"` + strings.Repeat("y", 2000) + `"}`), EventID: "big"}
	bus := &fakeBus{}
	p := NewPublisher(bus, "bus", WithLimits(1000, 4000))
	res, err := p.Publish(context.Background(), in)
	wantOneFailed(t, res, err, 2, Failure{EventID: "big", Code: "EntryTooLarge"})
	if len(bus.accepted) != 2 {
		t.Fatalf("bus got %d entries, want the 2 that fit", len(bus.accepted))
	}
}

func TestEmptyPublishMakesNoCall(t *testing.T) {
	bus := &fakeBus{}
	if _, err := NewPublisher(bus, "bus").Publish(context.Background(), nil); err != nil || len(bus.calls) != 0 {
		t.Fatalf("err %v calls %d", err, len(bus.calls))
	}
}

// gate is a PutEvents that holds every call until open is closed, counting
// the calls in flight and the most there ever were.
type gate struct {
	open     chan struct{}
	mu       sync.Mutex
	inFlight int
	most     int
	calls    int
	entries  int
}

func (g *gate) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	g.mu.Lock()
	g.inFlight++
	g.calls++
	g.entries += len(in.Entries)
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := &eventbridge.PutEventsOutput{Entries: make([]types.PutEventsResultEntry, len(in.Entries))}
	for i := range out.Entries {
		out.Entries[i].EventId = aws.String("id")
	}
	return out, nil
}

func (g *gate) state() (inFlight, most, calls, entries int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most, g.calls, g.entries
}

// Start returns while its calls are held on their way (so the webhook's
// goroutine can send to the chat queue meanwhile), with as many calls in
// flight as the parallelism allows and never more; Wait then gives what
// Publish gives.
func TestStartReturnsWhileCallsAreOnTheirWay(t *testing.T) {
	tests := []struct {
		entries, parallel int
		batches           int
	}{
		{entries: 1, parallel: 4, batches: 1},
		{entries: 25, parallel: 4, batches: 3},
		{entries: 100, parallel: 4, batches: 10},
		{entries: 100, parallel: 1, batches: 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("entries=%d/parallel=%d", tt.entries, tt.parallel), func(t *testing.T) {
			g := &gate{open: make(chan struct{})}
			p := NewPublisher(g, "bus", WithParallelism(tt.parallel), WithDeadline(10*time.Second))
			started := make(chan *Publication, 1)
			go func() { started <- p.Start(context.Background(), entries(tt.entries, 100)) }()
			var pb *Publication
			select {
			case pb = <-started:
			case <-time.After(5 * time.Second):
				close(g.open)
				t.Fatal("Start did not return within 5 s while its calls were held: it waited for them")
			}
			want := min(tt.parallel, tt.batches)
			deadline := time.Now().Add(5 * time.Second)
			for {
				inFlight, _, _, _ := g.state()
				if inFlight == want {
					break
				}
				if time.Now().After(deadline) {
					close(g.open)
					t.Fatalf("%d calls in flight after 5 s, want %d", inFlight, want)
				}
				time.Sleep(time.Millisecond)
			}
			close(g.open)
			res, err := pb.Wait()
			if err != nil || res.Accepted != tt.entries || res.Calls != tt.batches {
				t.Fatalf("Wait = %+v, %v; want %d accepted in %d calls", res, err, tt.entries, tt.batches)
			}
			if _, most, calls, sent := g.state(); most > tt.parallel || calls != tt.batches || sent != tt.entries {
				t.Fatalf("%d calls carrying %d entries, at most %d at once; want %d calls, %d entries, at most %d at once",
					calls, sent, most, tt.batches, tt.entries, tt.parallel)
			}
		})
	}
}

// Wait a second time gives the same outcome and sends nothing again.
func TestWaitTwiceGivesTheSame(t *testing.T) {
	bus := &fakeBus{fail: func(string, int) string { return "AccessDeniedException" }}
	p := NewPublisher(bus, "bus", WithSleep(noSleep))
	pb := p.Start(context.Background(), entries(3, 50))
	res1, err1 := pb.Wait()
	res2, err2 := pb.Wait()
	if !errors.Is(err1, ErrNotAccepted) || err2 != err1 || res1.Accepted != 0 || len(res2.Failed) != 3 || len(bus.calls) != 1 {
		t.Fatalf("first %+v %v, second %+v %v, %d calls; want the same refusal twice from one call", res1, err1, res2, err2, len(bus.calls))
	}
}

// Done and Accepted are publications already over, for publishers that
// finish in memory.
func TestDoneAndAccepted(t *testing.T) {
	refused := errors.New("refused")
	tests := []struct {
		name    string
		pb      *Publication
		want    int
		wantErr error
	}{
		{name: "accepted none", pb: Accepted(0), want: 0},
		{name: "accepted ten", pb: Accepted(10), want: 10},
		{name: "accepted many", pb: Accepted(1000), want: 1000},
		{name: "done with an error", pb: Done(Result{Accepted: 2, Failed: []Failure{{EventID: "e"}}}, refused), want: 2, wantErr: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				res, err := tt.pb.Wait()
				if res.Accepted != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
					t.Fatalf("Wait = %+v, %v; want %d accepted, %v", res, err, tt.want, tt.wantErr)
				}
			}
		})
	}
}
