package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/xraycollector"
)

func TestAssets(t *testing.T) {
	srv := httptest.NewServer(Assets())
	defer srv.Close()
	tests := []struct {
		path, wantType string
		want           int
	}{
		{"/", "text/html", 200},
		{"/console/main.js", "text/javascript", 200},
		{"/console/console.css", "text/css", 200},
		{"/console/", "", 404},
		{"/console/../console.go", "", 404},
		{"/console/nothing.js", "", 404},
		{"/console/%2e%2e/console.go", "", 404},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.want)
			continue
		}
		if tt.want != 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
			t.Errorf("GET %s: Content-Type %q, want %s", tt.path, ct, tt.wantType)
		}
		// No inline script can run, whatever a message manages to inject.
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP %q", tt.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", tt.path, resp.Header)
		}
	}
}

// The page has no inline script and loads nothing from another origin: it
// works offline, and the CSP would refuse either.
func TestPageIsSelfContained(t *testing.T) {
	for _, name := range []string{"web/index.html", "web/main.js", "web/chat.js", "web/line.js", "web/dom.js", "web/api.js", "web/pipeline.js", "web/events.js", "web/logs.js", "web/console.css"} {
		b, err := web.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, bad := range []string{"http://", "https://", "//cdn", "innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if name == "web/index.html" && strings.Contains(s, "<script>") {
			t.Errorf("index.html has an inline script")
		}
	}
}

func TestIsAsset(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/", true}, {"HEAD", "/console/main.js", true}, {"GET", "/console/x", true},
		{"POST", "/", false}, {"GET", "/_local/chats", false}, {"GET", "/consolex", false}, {"GET", "/webhook", false},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if got := IsAsset(r); got != tt.want {
			t.Errorf("IsAsset(%s %s) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestActionRefusesCrossSiteAndNonJSON(t *testing.T) {
	var ran atomic.Int32
	h := Action(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran.Add(1); w.WriteHeader(204) }))
	tests := []struct {
		name, method, ctype string
		headers             map[string]string
		want                int
	}{
		{"same-origin JSON", "POST", "application/json", map[string]string{"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-origin"}, 204},
		{"no Origin (curl)", "POST", "application/json; charset=utf-8", nil, 204},
		{"GET", "GET", "", nil, 405},
		{"a form post (no preflight)", "POST", "text/plain", nil, 415},
		{"form-encoded", "POST", "application/x-www-form-urlencoded", nil, 415},
		{"another origin", "POST", "application/json", map[string]string{"Origin": "http://evil.example"}, 403},
		{"cross-site fetch", "POST", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site, other port", "POST", "application/json", map[string]string{"Origin": "http://127.0.0.1:8080"}, 403},
	}
	for _, tt := range tests {
		ran.Store(0)
		r := httptest.NewRequest(tt.method, "http://127.0.0.1:3000/_local/send", strings.NewReader(`{}`))
		if tt.ctype != "" {
			r.Header.Set("Content-Type", tt.ctype)
		}
		for k, v := range tt.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || (ran.Load() == 1) != (tt.want == 204) {
			t.Errorf("%s: %d (handler ran: %v), want %d", tt.name, w.Code, ran.Load() == 1, tt.want)
		}
	}
}

// sse reads one stream's events.
type sse struct {
	events chan [2]string // event name, data
}

func listen(t *testing.T, ctx context.Context, url string) *sse {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	s := &sse{events: make(chan [2]string, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && name != "":
				s.events <- [2]string{name, data}
				name, data = "", ""
			}
		}
	}()
	return s
}

// next waits for the next event, failing after the deadline with what it
// was waiting for.
func (s *sse) next(t *testing.T, what string) [2]string {
	t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			t.Fatalf("stream ended while waiting for %s", what)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("no event within 5 s while waiting for %s", what)
	}
	return [2]string{}
}

