package local

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/compose/workerfn"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

func exampleBot(c config.Worker) *bot.Router { return app.NewWith(app.Config{Probes: c.Probes}) }

// settled waits until every event of ids has a final outcome in
// /_local/events and the long-work queue holds nothing, visible or in
// flight: every flush of the burst has run, so what LINE received is all
// there will be.
func settled(t *testing.T, rt *Runtime, timeout time.Duration, ids []string, outcome func(id string) string) {
	t.Helper()
	var last []eventView
	eventuallySaw(t, timeout, "every event handled and the long-work queue drained", func() bool {
		last = last[:0]
		for _, id := range ids {
			e, ok := event(t, rt, id)
			if !ok || e.Outcome != outcome(id) {
				return false
			}
			last = append(last, e)
		}
		q := getQueue(t, rt, longQueueName(t, rt))
		return q.Visible == 0 && q.InFlight == 0
	}, func() string { b, _ := json.Marshal(last); return string(b) })
}

// longQueueName is the name the runtime gave the template's LongQueue.
func longQueueName(t *testing.T, rt *Runtime) string {
	var qs []queueViewJSON
	getJSON(t, rt.URL()+"/_local/queues", &qs)
	for _, q := range qs {
		if strings.Contains(q.Name, "LongQueue") {
			return q.Name
		}
	}
	t.Fatal("no LongQueue in /_local/queues")
	return ""
}

// The example bot's "ask" route is debounced by 2 s: three "ask" messages
// sent in quick succession get one answer quoting all three, after the
// bot marked them read (the console's transcript shows the mark). The
// window is conversational time: with the cloud's time compressed 60-fold
// the answer still comes at least 2 s after the last message.
func TestAskBurstGetsOneAnswer(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60, Bot: exampleBot})
	const user = "U2222222222222222222222222222222a"
	var ids []string
	var lastSent time.Time
	for _, part := range []string{"ask what is", "ask the capital", "ask of France?"} {
		// The window starts when the worker takes the message, which can
		// be before the webhook's answer reaches us (the chat queue has it
		// before the bus does): the send's start is the earliest it can be.
		lastSent = time.Now()
		ids = append(ids, deliver(t, lp, lp.Text(user, part)))
	}
	want := "You asked, in 3 messages: \u201cwhat is\u201d \u201cthe capital\u201d \u201cof France?\u201d"
	waitMessage(t, rt, 30*time.Second, user, "reply", want)
	if waited := time.Since(lastSent); waited < app.AskWindow {
		t.Fatalf("answered %v after the last message: the %v window was compressed", waited, app.AskWindow)
	}
	settled(t, rt, 30*time.Second, ids, func(string) string { return "ok" })
	if got := sentMatching(t, rt, user, "", ""); len(got) != 1 {
		t.Fatalf("%d sends to the user, want the one answer:\n%s", len(got), describeMessages(got))
	}

	var reads []struct {
		Chat, MessageID string
	}
	getJSON(t, rt.URL()+"/_local/line/reads", &reads)
	var third struct{ Message struct{ ID string } }
	if len(reads) != 1 || reads[0].Chat != user {
		t.Fatalf("read marks %+v, want one in the user's chat", reads)
	}
	var transcript []console.Entry
	getJSON(t, rt.URL()+"/_local/chat?chatId="+user, &transcript)
	var kinds []string
	for _, en := range transcript {
		kinds = append(kinds, en.From+":"+en.Kind)
		if en.Kind == "event" && en.WebhookEventID == ids[2] {
			_ = json.Unmarshal(en.Event, &third)
		}
	}
	if got := strings.Join(kinds, " "); got != "user:event user:event user:event bot:read bot:reply" {
		t.Fatalf("transcript %s, want the three messages, the read mark, the answer", got)
	}
	if mark := transcript[3].ReadMessageID; mark == "" || mark != third.Message.ID || reads[0].MessageID != mark {
		t.Fatalf("the read mark covers message %q (LINE's %q); want the newest, %q", mark, reads[0].MessageID, third.Message.ID)
	}
}

