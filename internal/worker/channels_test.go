package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/testmessenger"
	"github.com/linegate/linegate/internal/testsns"
	"github.com/linegate/linegate/pkg/bot"
)

// channelMessage is message for an event that came through channel ch's
// webhook: the envelope's Detail names the channel ("" writes none, as
// the webhook does for the default channel).
func channelMessage(msgID, ch string, receive int, raw json.RawMessage) events.SQSMessage {
	m := message(msgID, receive, raw)
	if ch == "" {
		return m
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(m.Body), &body)
	body["detail"].(map[string]any)["channel"] = ch
	b, _ := json.Marshal(body)
	m.Body = string(b)
	return m
}

// channelsFixture is a worker whose records are answered through one
// recording messenger per channel: "" and "b"; any other channel has none.
type channelsFixture struct {
	proc  *Processor
	store *idempotency.Memory
	line  map[string]*testmessenger.Messenger
	mu    sync.Mutex
	seen  []Result
}

func newChannelsFixture(t *testing.T, router *bot.Router) *channelsFixture {
	t.Helper()
	f := &channelsFixture{store: idempotency.NewMemory(), line: map[string]*testmessenger.Messenger{"": {}, "b": {}}}
	p, err := New(router, f.store, WithStateStore(f.store),
		WithChannelMessengers(func(ch string) (bot.Messenger, error) {
			if m, ok := f.line[ch]; ok {
				return m, nil
			}
			return nil, fmt.Errorf("%w: %q", channel.ErrUnknown, ch)
		}),
		WithObserver(func(r Result) { f.mu.Lock(); f.seen = append(f.seen, r); f.mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	f.proc = p
	return f
}

// counterRouter answers each text with how many texts its chat's session
// has counted, and the channel the event came through; "push" pushes.
func counterRouter() *bot.Router {
	r := bot.NewRouter()
	r.OnText("push", func(ctx context.Context, e *bot.Event, _ string) error {
		return e.PushText(ctx, e.Source.UserID, "pushed")
	})
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		var n int
		s, err := e.Session(ctx, &n)
		if err != nil {
			return err
		}
		n++
		if err := s.Save(ctx, n); err != nil {
			return err
		}
		return e.ReplyText(ctx, fmt.Sprintf("%s: %d in channel %q", text, n, e.Channel))
	})
	return r
}

func (f *channelsFixture) run(t *testing.T, msgs ...events.SQSMessage) []Result {
	t.Helper()
	f.seen = nil
	resp, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp
	return f.seen
}

// One user ID in two channels is two chats: each channel's session counts
// its own messages, each event is answered through its own channel's
// client, and the same webhookEventId in two channels is two events (a
// redelivery within a channel stays a duplicate).
func TestChannelsKeepTheirOwnSessionsAndKeys(t *testing.T) {
	f := newChannelsFixture(t, counterRouter())
	now := time.Now()
	res := f.run(t, channelMessage("m1", "", 1, textEvent("01A", "hi", now, "rt1")))
	res = append(res, f.run(t, channelMessage("m2", "b", 1, textEvent("01B", "hi", now, "rt2")))...)
	res = append(res, f.run(t, channelMessage("m3", "b", 1, textEvent("01A", "again", now, "rt3")))...)
	res = append(res, f.run(t, channelMessage("m4", "b", 2, textEvent("01B", "hi", now, "rt2")))...)
	res = append(res, f.run(t, channelMessage("m5", "", 1, textEvent("01C", "more", now, "rt4")))...)
	want := []struct {
		outcome Outcome
		channel string
	}{{OutcomeOK, ""}, {OutcomeOK, "b"}, {OutcomeOK, "b"}, {OutcomeDuplicate, "b"}, {OutcomeOK, ""}}
	if len(res) != len(want) {
		t.Fatalf("%d results: %+v", len(res), res)
	}
	for i, w := range want {
		if res[i].Outcome != w.outcome || res[i].Channel != w.channel {
			t.Errorf("record %d: outcome %s, channel %q; want %s, %q (%v)", i+1, res[i].Outcome, res[i].Channel, w.outcome, w.channel, res[i].Err)
		}
	}
	if got, want := f.line[""].Texts(), []string{`hi: 1 in channel ""`, `more: 2 in channel ""`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the default channel answered %q, want %q", got, want)
	}
	if got, want := f.line["b"].Texts(), []string{`hi: 1 in channel "b"`, `again: 2 in channel "b"`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("channel b answered %q, want %q", got, want)
	}
	for _, k := range []string{idempotency.SessionKey("", "Uuser0001"), idempotency.SessionKey("b", "Uuser0001")} {
		if v, err := f.store.Get(context.Background(), k); err != nil || v.Version != 2 {
			t.Errorf("session %s: version %d (%v), want 2 saves", k, v.Version, err)
		}
	}
	if sends := f.line["b"].Sends(); len(sends) != 2 || sends[0].Target.Channel != "b" {
		t.Errorf("channel b's sends %+v: want two, targeted in channel b", sends)
	}
}

// A push's retry key is its channel's: the default channel's is the key a
// stack without channels sent, a named channel's another.
func TestChannelRetryKeys(t *testing.T) {
	f := newChannelsFixture(t, counterRouter())
	f.run(t, channelMessage("m1", "", 1, textEvent("01P", "push", time.Now(), "")),
		channelMessage("m2", "b", 1, textEvent("01P", "push", time.Now(), "")))
	d, b := f.line[""].Pushes(), f.line["b"].Pushes()
	if len(d) != 1 || len(b) != 1 {
		t.Fatalf("pushes: default %+v, b %+v", d, b)
	}
	if d[0].RetryKey != lineapi.RetryKey("01P", 0) || b[0].RetryKey != lineapi.ChannelRetryKey("b", "01P", 0) || b[0].RetryKey == d[0].RetryKey {
		t.Fatalf("retry keys: default %s, b %s", d[0].RetryKey, b[0].RetryKey)
	}
}

// An event of a channel the worker has no client for fails (it is retried,
// its claim released, nothing sent) and runs once the channel is there.
func TestUnknownChannelFailsAndIsRetried(t *testing.T) {
	f := newChannelsFixture(t, counterRouter())
	msg := channelMessage("m1", "c", 1, textEvent("01U", "hi", time.Now(), "rt"))
	res := f.run(t, msg)
	if len(res) != 1 || res[0].Outcome != OutcomeFailed || !errors.Is(res[0].Err, channel.ErrUnknown) || res[0].Channel != "c" {
		t.Fatalf("%+v", res)
	}
	f.line["c"] = &testmessenger.Messenger{}
	msg.Attributes["ApproximateReceiveCount"] = "2"
	res = f.run(t, msg)
	if len(res) != 1 || res[0].Outcome != OutcomeOK || len(f.line["c"].Texts()) != 1 {
		t.Fatalf("%+v, channel c answered %q", res, f.line["c"].Texts())
	}
}

// WithMessenger alone serves the default channel only.
func TestWithMessengerServesTheDefaultChannelOnly(t *testing.T) {
	m := &testmessenger.Messenger{}
	var mu sync.Mutex
	var seen []Result
	p, err := New(echoRouter(), idempotency.NewMemory(), WithMessenger(func() bot.Messenger { return m }),
		WithObserver(func(r Result) { mu.Lock(); seen = append(seen, r); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		channelMessage("m1", "", 1, textEvent("01D", "a", time.Now(), "rt")),
		channelMessage("m2", "b", 1, textEvent("01E", "b", time.Now(), "rt2")),
	}})
	slices.SortFunc(seen, func(a, b Result) int { return strings.Compare(a.MessageID, b.MessageID) })
	if len(seen) != 2 || seen[0].Outcome != OutcomeOK || seen[1].Outcome != OutcomeFailed || !errors.Is(seen[1].Err, channel.ErrUnknown) {
		t.Fatalf("%+v", seen)
	}
}

// withChannel puts record m in channel ch's envelope.
func withChannel(t *testing.T, m events.SQSMessage, ch string) events.SQSMessage {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(m.Body), &body); err != nil {
		t.Fatal(err)
	}
	body["detail"].(map[string]any)["channel"] = ch
	b, _ := json.Marshal(body)
	m.Body = string(b)
	return m
}

