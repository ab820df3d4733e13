package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

// noticesOf returns the dead-letter notices published, parsed.
func noticesOf(t *testing.T, pubs []*sns.PublishInput) []crash.DeadLetter {
	t.Helper()
	var out []crash.DeadLetter
	for _, in := range pubs {
		if aws.ToString(in.MessageAttributes[crash.AttributeKind].StringValue) != crash.KindDeadLetter {
			continue
		}
		d, err := crash.ParseDeadLetter([]byte(aws.ToString(in.Message)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// panicRouter panics on "boom", fails for good on "permanent", and fails
// transiently with a token in the error on "fail".
func panicRouter() *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(_ context.Context, _ *bot.Event, text string) error {
		switch text {
		case "boom":
			panic("boom: the handler crashed")
		case "permanent":
			return bot.Permanent(errors.New("cannot ever work"))
		case "fail":
			return errors.New("transient, token Bearer abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH")
		}
		return nil
	})
	return r
}

// Every record the worker dead-letters itself is announced on the ops
// topic with what failed; a record that panicked carries its crash's stack
// signature, the same one the notifier computes from its crash report.
func TestDeadLettersAreAnnounced(t *testing.T) {
	tests := []struct {
		name       string
		msg        events.SQSMessage
		receive    int
		wantReason string
		wantSig    bool
	}{
		{"permanent", chatMessage("p1", "Ualice", 1, "permanent"), 1, reasonPermanent, false},
		{"transient on the last receive", chatMessage("t5", "Ualice", 5, "fail"), 5, reasonExhausted, false},
		{"a panic on the last receive", chatMessage("b5", "Ualice", 5, "boom"), 5, reasonExhausted, true},
		{"a transient failure before the last receive", chatMessage("t1", "Ualice", 1, "fail"), 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			f := newFixture(t, panicRouter(), WithQueues(newFakeSQS(5)), WithMetrics(m))
			if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{tt.msg}}); err != nil {
				t.Fatal(err)
			}
			got := noticesOf(t, f.ops.Published())
			if tt.wantReason == "" {
				if len(got) != 0 {
					t.Fatalf("%d notices for a record that was not dead-lettered", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d notices, want 1", len(got))
			}
			d := got[0]
			if d.Queue != "linegate-InteractiveDLQ.fifo" || d.Source != "linegate-InteractiveQueue.fifo" || d.Reason != tt.wantReason ||
				d.EventType != "message" || d.WebhookEventID != tt.msg.MessageId || d.Function != "WorkerFunction" || d.ReceiveCount != tt.receive {
				t.Fatalf("notice %+v", d)
			}
			if strings.Contains(d.Error, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH") {
				t.Fatalf("a token reached the notice: %q", d.Error)
			}
			if (d.Signature != "") != tt.wantSig {
				t.Fatalf("signature %q, want one: %v", d.Signature, tt.wantSig)
			}
			if tt.wantSig {
				var rep crash.Report
				for _, in := range f.ops.Published() {
					if aws.ToString(in.MessageAttributes[crash.AttributeKind].StringValue) == crash.KindCrash {
						rep, _ = crash.Parse([]byte(aws.ToString(in.Message)))
					}
				}
				if rep.Signature() != d.Signature || len(d.Frames) == 0 {
					t.Fatalf("the notice's signature\n%s\nis not its crash report's\n%s", d.Signature, rep.Signature())
				}
			}
			if m.Total("DeadLetterNoticesPublished") != 1 {
				t.Fatalf("metrics %v", m.Counts())
			}
		})
	}
}

// A notice that cannot be published is counted and logged; the record is
// dead-lettered all the same (the DLQ's alarm and the notifier's sweep of
// DLQ depths still see it).
func TestDeadLetterNoticePublishFailure(t *testing.T) {
	topic := &failingTopic{}
	m := &testmetrics.Recorder{}
	f := newFixture(t, panicRouter(), WithQueues(newFakeSQS(5)), WithMetrics(m), WithCrashReports(topic, "arn:aws:sns:us-east-1:0:ops"))
	resp, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{chatMessage("p1", "Ualice", 1, "permanent")}})
	if err != nil || len(resp.BatchItemFailures) != 0 || topic.calls != 1 {
		t.Fatalf("resp %+v err %v publishes %d", resp, err, topic.calls)
	}
	if m.Total("DeadLetterNoticesFailed") != 1 || f.seen[0].Outcome != OutcomeDeadLettered {
		t.Fatalf("metrics %v, result %+v", m.Counts(), f.seen[0])
	}
}

// The crash marker is a completed marker once the report is out: a start
// of `linegate local --state` releases claims left in progress, and a
// released marker would page the same crash again.
func TestCrashMarkerIsCompletedOncePublished(t *testing.T) {
	f := newFixture(t, boomRouter("boom"))
	ev := textEvent("01CM1", "boom", time.Now(), "")
	if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("a", 1, ev)}}); err != nil {
		t.Fatal(err)
	}
	marker := idempotency.CrashKey(idempotency.Key("01CM1", nil))
	if err := f.store.Claim(context.Background(), marker, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("claiming the crash marker again: %v, want ErrCompleted", err)
	}
	if err := f.store.Release(context.Background(), marker); err != nil {
		t.Fatal(err)
	}
	if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("a", 2, ev)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.ops.Published()); n != 1 {
		t.Fatalf("%d crash reports after a release of claims, want 1", n)
	}
}

// A crash report that could not be published leaves no marker: the next
// receive reports it.
func TestCrashMarkerReleasedWhenNotPublished(t *testing.T) {
	topic := &flakyTopic{fail: 1}
	f := newFixture(t, boomRouter("boom"), WithCrashReports(topic, "arn:aws:sns:us-east-1:0:ops"))
	ev := textEvent("01CM2", "boom", time.Now(), "")
	for i := 1; i <= 2; i++ {
		if _, err := f.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message(fmt.Sprint("a", i), i, ev)}}); err != nil {
			t.Fatal(err)
		}
	}
	if topic.calls != 2 || topic.ok != 1 {
		t.Fatalf("publishes %d, delivered %d: want the failed report sent again at the next receive", topic.calls, topic.ok)
	}
}

type flakyTopic struct{ fail, calls, ok int }

func (f *flakyTopic) Publish(context.Context, *sns.PublishInput, ...func(*sns.Options)) (*sns.PublishOutput, error) {
	f.calls++
	if f.calls <= f.fail {
		return nil, errors.New("throttled")
	}
	f.ok++
	return &sns.PublishOutput{MessageId: aws.String("m")}, nil
}
