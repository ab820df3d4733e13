package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/signature"
)

const (
	secret     = "test-channel-secret"
	prevSecret = "previous-channel-secret"
)

var fixedNow = time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.UTC)

// recorder is what the fake senders share: it counts the calls and keeps
// copies (made by keep) of what they were given, unless err (set by the
// test) fails them, as the real senders copy what they are given into
// their SDK inputs.
type recorder[T any] struct {
	mu    sync.Mutex
	sent  []T
	calls int
	err   error
}

// take records a call with items; it returns err instead of keeping them
// when err is set.
func (r *recorder[T]) take(items []T, keep func(T) T) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return r.err
	}
	for _, it := range items {
		r.sent = append(r.sent, keep(it))
	}
	return nil
}

// keepMessage and keepEntry copy what a fake keeps of a call.
func keepMessage(m chatqueue.Message) chatqueue.Message { m.Body = bytes.Clone(m.Body); return m }
func keepEntry(e eventbus.Entry) eventbus.Entry         { e.Detail = bytes.Clone(e.Detail); return e }

// fakeQueue records what the chat queue was given and fails on demand.
type fakeQueue struct{ recorder[chatqueue.Message] }

func (f *fakeQueue) Send(_ context.Context, msgs []chatqueue.Message) (chatqueue.Result, error) {
	if err := f.take(msgs, keepMessage); err != nil {
		return chatqueue.Result{}, err
	}
	return chatqueue.Result{Queued: len(msgs), Calls: 1}, nil
}

// bigBody is a body of one text message event of eventBytes bytes: with
// 1 MiB - 40 the body is within the default 1 MiB limit but its envelope
// (the event plus about 90 bytes) is over the bus's 1 MiB entry limit.
func bigBody(eventBytes int) []byte {
	const head, tail = `{"type":"message","message":{"type":"text","text":"`, `"}}`
	ev := head + strings.Repeat("a", eventBytes-len(head)-len(tail)) + tail
	return []byte(`{"destination":"U1","events":[` + ev + `]}`)
}

// fakePublisher records what the bus was given and fails on demand; its
// publications are over when Start returns.
type fakePublisher struct{ recorder[eventbus.Entry] }

func (f *fakePublisher) Start(_ context.Context, entries []eventbus.Entry) *eventbus.Publication {
	if err := f.take(entries, keepEntry); err != nil {
		return eventbus.Done(eventbus.Result{Accepted: len(entries) - 1, Failed: []eventbus.Failure{{Code: "InternalFailure"}}}, err)
	}
	return eventbus.Done(eventbus.Result{Accepted: len(entries), Calls: 1}, nil)
}

