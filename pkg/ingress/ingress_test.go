package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/pkg/envelope"
	"github.com/linegate/linegate/pkg/eventbus"
	"github.com/linegate/linegate/pkg/signature"
)

const (
	secret     = "test-channel-secret"
	prevSecret = "previous-channel-secret"
)

var fixedNow = time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.UTC)

// fakePublisher records what it was given and fails on demand.
type fakePublisher struct {
	mu      sync.Mutex
	entries []eventbus.Entry
	calls   int
	err     error
}

func (f *fakePublisher) Publish(_ context.Context, entries []eventbus.Entry) (eventbus.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return eventbus.Result{Accepted: len(entries) - 1, Failed: []eventbus.Failure{{Code: "InternalFailure"}}}, f.err
	}
	f.entries = append(f.entries, entries...)
	return eventbus.Result{Accepted: len(entries), Calls: 1}, nil
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

func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{err: tt.pubErr}
			h := newHandler(t, pub, tt.opts...)
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
			if len(pub.entries) != tt.published {
				t.Fatalf("published %d entries, want %d", len(pub.entries), tt.published)
			}
			if tt.want != 200 && tt.want != 500 && pub.calls != 0 {
				t.Fatalf("publisher called on a rejected request")
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
			if len(pub.entries) != len(want.Events) {
				t.Fatalf("entries = %d, want %d", len(pub.entries), len(want.Events))
			}
			for i, e := range pub.entries {
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
				var head eventHead
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
	if got := string(pub.entries[0].Detail); got != want {
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
