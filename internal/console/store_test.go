package console

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

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
	s.Webhook("", body(ev("E1", "message", fromAlice), ev("E2", "message", fromGroup), `{"type":"activated","webhookEventId":"E3"}`), t0)
	s.Loading("", alice, 5, t0.Add(time.Millisecond))
	s.Sent("", alice, "reply", "", "r1", []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi E1"}`)}, t0.Add(2*time.Millisecond))
	s.Sent("", group, "push", "key", "r2", []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi all"}`)}, t0.Add(3*time.Millisecond))
	// A LINE redelivery of E1 is not a second message.
	s.Webhook("", body(ev("E1", "message", fromAlice)), t0.Add(4*time.Millisecond))

	got := s.Transcript("", alice, 0, 0)
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
	if after := s.Transcript("", alice, got[1].Seq, 0); len(after) != 1 || after[0].Kind != "reply" {
		t.Fatalf("entries after %d: %+v", got[1].Seq, after)
	}
	g := s.Transcript("", group, 0, 0)
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

// A read mark joins its chat's transcript after what came before it, with
// the message it covers; one without a chat (a token the local API never
// issued) joins none.
func TestStoreReadMarks(t *testing.T) {
	var topics []string
	s := NewStore(0, 0, func(ts ...string) { topics = append(topics, ts...) })
	t0 := time.Unix(1_800_000_000, 0)
	s.Webhook("", body(ev("E1", "message", fromAlice)), t0)
	s.Read("", alice, "1001", t0.Add(time.Millisecond))
	s.Read("", "", "1002", t0.Add(2*time.Millisecond))
	got := s.Transcript("", alice, 0, 0)
	if len(got) != 2 || got[1].Kind != "read" || got[1].From != "bot" || got[1].ReadMessageID != "1001" || got[1].Seq <= got[0].Seq {
		t.Fatalf("alice's chat: %+v", got)
	}
	if len(s.Chats()) != 1 {
		t.Fatalf("chats %+v: a mark without a chat made one", s.Chats())
	}
	if strings.Join(topics, " ") != TopicChat+" "+TopicEvents+" "+TopicChat {
		t.Fatalf("topics %v", topics)
	}
}

func TestStoreIsBounded(t *testing.T) {
	s := NewStore(10, 3, nil)
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 40 {
		s.Webhook("", body(ev(fmt.Sprintf("E%02d", i), "message", fromAlice)), t0)
	}
	if n := len(s.Transcript("", alice, 0, 0)); n < 10 || n > 12 {
		t.Fatalf("%d entries kept, want 10 (and at most a quarter more)", n)
	}
	if _, ok := s.Activity("E00"); ok {
		t.Fatal("the oldest activity is kept")
	}
	if _, ok := s.Activity("E39"); !ok {
		t.Fatal("the newest activity is gone")
	}
	// A forgotten event's id is forgotten too: a later delivery shows again.
	s.Webhook("", body(ev("E00", "message", fromAlice)), t0)
	last := s.Transcript("", alice, 0, 0)
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
	s.Webhook("", body(ev("E1", "message", fromAlice)), t0)
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
{"level":"INFO","message":"b","webhookEventId":"E2","RecordsProcessed":1,"_aws":{"CloudWatchMetrics":[]}}
{"level":"WARN","message":"c mentions E1","webhookEventId":"E3"}
`
	// Written in pieces that cut lines anywhere.
	for i := 0; i < len(lines); i += 7 {
		_, _ = l.Write([]byte(lines[i:min(i+7, len(lines))]))
	}
	all := l.Lines("", 0)
	if len(all) != 3 || !strings.Contains(string(all[0]), `"a"`) {
		t.Fatalf("kept %s, want the 3 log lines (b carries its metrics) without the EMF-only line or text", all)
	}
	if e1 := l.Lines("E1", 0); len(e1) != 1 || !strings.Contains(string(e1[0]), `"a"`) {
		t.Fatalf("E1's lines: %s (a line that only mentions E1 is another event's)", e1)
	}
	_, _ = l.Write([]byte(`{"message":"d"}` + "\n"))
	if got := l.Lines("", 2); len(got) != 2 || !strings.Contains(string(got[1]), `"d"`) || strings.Contains(string(got[0]), `"a"`) {
		t.Fatalf("newest two: %s", got)
	}
}

// The console's bookkeeping of one webhook body with one event: what it
// adds to each webhook request in linegate local (not in Lambda).
func BenchmarkStoreWebhook(b *testing.B) {
	s := NewStore(0, 0, nil)
	t0 := time.Unix(1_800_000_000, 0)
	bodies := make([][]byte, 4096)
	for i := range bodies {
		bodies[i] = body(ev(fmt.Sprintf("01HZ%022d", i), "message", fromAlice))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Webhook("", bodies[i%len(bodies)], t0)
	}
}

// One user in two channels is two chats: each channel's entries are its
// own transcript, and the chat list names each chat's channel.
func TestStoreChannels(t *testing.T) {
	s := NewStore(0, 0, nil)
	t0 := time.Now()
	s.Webhook("", body(ev("E1", "message", fromAlice)), t0)
	s.Webhook("b", body(ev("E2", "message", fromAlice)), t0.Add(time.Millisecond))
	s.Sent("b", alice, "reply", "", "r1", []json.RawMessage{json.RawMessage(`{"type":"text","text":"from b"}`)}, t0.Add(2*time.Millisecond))
	d, b := s.Transcript("", alice, 0, 0), s.Transcript("b", alice, 0, 0)
	if len(d) != 1 || d[0].WebhookEventID != "E1" || len(b) != 2 || b[0].WebhookEventID != "E2" || b[1].Kind != "reply" || b[1].Channel != "b" {
		t.Fatalf("default %+v, b %+v", d, b)
	}
	chats := s.Chats()
	if len(chats) != 2 || chats[0].Channel != "b" || chats[1].Channel != "" || chats[0].ID != alice || chats[1].ID != alice {
		t.Fatalf("chats %+v", chats)
	}
	if a, ok := s.Activity("E2"); !ok || a.Channel != "b" {
		t.Fatalf("E2's activity %+v", a)
	}
}