func TestHubCoalescesWatchesAndCloses(t *testing.T) {
	h := NewHub()
	h.coalesce, h.poll = 50*time.Millisecond, 20*time.Millisecond
	var depth atomic.Int32
	h.Watch(TopicQueues, func() string { return fmt.Sprint(depth.Load()) })
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := listen(t, ctx, srv.URL)
	if e := s.next(t, "hello"); e[0] != "hello" {
		t.Fatalf("first event %v, want hello", e)
	}
	// A burst is one message naming every topic.
	h.Notify(TopicChat)
	h.Notify(TopicEvents, TopicChat)
	if e := s.next(t, "the burst"); e[0] != "change" || e[1] != `{"topics":["chat","events"]}` {
		t.Fatalf("burst gave %v, want one change for chat and events", e)
	}
	// A watched fingerprint that changes is a change of its topic.
	depth.Store(3)
	if e := s.next(t, "the watched change"); e[1] != `{"topics":["queues"]}` {
		t.Fatalf("watch gave %v", e)
	}
	// Close ends the stream (the server's shutdown hook) and refuses new ones.
	h.Close()
	select {
	case _, ok := <-s.events:
		if ok {
			t.Fatal("an event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end at Close")
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream after Close: %d, want 503", resp.StatusCode)
	}
}

const (
	alice = "U0000000000000000000000000000a11c"
	group = "C00000000000000000000000000000g01"
)

func body(events ...string) []byte {
	return []byte(`{"destination":"Ubot","events":[` + strings.Join(events, ",") + `]}`)
}

func ev(id, typ, source string) string {
	return fmt.Sprintf(`{"type":%q,"webhookEventId":%q,"source":%s,"message":{"type":"text","text":"hi %s"}}`, typ, id, source, id)
}

var (
	fromAlice = `{"type":"user","userId":"` + alice + `"}`
	fromGroup = `{"type":"group","groupId":"` + group + `","userId":"` + alice + `"}`
)

func TestStoreKeepsEachChatInThePlatformsOrder(t *testing.T) {
	var topics []string
	s := NewStore(0, 0, func(ts ...string) { topics = append(topics, ts...) })
	t0 := time.Unix(1_800_000_000, 0)
	s.Webhook(body(ev("E1", "message", fromAlice), ev("E2", "message", fromGroup), `{"type":"activated","webhookEventId":"E3"}`), t0)
	s.Loading(alice, 5, t0.Add(time.Millisecond))
	s.Sent(alice, "reply", "", "r1", []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi E1"}`)}, t0.Add(2*time.Millisecond))
	s.Sent(group, "push", "key", "r2", []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi all"}`)}, t0.Add(3*time.Millisecond))
	// A LINE redelivery of E1 is not a second message.
	s.Webhook(body(ev("E1", "message", fromAlice)), t0.Add(4*time.Millisecond))

	got := s.Transcript(alice, 0, 0)
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.From+":"+e.Kind)
	}
	if strings.Join(kinds, " ") != "user:event bot:loading bot:reply" {
		t.Fatalf("alice's chat: %v", kinds)
	}
	if got[0].Seq >= got[1].Seq || got[1].Seq >= got[2].Seq || got[0].WebhookEventID != "E1" {
		t.Fatalf("not in order: %+v", got)
	}
	if after := s.Transcript(alice, got[1].Seq, 0); len(after) != 1 || after[0].Kind != "reply" {
		t.Fatalf("entries after %d: %+v", got[1].Seq, after)
	}
	g := s.Transcript(group, 0, 0)
	if len(g) != 2 || g[1].RetryKey != "key" {
		t.Fatalf("the group's chat: %+v", g)
	}
	chats := s.Chats()
	if len(chats) != 2 || chats[0].ID != group || chats[0].Type != "group" || chats[1].Type != "user" {
		t.Fatalf("chats %+v, want the group (newest) then alice", chats)
	}
	// Every event has its activity, the chat-less one too.
	for id, chat := range map[string]string{"E1": alice, "E2": group, "E3": ""} {
		a, ok := s.Activity(id)
		if !ok || a.Chat != chat || !a.ReceivedAt.Equal(t0) || len(a.Event) == 0 {
			t.Errorf("activity of %s: %+v %v", id, a, ok)
		}
	}
	if !strings.Contains(strings.Join(topics, ","), TopicChat) {
		t.Fatalf("no chat notification: %v", topics)
	}
}

func TestStoreIsBounded(t *testing.T) {
	s := NewStore(10, 3, nil)
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 40 {
		s.Webhook(body(ev(fmt.Sprintf("E%02d", i), "message", fromAlice)), t0)
	}
	if n := len(s.Transcript(alice, 0, 0)); n < 10 || n > 12 {
		t.Fatalf("%d entries kept, want 10 (and at most a quarter more)", n)
	}
	if _, ok := s.Activity("E00"); ok {
		t.Fatal("the oldest activity is kept")
	}
	if _, ok := s.Activity("E39"); !ok {
		t.Fatal("the newest activity is gone")
	}
	// A forgotten event's id is forgotten too: a later delivery shows again.
	s.Webhook(body(ev("E00", "message", fromAlice)), t0)
	last := s.Transcript(alice, 0, 0)
	if last[len(last)-1].WebhookEventID != "E00" {
		t.Fatalf("an event that fell out is still deduplicated: %+v", last[len(last)-1])
	}
	s.mu.Lock()
	seen := len(s.seen)
	s.mu.Unlock()
	if seen > 13 {
		t.Fatalf("%d ids remembered for at most 12 entries", seen)
	}
}

func TestStoreReceives(t *testing.T) {
	s := NewStore(0, 0, nil)
	t0 := time.Unix(1_800_000_000, 0)
	s.Webhook(body(ev("E1", "message", fromAlice)), t0)
	for i := 1; i <= maxReceives+5; i++ {
		s.Observe("E1", Receive{At: t0.Add(time.Duration(i) * time.Second), ReceiveCount: i, Outcome: "failed"})
	}
	s.Observe("E1", Receive{At: t0.Add(time.Minute), ReceiveCount: 99, Outcome: "ok"})
	s.Observe("E1", Receive{At: t0.Add(2 * time.Minute), ReceiveCount: 100, Outcome: "duplicate"})
	s.Observe("unknown", Receive{Outcome: "ok"})
	a, _ := s.Activity("E1")
	if len(a.Receives) != maxReceives || a.Receives[0].ReceiveCount != 1 || a.Receives[len(a.Receives)-1].ReceiveCount != 100 {
		t.Fatalf("%d receives, first %d, last %d; want %d keeping the first and the newest", len(a.Receives), a.Receives[0].ReceiveCount,
			a.Receives[len(a.Receives)-1].ReceiveCount, maxReceives)
	}
	if !a.HandledAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("handled at %v, want the ok receive's end", a.HandledAt)
	}
}

