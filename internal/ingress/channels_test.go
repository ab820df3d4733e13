package ingress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/testmetrics"
)

const (
	secretB = "channel-b-secret"
	botB    = "U0000000000000000000000000000b0b"
)

func signB(body []byte) string { return signature.Sign([]byte(secretB), body) }

// A channel is picked by the path and checked with its own secrets and bot
// user ID only: a body signed for one channel is refused on another's
// path, a channel the webhook does not serve is 404, and nothing is
// published for any refused body.
func TestChannelsAreCheckedWithTheirOwnSecrets(t *testing.T) {
	text := sample(t, "message-text-user.json")
	forB := bytes.Replace(text, []byte(`"events"`), []byte(`"destination":"`+botB+`","events"`), 1)
	tests := []struct {
		name    string
		channel string
		sig     string
		body    []byte
		want    int
		wantErr error
	}{
		{"b's body on b's path", "b", signB(forB), forB, 200, nil},
		{"b's body on the default path", "", signB(forB), forB, 401, ErrSignature},
		{"the default's body on b's path", "b", sign(text), text, 401, ErrSignature},
		{"b's previous secret on b's path", "b", signature.Sign([]byte("channel-b-previous"), forB), forB, 200, nil},
		{"the default's previous secret on b's path", "b", signature.Sign([]byte(prevSecret), forB), forB, 401, ErrSignature},
		{"b's secret, another bot's destination", "b", signB(text), text, 401, ErrBot},
		{"a channel not served", "c", signB(forB), forB, 404, ErrChannel},
		{"not a channel name", "../b", signB(forB), forB, 404, ErrChannel},
		{"the default by its label", "default", sign(text), text, 404, ErrChannel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub, q := &fakePublisher{}, &fakeQueue{}
			m := &testmetrics.Recorder{}
			h := newHandler(t, pub, WithChatQueue(q), WithMetrics(m),
				WithChannel(Channel{Name: "b", Secrets: []string{secretB, "", "channel-b-previous"}, BotUserID: botB}))
			resp, err := h.HandleChannel(context.Background(), tt.channel, "POST", tt.sig, tt.body)
			if resp.Status != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("status %d (%s), err %v; want %d, %v", resp.Status, resp.Body, err, tt.want, tt.wantErr)
			}
			if tt.want != 200 {
				if len(pub.sent)+len(q.sent) != 0 {
					t.Fatalf("published %d entries and %d messages for a refused body", len(pub.sent), len(q.sent))
				}
				if tt.want == 404 && m.Counts()[MetricRequestsRejected] != 1 {
					t.Fatalf("RequestsRejected %v, want 1", m.Counts()[MetricRequestsRejected])
				}
				return
			}
			if len(pub.sent) != 1 || len(q.sent) != 1 {
				t.Fatalf("%d entries, %d messages", len(pub.sent), len(q.sent))
			}
		})
	}
}

