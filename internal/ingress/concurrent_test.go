package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/eventbus"
)

// checkingSink checks every bus entry and queue message against what the
// same event was handed off as alone, while the call is on. The bus side is the PutEvents of a real eventbus.Publisher, which reads
// the entries on goroutines of its own while the request's goroutine sends
// to the queue.
type checkingSink struct {
	details, bodies map[string]string // by webhookEventId
	mu              sync.Mutex
	bad             []string
}

func (c *checkingSink) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bad = append(c.bad, fmt.Sprintf(format, args...))
}

func (c *checkingSink) bus() *eventbus.Publisher {
	return busOver(&putter{
		wait: func(context.Context) error {
			time.Sleep(100 * time.Microsecond) // as a call takes time: other requests run meanwhile
			return nil
		},
		check: func(detail string) {
			var d struct {
				Event struct{ WebhookEventID string }
			}
			if err := json.Unmarshal([]byte(detail), &d); err != nil {
				c.fail("entry: detail %q: %v", detail, err)
				return
			}
			if want := c.details[d.Event.WebhookEventID]; detail != want {
				c.fail("entry %s: detail %q, alone %q", d.Event.WebhookEventID, detail, want)
			}
		},
	})
}

func (c *checkingSink) Send(_ context.Context, msgs []chatqueue.Message) (chatqueue.Result, error) {
	time.Sleep(100 * time.Microsecond)
	for _, m := range msgs {
		if want := c.bodies[m.EventID]; string(m.Body) != want {
			c.fail("message %s: body %q, alone %q", m.EventID, m.Body, want)
		}
	}
	return chatqueue.Result{Queued: len(msgs)}, nil
}

// Requests handled at once, of different sizes, each hand off exactly what
// their events are handed off as alone: the memory a request writes its
// envelopes into is never shared with another request while it is being
// handed off. Run with -race.
func TestConcurrentRequestsHandOffTheirOwnEnvelopes(t *testing.T) {
	var bodies [][]byte
	for k := range 12 {
		var b strings.Builder
		fmt.Fprintf(&b, `{"destination":"Ubot%d","events":[`, k)
		for i := range 1 + k*k%37 {
			if i > 0 {
				b.WriteByte(',')
			}
			src := fmt.Sprintf(`,"source":{"type":"user","userId":"U%d-%d"}`, k, i)
			if i%5 == 4 {
				src = "" // no chat: the bus only
			}
			fmt.Fprintf(&b, `{"type":"message","webhookEventId":"E%d-%d"%s,"message":{"type":"text","text":"%s"}}`, k, i, src, strings.Repeat("x", (k*7+i*13)%300))
		}
		b.WriteString(`]}`)
		bodies = append(bodies, []byte(b.String()))
	}
	alone := &checkingSink{details: map[string]string{}, bodies: map[string]string{}}
	for _, body := range bodies {
		pub, q := &fakePublisher{}, &fakeQueue{}
		h := newHandler(t, pub, WithChatQueue(q))
		if resp, err := h.Handle(context.Background(), "POST", sign(body), body); resp.Status != 200 {
			t.Fatalf("%d %v", resp.Status, err)
		}
		for _, e := range pub.sent {
			alone.details[e.EventID] = string(e.Detail)
		}
		for _, m := range q.sent {
			alone.bodies[m.EventID] = string(m.Body)
		}
	}
	h := newHandler(t, alone.bus(), WithChatQueue(alone))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 60 {
				body := bodies[(g*5+r*7)%len(bodies)]
				if resp, err := h.Handle(context.Background(), "POST", sign(body), body); resp.Status != 200 {
					alone.fail("status %d: %v", resp.Status, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(alone.bad) > 0 {
		t.Fatalf("%d hand-offs differ from the same events handed off alone; first: %s", len(alone.bad), alone.bad[0])
	}
}