// A messageEdited body from LINE's sample, in a group: the example bot
// answers with what the message says now. Edits delivered out of order
// (the newer first) get one answer, the newer's; the older one is stale
// and changes nothing.
func TestEditsAnsweredNewestOnly(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60, Bot: exampleBot})
	b, err := os.ReadFile("../../pkg/bot/testdata/messageEdited-group.json")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Events []map[string]any }
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	const group = "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f"
	now := time.Now().UnixMilli()
	edit := func(id, token string, at int64, text string) json.RawMessage {
		ev := body.Events[0]
		ev["webhookEventId"], ev["replyToken"], ev["timestamp"] = id, token, at
		ev["message"].(map[string]any)["text"] = text
		raw, _ := json.Marshal(ev)
		return raw
	}
	newer := deliver(t, lp, edit("01K0EDIT0000000000000002", "edit-token-2", now, "see you at 7"))
	waitMessage(t, rt, 30*time.Second, group, "reply", "Edited: now it says \u201csee you at 7\u201d")
	older := deliver(t, lp, edit("01K0EDIT0000000000000001", "edit-token-1", now-5000, "see you at 6"))
	settled(t, rt, 30*time.Second, []string{newer, older}, func(id string) string {
		if id == older {
			return "stale"
		}
		return "ok"
	})
	if got := sentMatching(t, rt, group, "", "Edited"); len(got) != 1 {
		t.Fatalf("%d answers to edits, want the newer's only:\n%s", len(got), describeMessages(got))
	}
}

// The same burst against moto_server through the real SDK clients: SQS's
// own per-message DelaySeconds and message attributes carry the flushes.
// moto hands a FIFO group's messages to concurrent consumers (the
// divergence SQS/FIFOGroupExclusiveWithConcurrentConsumers in cloudtest), so
// the parts may be appended in any order there; one answer holds all three.
func TestAskBurstOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	rt, lp := start(t, Config{TimeScale: 1, EndpointURL: ep, Bot: exampleBot})
	const user = "U5555555555555555555555555555555e"
	var ids []string
	for _, part := range []string{"ask one", "ask two", "ask three"} {
		ids = append(ids, deliver(t, lp, lp.Text(user, part)))
	}
	// Against moto a flush can meet its chat's other flush in flight (the
	// divergence above) and wait out its retry backoff, several seconds a
	// receive: the deadlines leave room for that on a loaded machine.
	waitMessage(t, rt, 120*time.Second, user, "reply", "You asked, in 3 messages: ")
	settled(t, rt, 120*time.Second, ids, func(string) string { return "ok" })
	got := sentMatching(t, rt, user, "", "")
	if len(got) != 1 {
		t.Fatalf("%d sends to the user, want the one answer:\n%s", len(got), describeMessages(got))
	}
	for _, part := range []string{"\u201cone\u201d", "\u201ctwo\u201d", "\u201cthree\u201d"} {
		if !strings.Contains(string(got[0].Messages[0]), part) {
			t.Fatalf("the answer %s does not quote %s", got[0].Messages[0], part)
		}
	}
}

// sendRecorder is the worker's queues with only SendMessage, recorded.
type sendRecorder struct {
	workerfn.Queues
	got []*sqs.SendMessageInput
}

func (s *sendRecorder) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.got = append(s.got, in)
	return &sqs.SendMessageOutput{}, nil
}

// The in-memory cloud divides SQS delays by the time scale; a debounce
// flush's delay is the user's pause, so the worker's queues multiply it
// back (within SQS's 15 minutes). Other messages, and an endpoint that
// keeps real time (scale 1), are left as they are.
func TestDebounceDelaysKeepConversationTime(t *testing.T) {
	flush := map[string]sqstypes.MessageAttributeValue{worker.AttrDebounce: {DataType: aws.String("String"), StringValue: aws.String(`{}`)}}
	tests := []struct {
		name  string
		scale float64
		in    *sqs.SendMessageInput
		want  int32
	}{
		{"a flush at scale 60", 60, &sqs.SendMessageInput{DelaySeconds: 2, MessageAttributes: flush}, 120},
		{"capped at 15 minutes", 60, &sqs.SendMessageInput{DelaySeconds: 30, MessageAttributes: flush}, 900},
		{"a flush due now", 60, &sqs.SendMessageInput{DelaySeconds: 0, MessageAttributes: flush}, 0},
		{"not a flush", 60, &sqs.SendMessageInput{DelaySeconds: 2}, 2},
		{"an endpoint in real time", 1, &sqs.SendMessageInput{DelaySeconds: 2, MessageAttributes: flush}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &sendRecorder{}
			q := redriveAware{Queues: rec, scale: tt.scale}
			before := tt.in.DelaySeconds
			if _, err := q.SendMessage(context.Background(), tt.in); err != nil {
				t.Fatal(err)
			}
			if len(rec.got) != 1 || rec.got[0].DelaySeconds != tt.want {
				t.Fatalf("sent %+v, want DelaySeconds %d", rec.got, tt.want)
			}
			if tt.in.DelaySeconds != before {
				t.Fatal("the caller's input was changed")
			}
		})
	}
}
