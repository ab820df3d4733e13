package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/chatqueue"
)

// replayBody is the SQS body the replay rule delivers: the EventBridge
// event, with the replay's name, and the webhook's Detail.
func replayBody(chat, id string) string {
	return fmt.Sprintf(`{"version":"0","id":"e-%s","detail-type":"message","source":"line.webhook","account":"1","time":"2026-12-01T00:00:00Z","region":"ap-northeast-1","resources":[],"replay-name":"r1","detail":{"destination":"U1","receivedAt":"2026-12-01T00:00:00Z","chat":%q,"event":{"type":"message","webhookEventId":%q,"source":{"type":"user","userId":%q}}}}`, id, chat, id, chat)
}

// failingQueue refuses the events named in refuse, and everything after
// the first it refuses (as chatqueue.Sender does: nothing later is sent).
type failingQueue struct {
	fakeQueue
	refuse map[string]bool
}

func (f *failingQueue) Send(ctx context.Context, msgs []chatqueue.Message) (chatqueue.Result, error) {
	res := chatqueue.Result{Calls: 1}
	for i, m := range msgs {
		if f.refuse[m.EventID] {
			for _, later := range msgs[i:] {
				res.Failed = append(res.Failed, chatqueue.Failure{EventID: later.EventID, Code: "Throttling"})
			}
			break
		}
		_ = f.take([]chatqueue.Message{m}, keepMessage)
		res.Queued++
	}
	if len(res.Failed) > 0 {
		return res, chatqueue.ErrNotQueued
	}
	return res, nil
}

// Replayed chat events go to the chat queue unchanged, each in its own
// chat's message group (as live events are): never one constant group for
// all. Their deduplication ids are the replay's, not the live events'.
func TestReplaysGoToTheirChatsGroups(t *testing.T) {
	q := &failingQueue{}
	h := newHandler(t, &fakePublisher{}, WithChatQueue(q))
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: replayBody("Ua", "01A")},
		{MessageId: "m2", Body: replayBody("Ub", "01B")},
		{MessageId: "m3", Body: replayBody("Ua", "01C")},
	}}
	resp, err := h.Replays(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	if len(q.sent) != 3 {
		t.Fatalf("%d messages sent, want 3", len(q.sent))
	}
	for i, want := range []struct{ group, dedup, body string }{
		{"Ua", replayDedupID("r1", "01A"), ev.Records[0].Body}, {"Ub", replayDedupID("r1", "01B"), ev.Records[1].Body}, {"Ua", replayDedupID("r1", "01C"), ev.Records[2].Body},
	} {
		m := q.sent[i]
		if m.Group != want.group || m.DedupID != want.dedup || string(m.Body) != want.body {
			t.Errorf("message %d: group %q dedup %q body %s; want %q %q and the record's body", i, m.Group, m.DedupID, m.Body, want.group, want.dedup)
		}
	}
}

// What did not reach the chat queue, and what is no replayed chat event,
// is reported failed (SQS keeps it and hands it out again, then
// dead-letters it); the rest is acknowledged.
func TestReplaysReportWhatWasNotForwarded(t *testing.T) {
	q := &failingQueue{refuse: map[string]bool{"01C": true}}
	h := newHandler(t, &fakePublisher{}, WithChatQueue(q))
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: replayBody("Ua", "01A")},
		{MessageId: "bad-json", Body: `{"detail":`},
		{MessageId: "no-chat", Body: `{"detail":{"event":{"type":"activated"}}}`},
		{MessageId: "m2", Body: replayBody("Ub", "01B")},
		{MessageId: "m3", Body: replayBody("Ua", "01C")},
		{MessageId: "m4", Body: replayBody("Ub", "01D")},
	}}
	resp, err := h.Replays(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if fmt.Sprint(failed) != "[bad-json no-chat m3 m4]" {
		t.Fatalf("failures %v, want [bad-json no-chat m3 m4]", failed)
	}
	if len(q.sent) != 2 {
		t.Fatalf("%d forwarded, want m1 and m2", len(q.sent))
	}
}

// Without a chat queue there is nowhere to forward: an error, not a silent
// acknowledgement.
func TestReplaysNeedTheChatQueue(t *testing.T) {
	h := newHandler(t, &fakePublisher{})
	if _, err := h.Replays(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: replayBody("Ua", "01A")}}}); err == nil {
		t.Fatal("no error without a chat queue")
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrReplay), ErrReplay) {
		t.Fatal("ErrReplay does not wrap")
	}
}

// FuzzReplayMessage: any record body is routed or refused, never panics,
// and a routed one keeps its body and names a group SQS takes.
func FuzzReplayMessage(f *testing.F) {
	f.Add(replayBody("Ua", "01A"))
	f.Add(`{"detail":{"chat":"","event":{}}}`)
	f.Add(`{"detail":{"chat":"C\u0000x","event":{"webhookEventId":7}}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := replayMessage(events.SQSMessage{Body: body})
		if err != nil {
			if !errors.Is(err, ErrReplay) {
				t.Fatalf("error %v does not wrap ErrReplay", err)
			}
			return
		}
		if string(m.Body) != body || m.Group == "" || len(m.Group) > 128 || m.DedupID == "" || len(m.DedupID) > 128 {
			t.Fatalf("message %+v for body %q", m, body)
		}
	})
}

// One replayed event has one deduplication id, whichever delivery of the
// replay queue carries it; another replay, or the live event, another.
func TestReplayDedupIDs(t *testing.T) {
	a, _ := replayMessage(events.SQSMessage{Body: replayBody("Ua", "01A")})
	again, _ := replayMessage(events.SQSMessage{MessageId: "other delivery", Body: replayBody("Ua", "01A")})
	other, _ := replayMessage(events.SQSMessage{Body: strings.Replace(replayBody("Ua", "01A"), `"replay-name":"r1"`, `"replay-name":"r2"`, 1)})
	if a.DedupID != again.DedupID || a.DedupID == other.DedupID || a.DedupID == chatqueue.DedupID("01A", nil) || len(a.DedupID) > 128 {
		t.Fatalf("dedup ids %q / %q / %q", a.DedupID, again.DedupID, other.DedupID)
	}
}
