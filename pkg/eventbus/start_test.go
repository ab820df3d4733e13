package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

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