func newHandler(t testing.TB, pub publisher, opts ...Option) *Handler {
	t.Helper()
	base := []Option{WithSecrets(secret, prevSecret), WithClock(func() time.Time { return fixedNow }), WithEventLogs(false),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	h, err := New(pub, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sample is the LINE webhook body kept in testdata/ under name.
func sample(t testing.TB, name string) []byte {
	t.Helper()
	return golden.Read(t, filepath.Join("testdata", name))
}

func sign(body []byte) string { return signature.Sign([]byte(secret), body) }

func TestHandleStatuses(t *testing.T) {
	text := sample(t, "message-text-user.json")
	tests := []struct {
		name      string
		method    string
		sig       func(body []byte) string
		body      []byte
		opts      []Option
		pubErr    error
		queueErr  error
		want      int
		wantErr   error
		published int
	}{
		{name: "signed text message", body: text, want: 200, published: 1},
		{name: "verify request publishes nothing", body: sample(t, "verify-empty-events.json"), want: 200},
		{name: "previous secret accepted during rotation", body: text, sig: func(b []byte) string { return signature.Sign([]byte(prevSecret), b) }, want: 200, published: 1},
		{name: "missing signature", body: text, sig: func([]byte) string { return "" }, want: 401, wantErr: ErrSignature},
		{name: "wrong secret", body: text, sig: func(b []byte) string { return signature.Sign([]byte("other"), b) }, want: 401, wantErr: ErrSignature},
		{name: "signature over another body", body: text, sig: func([]byte) string { return sign([]byte(`{"events":[]}`)) }, want: 401, wantErr: ErrSignature},
		{name: "garbage signature", body: text, sig: func([]byte) string { return "!!!not base64!!!" }, want: 401, wantErr: ErrSignature},
		{name: "signed but not JSON", body: []byte("hello"), want: 400, wantErr: ErrBody},
		{name: "signed JSON array", body: []byte(`[{"events":[]}]`), want: 400, wantErr: ErrBody},
		{name: "no events key", body: []byte(`{"destination":"U1"}`), want: 400, wantErr: ErrBody},
		{name: "events null", body: []byte(`{"events":null}`), want: 400, wantErr: ErrBody},
		{name: "events not an array", body: []byte(`{"events":{}}`), want: 400, wantErr: ErrBody},
		{name: "event not an object", body: []byte(`{"events":[1]}`), want: 400, wantErr: ErrBody},
		{name: "event without type", body: []byte(`{"events":[{"webhookEventId":"x"}]}`), want: 400, wantErr: ErrBody},
		{name: "one bad event rejects all", body: []byte(`{"events":[{"type":"follow"},{"type":7}]}`), want: 400, wantErr: ErrBody},
		{name: "invalid UTF-8", body: []byte("{\"events\":[{\"type\":\"message\",\"x\":\"\xff\xfe\"}]}"), want: 400, wantErr: ErrBody},
		{name: "truncated body", body: text[:len(text)/2], want: 400, wantErr: ErrBody},
		{name: "over the body limit", body: text, opts: []Option{WithMaxBodyBytes(int64(len(text) - 1))}, want: 413, wantErr: ErrTooLarge},
		{name: "GET", method: "GET", body: nil, want: 405, wantErr: ErrMethod},
		{name: "destination is another bot", body: []byte(`{"destination":"Uother","events":[{"type":"follow"}]}`), opts: []Option{WithBotUserID("Ume")}, want: 401, wantErr: ErrBot},
		{name: "destination is this bot", body: []byte(`{"destination":"Ume","events":[{"type":"follow"}]}`), opts: []Option{WithBotUserID("Ume")}, want: 200, published: 1},
		{name: "bus refuses", body: text, pubErr: eventbus.ErrNotAccepted, want: 500, wantErr: ErrPublish},
		{name: "future event type forwarded", body: []byte(`{"destination":"U1","events":[{"type":"hologram","webhookEventId":"01H","hologram":{"depth":3}}]}`), want: 200, published: 1},
		{name: "chat queue refuses", body: text, queueErr: chatqueue.ErrNotQueued, want: 500, wantErr: ErrPublish, published: 1},
		{name: "EVENTS in capitals", body: []byte(`{"destination":"U1","EVENTS":[{"type":"follow"}]}`), want: 400, wantErr: ErrBody},
		{name: "Events beside events", body: []byte(`{"events":[{"type":"follow"}],"Events":[]}`), want: 400, wantErr: ErrBody},
		{name: "events given twice", body: []byte(`{"events":[],"events":[{"type":"follow"}]}`), want: 400, wantErr: ErrBody},
		{name: "TYPE in capitals", body: []byte(`{"events":[{"TYPE":"follow"}]}`), want: 400, wantErr: ErrBody},
		{name: "Type beside type", body: []byte(`{"events":[{"type":"message","Type":"follow"}]}`), want: 400, wantErr: ErrBody},
		{name: "type given twice", body: []byte(`{"events":[{"type":"message","type":"follow"}]}`), want: 400, wantErr: ErrBody},
		{name: "WebhookEventId in another case", body: []byte(`{"events":[{"type":"follow","WebhookEventID":"01A"}]}`), want: 400, wantErr: ErrBody},
		{name: "userId of the source in another case", body: []byte(`{"events":[{"type":"follow","source":{"type":"user","UserId":"U1"}}]}`), want: 400, wantErr: ErrBody},
		{name: "Destination in capitals", body: []byte(`{"Destination":"U1","events":[]}`), want: 400, wantErr: ErrBody},
		{name: "source not an object", body: []byte(`{"events":[{"type":"follow","source":"U1"}]}`), want: 400, wantErr: ErrBody},
		{name: "unknown keys in any case are forwarded", body: []byte(`{"events":[{"type":"follow","Hologram":1,"HOLOGRAM":2}],"Extra":true}`), want: 200, published: 1},
		{name: "escaped lone surrogates are forwarded", body: []byte(`{"events":[{"type":"t\ud800","x":"\udc00\ud800"}]}`), want: 200, published: 1},
		{name: "unknown key given twice is forwarded", body: []byte(`{"events":[{"type":"follow","x":1,"x":2}],"y":[],"y":{}}`), want: 200, published: 1},
		{name: "source key given twice", body: []byte(`{"events":[{"type":"follow","source":{"userId":"U1","userId":"U2"}}]}`), want: 400, wantErr: ErrBody},
		{name: "escaped key spelling the same key", body: []byte(`{"\u0065vents":[{"\u0074ype":"follow"}]}`), want: 200, published: 1},
		{name: "body within its limit, envelope over the bus's entry limit", body: bigBody(DefaultMaxBodyBytes - 40), want: 413, wantErr: ErrTooLarge},
		{name: "large body whose envelope fits", body: bigBody(DefaultMaxBodyBytes - 200), want: 200, published: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{recorder[eventbus.Entry]{err: tt.pubErr}}
			q := &fakeQueue{recorder[chatqueue.Message]{err: tt.queueErr}}
			h := newHandler(t, pub, append([]Option{WithChatQueue(q)}, tt.opts...)...)
			method := tt.method
			if method == "" {
				method = "POST"
			}
			sig := sign(tt.body)
			if tt.sig != nil {
				sig = tt.sig(tt.body)
			}
			resp, err := h.Handle(context.Background(), method, sig, tt.body)
			if resp.Status != tt.want {
				t.Fatalf("status = %d, want %d (err %v)", resp.Status, tt.want, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && err != nil {
				t.Fatalf("unexpected err %v", err)
			}
			if len(pub.sent) != tt.published {
				t.Fatalf("published %d entries, want %d", len(pub.sent), tt.published)
			}
			if tt.want != 200 && tt.want != 500 && (pub.calls != 0 || q.calls != 0) {
				t.Fatalf("publisher or queue called on a rejected request")
			}
			var js map[string]any
			if err := json.Unmarshal(resp.Body, &js); err != nil {
				t.Fatalf("response body is not JSON: %q", resp.Body)
			}
			if tt.want != 200 {
				if _, ok := js["error"]; !ok || len(resp.Body) > 64 {
					t.Fatalf("error body %q: want a short {\"error\":…}", resp.Body)
				}
				if len(tt.body) > 8 && bytes.Contains(resp.Body, tt.body[:8]) {
					t.Fatalf("error body echoes input: %q", resp.Body)
				}
			}
		})
	}
}

// Every real webhook body decodes into one entry per event whose Detail.event
// is byte-for-byte the event LINE sent, DetailType its type.
func TestEntriesCarryRawEventsUnchanged(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 10 {
		t.Fatalf("expected the LINE webhook samples in testdata, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body := sample(t, filepath.Base(f))
			var want struct {
				Destination string            `json:"destination"`
				Events      []json.RawMessage `json:"events"`
			}
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			pub := &fakePublisher{}
			h := newHandler(t, pub, WithTraceHeader(func(context.Context) string {
				return "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
			}))
			resp, err := h.Handle(context.Background(), "POST", sign(body), body)
			if err != nil || resp.Status != 200 {
				t.Fatalf("status %d err %v", resp.Status, err)
			}
			if len(pub.sent) != len(want.Events) {
				t.Fatalf("entries = %d, want %d", len(pub.sent), len(want.Events))
			}
			for i, e := range pub.sent {
				var env envelope.Detail
				if err := json.Unmarshal(e.Detail, &env); err != nil {
					t.Fatalf("detail is not an envelope: %v", err)
				}
				if !bytes.Equal(env.Event, want.Events[i]) {
					t.Fatalf("event %d changed:\n got %s\nwant %s", i, env.Event, want.Events[i])
				}
				if env.Destination != want.Destination || !env.ReceivedAt.Equal(fixedNow) {
					t.Fatalf("envelope = %+v", env)
				}
				var head struct {
					Type           string `json:"type"`
					WebhookEventID string `json:"webhookEventId"`
				}
				_ = json.Unmarshal(want.Events[i], &head)
				if e.DetailType != head.Type || e.EventID != head.WebhookEventID {
					t.Fatalf("entry %d = %s/%s, want %s/%s", i, e.DetailType, e.EventID, head.Type, head.WebhookEventID)
				}
				if !strings.HasPrefix(e.TraceHeader, "Root=1-") {
					t.Fatalf("trace header not carried: %q", e.TraceHeader)
				}
			}
		})
	}
}

// The detail is exactly the documented envelope: the three keys, receivedAt in
// RFC3339Nano, and nothing else.
func TestEnvelopeGolden(t *testing.T) {
	body := []byte(`{"destination":"U\"q","events":[{"type":"follow", "webhookEventId":"01A"}]}`)
	pub := &fakePublisher{}
	h := newHandler(t, pub)
	if resp, err := h.Handle(context.Background(), "POST", sign(body), body); err != nil {
		t.Fatalf("%d %v", resp.Status, err)
	}
	want := `{"destination":"U\"q","receivedAt":"2026-11-29T08:00:00.123456789Z","event":{"type":"follow", "webhookEventId":"01A"}}`
	if got := string(pub.sent[0].Detail); got != want {
		t.Fatalf("detail\n got %s\nwant %s", got, want)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(&fakePublisher{}); err == nil {
		t.Fatal("no secret: want error")
	}
	if _, err := New(&fakePublisher{}, WithSecrets("", "")); err == nil {
		t.Fatal("empty secrets: want error")
	}
	if _, err := New(nil, WithSecrets("s")); err == nil {
		t.Fatal("nil publisher: want error")
	}
	if _, err := New(&fakePublisher{}, WithSecrets("s"), WithMaxBodyBytes(0)); err == nil {
		t.Fatal("zero limit: want error")
	}
}

// Events with a chat go to the chat queue as well, in body order, grouped by
// chat and deduplicated by webhookEventId, each message the EventBridge-shaped
// envelope of exactly the bus entry's detail; chat-less events go to the bus
// only, and every event's detail names its chat.
func TestChatEventsAreQueuedInBodyOrder(t *testing.T) {
	body := []byte(`{"destination":"Ubot","events":[
		{"type":"message","webhookEventId":"01A","source":{"type":"user","userId":"Ualice"}},
		{"type":"activated","webhookEventId":"01B"},
		{"type":"message","webhookEventId":"01C","source":{"type":"group","groupId":"Cgroup","userId":"Ualice"}},
		{"type":"message","webhookEventId":"01D","source":{"type":"room","roomId":"Rroom"}},
		{"type":"message","webhookEventId":"01E","source":{"type":"user","userId":"Ualice"}},
		{"type":"follow","source":{"type":"user","userId":"Ubob"}},
		{"type":"message","webhookEventId":"` + strings.Repeat("x", 129) + `","source":{"type":"user","userId":"` + strings.Repeat("U", 200) + `"}}
	]}`)
	pub, q := &fakePublisher{}, &fakeQueue{}
	h := newHandler(t, pub, WithChatQueue(q), WithSource("line.test"), WithRegion("ap-northeast-1"),
		WithTraceHeader(func(context.Context) string { return "Root=1-abc" }))
	resp, err := h.Handle(context.Background(), "POST", sign(body), body)
	if err != nil || resp.Status != 200 {
		t.Fatalf("%d %v", resp.Status, err)
	}
	if len(pub.sent) != 7 {
		t.Fatalf("%d bus entries, want every event (7)", len(pub.sent))
	}
	wantChats := []string{"Ualice", "", "Cgroup", "Rroom", "Ualice", "Ubob", strings.Repeat("U", 200)}
	for i, e := range pub.sent {
		var d envelope.Detail
		if err := json.Unmarshal(e.Detail, &d); err != nil || d.Chat != wantChats[i] {
			t.Fatalf("entry %d: chat %q (%v), want %q", i, d.Chat, err, wantChats[i])
		}
	}
	type want struct{ group, dedup string }
	wants := []want{{"Ualice", "01A"}, {"Cgroup", "01C"}, {"Rroom", "01D"}, {"Ualice", "01E"}, {"Ubob", ""}, {"", ""}}
	if len(q.sent) != len(wants) {
		t.Fatalf("%d queued, want %d (chat events only)", len(q.sent), len(wants))
	}
	busOf := []int{0, 2, 3, 4, 5, 6}
	for k, m := range q.sent {
		w := wants[k]
		switch {
		case k == 4: // no webhookEventId: the raw event's hash
			if !strings.HasPrefix(m.DedupID, "sha256:") || m.Group != "Ubob" {
				t.Fatalf("message %d: group %q dedup %q", k, m.Group, m.DedupID)
			}
		case k == 5: // ids SQS cannot take: hashed, within 128 characters
			if !strings.HasPrefix(m.Group, "sha256:") || !strings.HasPrefix(m.DedupID, "sha256:") || len(m.Group) > 128 || len(m.DedupID) > 128 {
				t.Fatalf("message %d: group %q dedup %q", k, m.Group, m.DedupID)
			}
		default:
			if m.Group != w.group || m.DedupID != w.dedup {
				t.Fatalf("message %d: group %q dedup %q, want %+v", k, m.Group, m.DedupID, w)
			}
		}
		ev, d, err := envelope.Decode(m.Body)
		if err != nil {
			t.Fatalf("message %d is not an envelope: %v", k, err)
		}
		entry := pub.sent[busOf[k]]
		if string(ev.Detail) != string(entry.Detail) || ev.DetailType != entry.DetailType || ev.Source != "line.test" ||
			ev.Region != "ap-northeast-1" || ev.ID != m.DedupID || m.TraceHeader != "Root=1-abc" || d.Chat != wantChats[busOf[k]] {
			t.Fatalf("message %d: %+v / trace %q, want the detail of entry %d", k, ev, m.TraceHeader, busOf[k])
		}
	}
}

// The bus and the chat queue are given the events at the same time: a slow
// bus call does not add its time after the queue's. The bus is the real
// eventbus.Publisher, whose call waits here until the queue has been
// called.
func TestBusAndQueueAtOnce(t *testing.T) {
	text := sample(t, "message-text-user.json")
	release := make(chan struct{})
	pub := busOver(&putter{wait: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	q := &signallingQueue{release: release}
	h := newHandler(t, pub, WithChatQueue(q))
	done := make(chan int, 1)
	go func() {
		resp, _ := h.Handle(context.Background(), "POST", sign(text), text)
		done <- resp.Status
	}()
	select {
	case status := <-done:
		if status != 200 {
			t.Fatalf("status %d: the bus call waited for the queue until its deadline: they must run at once", status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after 5 s: the bus waited for the queue (or the queue for the bus): they must run at once")
	}
}

// signallingQueue lets the publisher go once it is called.
type signallingQueue struct{ release chan struct{} }

func (s *signallingQueue) Send(_ context.Context, m []chatqueue.Message) (chatqueue.Result, error) {
	close(s.release)
	return chatqueue.Result{Queued: len(m)}, nil
}

// Each size limit at its edge: a body, bus entry or queue message of
// exactly its limit is handed off, one byte more is refused with 413 and
// nothing is handed off. The sizes are counted from the documented shapes
// of the Detail and of the EventBridge event, so one byte more in what the
// webhook writes shows here; a raw U+FFFF the queue message escapes (3
// bytes more) counts against the queue's limit.
func TestLimitsAtTheirEdges(t *testing.T) {
	const (
		noChatEvent = `{"type":"message","x":"`
		chatEvent   = `{"type":"message","webhookEventId":"01A","source":{"type":"user","userId":"U1"},"x":"`
		detailHead  = `{"destination":"U1","receivedAt":"2026-11-29T08:00:00.123456789Z"`
		msgHead     = `{"version":"0","id":"01A","detail-type":"message","source":"line.webhook","account":"","time":"2026-11-29T08:00:00Z","region":"","resources":[],"detail":`
	)
	// event is an event of head, then filler (a raw U+FFFF, 3 bytes, or
	// nothing) and n bytes of 'a' in a string.
	event := func(head, filler string, n int) string { return head + filler + strings.Repeat("a", n) + `"}` }
	// detail is the Detail's length around an event of n bytes.
	detail := func(n int, chat bool) int {
		d := len(detailHead) + len(`,"event":`) + n + 1
		if chat {
			d += len(`,"chat":"U1"`)
		}
		return d
	}
	entryRoom := len(eventbus.DefaultSource) + len("message") + detail(0, false)
	msgRoom := len(msgHead) + detail(0, true) + 1
	fixed := len(noChatEvent) + len(`"}`)
	fixedChat := len(chatEvent) + len(`"}`)
	body := func(ev string) []byte { return []byte(`{"destination":"U1","events":[` + ev + `]}`) }
	tests := []struct {
		name     string
		body     []byte
		maxBody  int64
		want     int
		messages int
	}{
		{name: "bus entry at its limit", body: body(event(noChatEvent, "", eventbus.MaxEntryBytes-entryRoom-fixed)), want: 200},
		{name: "bus entry one byte over", body: body(event(noChatEvent, "", eventbus.MaxEntryBytes-entryRoom-fixed+1)), want: 413},
		{name: "queue message at its limit", body: body(event(chatEvent, "", chatqueue.MaxMessageBytes-msgRoom-fixedChat)), want: 200, messages: 1},
		{name: "queue message one byte over", body: body(event(chatEvent, "", chatqueue.MaxMessageBytes-msgRoom-fixedChat+1)), want: 413},
		{name: "escaped U+FFFF brings the message to its limit", body: body(event(chatEvent, "\uFFFF", chatqueue.MaxMessageBytes-msgRoom-fixedChat-6)), want: 200, messages: 1},
		{name: "escaped U+FFFF takes the message over", body: body(event(chatEvent, "\uFFFF", chatqueue.MaxMessageBytes-msgRoom-fixedChat-5)), want: 413},
		{name: "body at its limit", body: body(event(noChatEvent, "", 10)), maxBody: int64(len(body(event(noChatEvent, "", 10)))), want: 200},
		{name: "body one byte over", body: body(event(noChatEvent, "", 11)), maxBody: int64(len(body(event(noChatEvent, "", 10)))), want: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.body
			maxBody := tt.maxBody
			if maxBody == 0 {
				maxBody = 2 << 20
			}
			pub, q := &fakePublisher{}, &fakeQueue{}
			h := newHandler(t, pub, WithChatQueue(q), WithMaxBodyBytes(maxBody))
			resp, err := h.Handle(context.Background(), "POST", sign(b), b)
			if resp.Status != tt.want {
				t.Fatalf("status %d (%v), want %d", resp.Status, err, tt.want)
			}
			if tt.want != 200 {
				if !errors.Is(err, ErrTooLarge) || pub.calls != 0 || q.calls != 0 {
					t.Fatalf("err %v, %d bus and %d queue calls: want ErrTooLarge and nothing handed off", err, pub.calls, q.calls)
				}
				return
			}
			if len(pub.sent) != 1 || len(q.sent) != tt.messages {
				t.Fatalf("%d entries and %d messages, want 1 and %d", len(pub.sent), len(q.sent), tt.messages)
			}
			if e := pub.sent[0]; tt.messages == 0 && tt.maxBody == 0 && len(eventbus.DefaultSource)+len(e.DetailType)+len(e.Detail) != eventbus.MaxEntryBytes {
				t.Fatalf("the entry counts %d bytes, want exactly the limit", len(eventbus.DefaultSource)+len(e.DetailType)+len(e.Detail))
			}
			if tt.messages == 1 && len(q.sent[0].Body) != chatqueue.MaxMessageBytes {
				t.Fatalf("the message is %d bytes, want exactly the limit", len(q.sent[0].Body))
			}
		})
	}
}
