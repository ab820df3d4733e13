package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
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
			for _, e := range pub.sent {
				r.Entries = append(r.Entries, entry{e.DetailType, string(e.Detail), e.TraceHeader, e.EventID})
			}
			for _, m := range q.sent {
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