func TestLogRing(t *testing.T) {
	l := NewLogRing(3, nil)
	lines := `{"level":"INFO","message":"a","webhookEventId":"E1"}
{"_aws":{"CloudWatchMetrics":[]},"RecordsProcessed":1}
not json
{"level":"INFO","message":"b","webhookEventId":"E2"}
{"level":"WARN","message":"c mentions E1","webhookEventId":"E3"}
`
	// Written in pieces that cut lines anywhere.
	for i := 0; i < len(lines); i += 7 {
		_, _ = l.Write([]byte(lines[i:min(i+7, len(lines))]))
	}
	all := l.Lines("", 0)
	if len(all) != 3 || !strings.Contains(string(all[0]), `"a"`) {
		t.Fatalf("kept %s, want the 3 log lines without EMF or text", all)
	}
	if e1 := l.Lines("E1", 0); len(e1) != 1 || !strings.Contains(string(e1[0]), `"a"`) {
		t.Fatalf("E1's lines: %s (a line that only mentions E1 is another event's)", e1)
	}
	_, _ = l.Write([]byte(`{"message":"d"}` + "\n"))
	if got := l.Lines("", 2); len(got) != 2 || !strings.Contains(string(got[1]), `"d"`) || strings.Contains(string(got[0]), `"a"`) {
		t.Fatalf("newest two: %s", got)
	}
}