// The newest edit of a message is kept per channel: a group with one ID in
// two channels has two histories, so channel b's first edit is not stale
// behind the default channel's newer one, while an older edit within b is.
func TestEditsAreOrderedPerChannel(t *testing.T) {
	b := &editBot{}
	store := idempotency.NewMemory()
	p, err := New(b.router(), store, WithStateStore(store))
	if err != nil {
		t.Fatal(err)
	}
	var seen []Outcome
	for _, m := range []events.SQSMessage{
		edit(t, "01E2", 2000, "newest in default"),
		withChannel(t, edit(t, "01E3", 1000, "first in b"), "b"),
		withChannel(t, edit(t, "01E4", 500, "older in b"), "b"),
	} {
		res := p.process(context.Background(), m, true)
		seen = append(seen, res.Outcome)
	}
	if fmt.Sprint(seen) != fmt.Sprint([]Outcome{OutcomeOK, OutcomeOK, OutcomeStale}) || b.texts() != "newest in default|first in b" {
		t.Fatalf("outcomes %v, handler saw %q", seen, b.texts())
	}
	if v, _ := store.Get(context.Background(), idempotency.EditKey("b", "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f", editedID(t))); v.Version == 0 {
		t.Fatal("no edit mark under channel b's key")
	}
}

// editedID is the sample's edited message ID.
func editedID(t *testing.T) string {
	t.Helper()
	return editSample(t)["message"].(map[string]any)["id"].(string)
}

// A panic on a named channel's event is reported with its channel (the
// crash card names it); the default channel's report names none.
func TestCrashReportNamesTheChannel(t *testing.T) {
	r := bot.NewRouter()
	r.OnText("", func(context.Context, *bot.Event, string) error { panic("boom") })
	topic := &testsns.Topic{}
	store := idempotency.NewMemory()
	p, err := New(r, store, WithStateStore(store), WithCrashReports(topic, "arn:aws:sns:ap-northeast-1:1:ops"),
		WithChannelMessengers(func(string) (bot.Messenger, error) { return &testmessenger.Messenger{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range []string{"b", ""} {
		before := len(topic.Published())
		id := fmt.Sprintf("01CRASHCHANNEL%d", i)
		if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
			channelMessage("m"+id, ch, 1, textEventFrom(id, "U1", "hi")),
		}}); err != nil {
			t.Fatal(err)
		}
		pub := topic.Published()
		if len(pub) != before+1 {
			t.Fatalf("channel %q: %d reports published, want one more than %d", ch, len(pub), before)
		}
		rep, err := crash.Parse([]byte(aws.ToString(pub[len(pub)-1].Message)))
		if err != nil || rep.Channel != ch || rep.WebhookEventID != id {
			t.Fatalf("channel %q: report %+v (%v)", ch, rep, err)
		}
	}
}
