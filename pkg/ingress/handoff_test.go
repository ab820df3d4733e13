package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/pkg/chatqueue"
	"github.com/linegate/linegate/pkg/eventbus"
)

// handOffBodies are the bodies whose hand-offs are kept byte for byte in
// testdata/golden/handoffs.json: every LINE sample, the benchmark's body,
// and bodies with what the envelopes must escape or hash (escapes in the
// destination, type and chat; raw and escaped noncharacters; ids SQS does
// not take; events without an id or a chat).
//
// The LINE samples are handed off at one clock, the others at every clock.
func handOffBodies(t *testing.T) (samples, crafted map[string][]byte) {
	t.Helper()
	samples = map[string][]byte{}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		samples[filepath.Base(f)] = sample(t, filepath.Base(f))
	}
	crafted = map[string][]byte{"bench-3": benchBody(3)}
	for name, b := range map[string]string{
		"escaped-strings": `{"destination":"U\"q\\\u00e9\u2028","events":[{"type":"mess\u0061ge","webhookEventId":"01\/A","source":{"type":"user","userId":"U\u0000\t<&>"}}]}`,
		"noncharacters": "{\"destination\":\"U\xef\xbf\xbe\",\"events\":[{\"type\":\"t\xef\xbf\xbf\",\"webhookEventId\":\"01B\",\"source\":{\"groupId\":\"C\xef\xbf\xbe\"}," +
			"\"message\":{\"text\":\"a\xef\xbf\xbfb\\uffff\xef\xbf\xbd\xef\xbf\xbc\"}},{\"type\":\"\\ufffe\",\"source\":{\"roomId\":\"\\uffff\"}}]}",
		"ids-sqs-refuses": `{"destination":"Ubot","events":[{"type":"message","webhookEventId":"` + strings.Repeat("x", 129) + `","source":{"userId":"U é"}},` +
			`{"type":"follow","source":{"type":"user","userId":"` + strings.Repeat("U", 200) + `"}},{"type":"activated"},{"type":"x","webhookEventId":"","source":null}]}`,
		"whitespace": " {\n \"events\" : [ { \"type\" : \"follow\" , \"source\" : { \"userId\" : \"U1\" } } ] , \"destination\" : null }\n",
	} {
		crafted[name] = []byte(b)
	}
	return samples, crafted
}

// handOffClocks are receive times that format differently: nanoseconds
// with and without trailing zeros, none, another zone, an early year.
var handOffClocks = []time.Time{
	fixedNow,
	time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	time.Date(2026, 12, 31, 23, 59, 59, 120000000, time.FixedZone("JST", 9*3600)),
	time.Date(999, 7, 8, 9, 10, 11, 1000, time.UTC),
}

// The bus entries and chat queue messages of every body above, under
// every clock above, are kept byte for byte: an optimisation of the
// accept path must not change one byte of what it hands off.
func TestHandOffsGolden(t *testing.T) {
	type entry struct{ DetailType, Detail, TraceHeader, EventID string }
	type message struct{ Body, Group, DedupID, TraceHeader, EventID string }
	type result struct {
		Status   int
		Entries  []entry
		Messages []message
	}
	samples, crafted := handOffBodies(t)
	out := map[string]result{}
	for name, body := range samples {
		crafted[name] = body
	}
	for name, body := range crafted {
		for k, at := range handOffClocks {
			if k > 0 && samples[name] != nil {
				break
			}
			pub, q := &fakePublisher{}, &fakeQueue{}
			h := newHandler(t, pub, WithChatQueue(q), WithSource("line.test"), WithRegion("ap-northeast-1"),
				WithClock(func() time.Time { return at }),
				WithTraceHeader(func(context.Context) string { return "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1" }))
			resp, _ := h.Handle(context.Background(), "POST", sign(body), bytes.Clone(body))
			r := result{Status: resp.Status}
			for _, e := range pub.entries {
				r.Entries = append(r.Entries, entry{e.DetailType, string(e.Detail), e.TraceHeader, e.EventID})
			}
			for _, m := range q.msgs {
				r.Messages = append(r.Messages, message{string(m.Body), m.Group, m.DedupID, m.TraceHeader, m.EventID})
			}
			out[fmt.Sprintf("%s@%d", name, k)] = r
		}
	}
	got, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/golden/handoffs.json", append(got, '\n'))
}

// checkingSink checks every bus entry and queue message against what the
// same event was handed off as alone, while the call is on (the handler
// writes later requests into the same memory once it returns).
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

func (c *checkingSink) Publish(_ context.Context, entries []eventbus.Entry) (eventbus.Result, error) {
	time.Sleep(100 * time.Microsecond) // as a call takes time: other requests run meanwhile
	for _, e := range entries {
		if want := c.details[e.EventID]; string(e.Detail) != want {
			c.fail("entry %s: detail %q, alone %q", e.EventID, e.Detail, want)
		}
	}
	return eventbus.Result{Accepted: len(entries)}, nil
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
// envelopes into (kept from one request to the next) is never shared with
// another request while it is being handed off. Run with -race.
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
		for _, e := range pub.entries {
			alone.details[e.EventID] = string(e.Detail)
		}
		for _, m := range q.msgs {
			alone.bodies[m.EventID] = string(m.Body)
		}
	}
	h := newHandler(t, alone, WithChatQueue(alone))
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