func TestParseSend(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{"text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hello"}`, ""},
		{"text with emoji", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hi (love)","emojis":[{"index":3,"length":6,"productId":"5ac1bfd5040ab15980c9b435","emojiId":"001"}]}`, ""},
		{"emoji outside the text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hi","emojis":[{"index":3,"length":6,"productId":"p","emojiId":"1"}]}`, "emoji 0"},
		{"overlapping emoji", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"(a)(b)","emojis":[{"index":0,"length":3,"productId":"p","emojiId":"1"},{"index":2,"length":3,"productId":"p","emojiId":"2"}]}`, "emoji 1"},
		{"empty text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":""}`, "1 to 5000"},
		{"text too long", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"` + strings.Repeat("あ", 5001) + `"}`, "1 to 5000"},
		{"sticker", `{"chat":{"userId":"` + alice + `"},"kind":"sticker","packageId":"446","stickerId":"1988"}`, ""},
		{"sticker without ids", `{"chat":{"userId":"` + alice + `"},"kind":"sticker"}`, "packageId"},
		{"location", `{"chat":{"userId":"` + alice + `"},"kind":"location","title":"t","latitude":35.6,"longitude":139.7}`, ""},
		{"location off the globe", `{"chat":{"userId":"` + alice + `"},"kind":"location","latitude":95,"longitude":0}`, "latitude"},
		{"postback in a group", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `"},"kind":"postback","data":"a=1"}`, ""},
		{"postback without data", `{"chat":{"userId":"` + alice + `"},"kind":"postback"}`, "postback data"},
		{"join a group", `{"chat":{"groupId":"` + group + `"},"kind":"join"}`, ""},
		{"join a one-to-one chat", `{"chat":{"userId":"` + alice + `"},"kind":"join"}`, "group or a room"},
		{"follow from a group", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `"},"kind":"follow"}`, "one-to-one"},
		{"image", `{"chat":{"userId":"` + alice + `"},"kind":"image"}`, ""},
		{"no user", `{"chat":{},"kind":"text","text":"x"}`, "userId is required"},
		{"bad user id", `{"chat":{"userId":"U1"},"kind":"text","text":"x"}`, "userId must be"},
		{"group and room", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `","roomId":"R00000000000000000000000000000r01"},"kind":"text","text":"x"}`, "not both"},
		{"unknown kind", `{"chat":{"userId":"` + alice + `"},"kind":"video"}`, "kind must be"},
		{"unknown member", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"x","admin":true}`, "unknown field"},
		{"two values", `{"chat":{"userId":"` + alice + `"},"kind":"image"} {}`, "more than one"},
		{"not JSON", `<xml/>`, "invalid character"},
		{"too large", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"` + strings.Repeat("x", maxSendBody) + `"}`, "over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSend(strings.NewReader(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
			case err != nil && !errorsIsBadSend(err):
				t.Fatalf("err %v does not wrap ErrBadSend", err)
			}
		})
	}
}

func errorsIsBadSend(err error) bool { return strings.HasPrefix(err.Error(), ErrBadSend.Error()) }

// FuzzParseSend: whatever a page posts, ParseSend never panics, and what it
// accepts builds an event (a JSON object) without panicking either.
func FuzzParseSend(f *testing.F) {
	f.Add(`{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hello (love)","emojis":[{"index":6,"length":6,"productId":"p","emojiId":"1"}]}`)
	f.Add(`{"chat":{"userId":"` + alice + `","roomId":"R00000000000000000000000000000r01"},"kind":"sticker","packageId":"1","stickerId":"2"}`)
	f.Add(`{"chat":{"groupId":"` + group + `"},"kind":"leave"}`)
	f.Add(`{"chat":{"userId":"` + alice + `"},"kind":"location","latitude":-90,"longitude":180,"title":"\u0000"}`)
	f.Fuzz(func(t *testing.T, in string) {
		req, err := ParseSend(strings.NewReader(in))
		if err != nil {
			return
		}
		raw := req.Event(newPlatform())
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil || obj["type"] == nil {
			t.Fatalf("accepted %q but built %s", in, raw)
		}
	})
}