// A named channel's events carry its name in the Detail (the bus entry and
// the chat queue message alike) and go to its own message group under its
// own deduplication id; the default channel's are exactly what a stack
// without channels wrote.
func TestChannelTravelsWithItsEvents(t *testing.T) {
	text := sample(t, "message-text-user.json")
	const user, id = "u206d25c2ea6bd87c17655609a1c37cb8", "01FZ74ASS536FW97EX38NKCZQK"
	run := func(ch, sig string) (envelope.Detail, chatqueue.Message, []byte) {
		t.Helper()
		pub, q := &fakePublisher{}, &fakeQueue{}
		h := newHandler(t, pub, WithChatQueue(q), WithChannel(Channel{Name: "b", Secrets: []string{secretB}}))
		if resp, err := h.HandleChannel(context.Background(), ch, "POST", sig, text); resp.Status != 200 {
			t.Fatalf("%d %v", resp.Status, err)
		}
		ev, d, err := envelope.Decode(q.sent[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Detail) != string(pub.sent[0].Detail) {
			t.Fatalf("the bus and the chat queue carry different details:\n%s\n%s", ev.Detail, pub.sent[0].Detail)
		}
		return d, q.sent[0], pub.sent[0].Detail
	}
	d, m, detail := run("", sign(text))
	if d.Channel != "" || bytes.Contains(detail, []byte(`"channel"`)) || m.Group != user || m.DedupID != id {
		t.Fatalf("default channel: channel %q, group %q, dedup %q, detail %s", d.Channel, m.Group, m.DedupID, detail)
	}
	d, m, detail = run("b", signB(text))
	if d.Channel != "b" || !bytes.Contains(detail, []byte(`"channel":"b"`)) {
		t.Fatalf("channel b: channel %q, detail %s", d.Channel, detail)
	}
	if m.Group != chatqueue.ChannelGroupID("b", user) || m.Group == user || m.DedupID != chatqueue.ChannelDedupID("b", id, nil) || m.DedupID == id {
		t.Fatalf("channel b: group %q, dedup %q", m.Group, m.DedupID)
	}
}

// Each channel re-reads its own secrets: a rotation of b's is picked up on
// b's path, and a bad signature on b's path never reads the default's.
func TestChannelSecretRereadIsPerChannel(t *testing.T) {
	text := sample(t, "message-text-user.json")
	defStore, bStore := &rotatingStore{}, &rotatingStore{}
	defStore.set(nil, secret)
	bStore.set(nil, secretB)
	m := &testmetrics.Recorder{}
	h := newHandler(t, &fakePublisher{}, WithSecretRefresh(defStore.read, time.Hour), WithMetrics(m),
		WithChannel(Channel{Name: "b", Secrets: []string{secretB}, Reread: bStore.read, Cooldown: time.Hour}))
	bStore.set(nil, "b-rotated", secretB)
	resp, _ := h.HandleChannel(context.Background(), "b", "POST", signature.Sign([]byte("b-rotated"), text), text)
	if resp.Status != 200 || bStore.reads.Load() != 1 || defStore.reads.Load() != 0 {
		t.Fatalf("status %d, b's reads %d, the default's %d", resp.Status, bStore.reads.Load(), defStore.reads.Load())
	}
	// The default channel's secret on b's path: b's re-read is in its
	// cooldown, the default's is never asked.
	resp, _ = h.HandleChannel(context.Background(), "b", "POST", sign(text), text)
	if resp.Status != 401 || bStore.reads.Load() != 1 || defStore.reads.Load() != 0 {
		t.Fatalf("status %d, b's reads %d, the default's %d", resp.Status, bStore.reads.Load(), defStore.reads.Load())
	}
	if m.Counts()[MetricSecretRotations] != 1 {
		t.Fatalf("rotations %v", m.Counts()[MetricSecretRotations])
	}
}

// The adapters take the channel from the route: API Gateway's {channel}
// path parameter, net/http's {channel} wildcard; /webhook is the default.
func TestAdaptersRouteByChannel(t *testing.T) {
	text := sample(t, "message-text-user.json")
	h := newHandler(t, &fakePublisher{}, WithChannel(Channel{Name: "b", Secrets: []string{secretB}}))
	for _, tt := range []struct {
		params map[string]string
		sig    string
		want   int
	}{
		{nil, sign(text), 200},
		{nil, signB(text), 401},
		{map[string]string{"channel": "b"}, signB(text), 200},
		{map[string]string{"channel": "b"}, sign(text), 401},
		{map[string]string{"channel": "c"}, signB(text), 404},
	} {
		resp, err := h.APIGateway(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", PathParameters: tt.params,
			Headers: map[string]string{"x-line-signature": tt.sig}, Body: string(text)})
		if err != nil || resp.StatusCode != tt.want {
			t.Errorf("API Gateway %v: %d %v, want %d", tt.params, resp.StatusCode, err, tt.want)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook", h)
	mux.Handle("/webhook/{channel}", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tt := range []struct {
		path, sig string
		want      int
	}{
		{"/webhook", sign(text), 200},
		{"/webhook", signB(text), 401},
		{"/webhook/b", signB(text), 200},
		{"/webhook/b", sign(text), 401},
		{"/webhook/c", signB(text), 404},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tt.path, bytes.NewReader(text))
		req.Header.Set(signature.Header, tt.sig)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.want {
			t.Errorf("POST %s: %d %s, want %d", tt.path, res.StatusCode, body, tt.want)
		}
		if tt.want == 404 && !strings.Contains(string(body), "unknown channel") {
			t.Errorf("POST %s: body %s", tt.path, body)
		}
	}
}

// A replayed event of a named channel goes back to that channel's message
// group for its chat, not the default channel's.
func TestReplaysKeepTheirChannel(t *testing.T) {
	q := &failingQueue{}
	h := newHandler(t, &fakePublisher{}, WithChatQueue(q))
	body := strings.Replace(replayBody("Ua", "01A"), `"detail":{"destination":"U1",`, `"detail":{"destination":"U1","channel":"b",`, 1)
	resp, err := h.Replays(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: body}, {MessageId: "m2", Body: replayBody("Ua", "01A")},
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 || len(q.sent) != 2 {
		t.Fatalf("%+v %v, %d sent", resp, err, len(q.sent))
	}
	if q.sent[0].Group != chatqueue.ChannelGroupID("b", "Ua") || q.sent[1].Group != "Ua" || q.sent[0].DedupID == q.sent[1].DedupID {
		t.Fatalf("groups %q %q, dedup ids %q %q", q.sent[0].Group, q.sent[1].Group, q.sent[0].DedupID, q.sent[1].DedupID)
	}
}

func TestNewValidatesChannels(t *testing.T) {
	for name, c := range map[string][]Channel{
		"bad name":    {{Name: "B", Secrets: []string{"s"}}},
		"no secret":   {{Name: "b", Secrets: []string{""}}},
		"given twice": {{Name: "b", Secrets: []string{"s"}}, {Name: "b", Secrets: []string{"t"}}},
	} {
		opts := []Option{WithSecrets("x")}
		for _, ch := range c {
			opts = append(opts, WithChannel(ch))
		}
		if _, err := New(&fakePublisher{}, opts...); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}
