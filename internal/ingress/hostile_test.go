package ingress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/signature"
)

// Forged and malformed webhook requests over real HTTP: each gets its status
// and nothing is published.
func TestHostileRequests(t *testing.T) {
	good := sample(t, "message-text-user.json")
	nested := func(levels int) []byte {
		return []byte(`{"events":[{"type":"message","x":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}]}`)
	}
	manyEvents := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"destination":"U1","events":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"follow","webhookEventId":"e%d"}`, i)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	type req struct {
		body []byte
		sigs []string // x-line-signature values sent
	}
	signed := func(b []byte) req { return req{body: b, sigs: []string{sign(b)}} }
	tests := []struct {
		name string
		req  req
		want int
	}{
		{"wrong secret", req{good, []string{signature.Sign([]byte("not-the-secret"), good)}}, 401},
		{"truncated body, signature of the whole", req{good[:len(good)-10], []string{sign(good)}}, 401},
		{"truncated body, signed as truncated", signed(good[:len(good)-10]), 400},
		{"signature over a different body", req{good, []string{sign([]byte(`{"events":[]}`))}}, 401},
		{"duplicated header, both valid", req{good, []string{sign(good), sign(good)}}, 401},
		{"duplicated header, one valid", req{good, []string{"forged", sign(good)}}, 401},
		{"signature without its padding", req{good, []string{strings.TrimRight(sign(good), "=")}}, 401},
		{"signature with its case changed", req{good, []string{strings.ToLower(sign(good))}}, 401},
		{"huge body", signed(bytes.Repeat([]byte(" "), 2<<20)), 413},
		{"invalid UTF-8", signed([]byte("{\"events\":[{\"type\":\"message\",\"text\":\"\xc3\x28\"}]}")), 400},
		{"deeply nested JSON", signed(nested(5000)), 400},
		{"nesting just past the limit", signed(nested(MaxDepth)), 400},
		{"nesting within the limit", signed(nested(MaxDepth - 3)), 200},
		{"10,000 events", signed(manyEvents(10000)), 400},
		{"1,000 events", signed(manyEvents(1000)), 200},
		{"null bytes", signed([]byte("{\"events\":[{\"type\":\"follow\"}]}\x00")), 400},
		{"two JSON documents", signed([]byte(`{"events":[]}{"events":[{"type":"follow"}]}`)), 400},
		{"type that is not a string", signed([]byte(`{"events":[{"type":{"$gt":""}}]}`)), 400},
		{"type too long for EventBridge", signed([]byte(`{"events":[{"type":"` + strings.Repeat("a", 129) + `"}]}`)), 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			srv := httptest.NewServer(newHandler(t, pub))
			defer srv.Close()
			r, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook", bytes.NewReader(tt.req.body))
			for _, s := range tt.req.sigs {
				r.Header.Add("X-Line-Signature", s)
			}
			resp, err := srv.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.want, body)
			}
			if tt.want != 200 && (pub.calls != 0 || len(pub.sent) != 0) {
				t.Fatalf("published %d entries on a refused request", len(pub.sent))
			}
			if len(body) > 64 {
				t.Fatalf("response body too long, may echo input: %q", body)
			}
		})
	}
}

// The depth limit counts the nesting of objects and arrays, the body's own
// object included, and never brackets inside strings.
func TestParseBodyDepth(t *testing.T) {
	nest := func(levels int, inner string) string {
		// events' array and its object are levels 2 and 3.
		return `{"events":[{"type":"t","x":` + strings.Repeat("[", levels-3) + inner + strings.Repeat("]", levels-3) + `}]}`
	}
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"at the limit", nest(MaxDepth, ""), true},
		{"one past it", nest(MaxDepth+1, ""), false},
		{"brackets in a string", nest(MaxDepth, `"[[[[{{{{"`), true},
		{"escaped quote then brackets", nest(MaxDepth, `"\"[[[["`), true},
		{"an object one past it", nest(MaxDepth, `{}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseBody([]byte(tt.body), DefaultMaxEvents)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok %v", err, tt.ok)
			}
			if !tt.ok && !strings.Contains(err.Error(), "nested more than") {
				t.Fatalf("err %v does not name the depth", err)
			}
		})
	}
}

// A refused body's error names what is wrong and where, never the body's
// values (it is logged): each body below hides a message text in the
// place that makes it invalid.
func TestParseBodyErrorsQuoteNothing(t *testing.T) {
	const text = "my-card-number"
	tests := []struct{ body, want string }{
		{`{"events":[{"type":"message","text":"` + text + `\q"}]}`, "malformed JSON at byte"},
		{`{"events":[{"type":"message","text":` + text + `}]}`, "malformed JSON at byte"},
		{`{"events":[{"type":"message","text":"` + text + `"}]`, "truncated JSON"},
		{`{"events":[{"type":"message","text":"` + text + "\xff" + `"}]}`, "not valid UTF-8"},
		{`{"events":[{"type":"message","text":"` + text + `"}]}{"` + text + `":1}`, "more than one JSON value"},
		{`{"events":[{"type":"message","Type":"` + text + `"}]}`, `events[0]: a key is not spelled "type"`},
		{`{"events":[{"type":"message","type":"` + text + `"}]}`, `events[0]: key "type" is given twice`},
		{`{"events":[{"type":"message","source":{"userId":{"` + text + `":1}}}]}`, `events[0]: "source.userId" is not a string`},
		{`{"events":[{"type":"message","source":"` + text + `"}]}`, `events[0]: "source" is not an object`},
		{`{"events":[{"type":["` + text + `"]}]}`, `events[0]: "type" is not a string`},
		{`{"events":[{"type":"message","x":` + strings.Repeat("[", MaxDepth) + `"` + text + `"` + strings.Repeat("]", MaxDepth) + `}]}`, "nested more than"},
		{`{"events":["` + text + `"]}`, "events[0] is not an object"},
		{`{"events":"` + text + `"}`, `"events" is not an array`},
		{`["` + text + `"]`, "not a JSON object"},
		{``, "truncated JSON"},
		{`{"events":[]} ` + text, "malformed JSON at byte 14"},
		{`{"destination":"` + text + `"}`, `no "events" array`},
	}
	for _, tt := range tests {
		_, err := parseBody([]byte(tt.body), DefaultMaxEvents)
		if !errors.Is(err, ErrBody) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), text) {
			t.Errorf("%.60s…: error %v, want ErrBody saying %q and nothing of the body", tt.body, err, tt.want)
		}
	}
}