// The timeline of an event from what the worker reported and what the
// collector received: the webhook's invocation and hand-offs, each
// receive, the handler, its LINE call, and the dead letter.
func TestTimelineGolden(t *testing.T) {
	base := 1_800_000_000.0
	webhook := xraycollector.Trace{TraceID: "1-webhook", Segments: []xraycollector.Segment{
		{ID: "w", Name: "linegate-WebhookFunction", Type: "segment", Start: base, End: base + 0.004, HTTPStatus: 200},
		{ID: "pe", ParentID: "w", Name: "EventBridge", Namespace: "aws", Operation: "PutEvents", Type: "subsegment", Start: base + 0.001, End: base + 0.002},
		{ID: "sq", ParentID: "w", Name: "SQS", Namespace: "aws", Operation: "SendMessageBatch", Type: "subsegment", Start: base + 0.001, End: base + 0.003},
	}}
	first := xraycollector.Trace{TraceID: "1-first", Segments: []xraycollector.Segment{
		{ID: "k", Name: "linegate-WorkerFunction", Type: "segment", Start: base + 0.01, End: base + 0.02},
		{ID: "r", ParentID: "k", Name: "record", Type: "subsegment", Start: base + 0.011, End: base + 0.019, Fault: true,
			Annotations: map[string]any{"webhookEventId": "E1"}, Exceptions: []string{"error: probe:fail"}},
		{ID: "other", ParentID: "k", Name: "record", Type: "subsegment", Start: base + 0.011, End: base + 0.012, Annotations: map[string]any{"webhookEventId": "E2"}},
	}}
	second := xraycollector.Trace{TraceID: "1-second", Segments: []xraycollector.Segment{
		{ID: "k2", Name: "linegate-WorkerFunction", Type: "segment", Start: base + 2, End: base + 2.01},
		{ID: "r2", ParentID: "k2", Name: "record", Type: "subsegment", Start: base + 2.001, End: base + 2.009, Annotations: map[string]any{"webhookEventId": "E1"}},
		{ID: "h", ParentID: "r2", Name: "api.line.me", Namespace: "remote", Type: "subsegment", Start: base + 2.002, End: base + 2.005, Method: "POST", Path: "/v2/bot/message/push", HTTPStatus: 200},
		{ID: "c", ParentID: "h", Name: "connect", Type: "subsegment", Start: base + 2.002, End: base + 2.003},
	}}
	a := Activity{WebhookEventID: "E1", Type: "message", Chat: alice, ReceivedAt: epoch(base), Receives: []Receive{
		{At: epoch(base + 0.019), ReceiveCount: 1, Outcome: "failed", Queue: "linegate-InteractiveQueue.fifo", DurationMs: 8, Error: "probe:fail", RetryInMs: 1500, TraceID: "1-first"},
		{At: epoch(base + 2.009), ReceiveCount: 2, Outcome: "ok", Queue: "linegate-InteractiveQueue.fifo", DurationMs: 8, TraceID: "1-second"},
		{At: epoch(base + 3), ReceiveCount: 3, Outcome: "dead-lettered", DeadLetterReason: "retries-exhausted", TraceID: "1-missing"},
	}}
	steps := Timeline(a, "1-webhook", map[string]xraycollector.Trace{"1-webhook": webhook, "1-first": first, "1-second": second})
	b, err := json.MarshalIndent(steps, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "timeline.golden.json"), append(b, '\n'))
	// Without the webhook's trace (not arrived yet) the event still starts
	// with its receipt.
	if s := Timeline(a, "1-late", nil); s[0].Stage != "webhook" || !s[0].At.Equal(a.ReceivedAt) {
		t.Fatalf("first step %+v", s[0])
	}
}

func newPlatform() *lineplatform.Platform { return lineplatform.New("http://unused.invalid", nil) }
