package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/motoserver"
)

// busEvent is the part of an EventBridge event (as an SQS body) the test reads.
type busEvent struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	ReplayName string          `json:"replay-name"`
	Detail     json.RawMessage `json:"detail"`
}

// TestReplayOnMoto runs a replay against moto_server's EventBridge: a bus
// like the stack's (linegate's rules, one to a work queue, an archive of the
// webhook source) plus a rule of the user's own, events published, then
// replayed; the replay must complete and its events reach linegate's rule's
// queue again, marked with the replay's name, and not the user's rule.
func TestReplayOnMoto(t *testing.T) {
	ep := motoserver.Start(t)
	cfg := motoserver.Config(ep)
	eb := eventbridge.NewFromConfig(cfg)
	q := sqs.NewFromConfig(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	bus, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String("linegate")})
	if err != nil {
		t.Fatalf("create bus: %v", err)
	}
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	qa, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("queue arn: %v", err)
	}
	pattern := `{"source":["line.webhook"]}`
	yours, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("yours")})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	ya, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: yours.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("queue arn: %v", err)
	}
	for _, r := range []struct{ name, pattern, queue string }{
		{"replay", pattern, qa.Attributes["QueueArn"]},
		{"background", `{"source":["not.this"]}`, qa.Attributes["QueueArn"]},
		{"yours", pattern, ya.Attributes["QueueArn"]}, // a rule the user added to linegate's bus
	} {
		if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(r.name), EventBusName: aws.String("linegate"), EventPattern: aws.String(r.pattern)}); err != nil {
			t.Fatalf("put rule %s: %v", r.name, err)
		}
		if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(r.name), EventBusName: aws.String("linegate"),
			Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(r.queue)}}}); err != nil {
			t.Fatalf("put targets %s: %v", r.name, err)
		}
	}
	// The stack's archive has a name CloudFormation generates; Start finds it by its bus.
	if _, err := eb.CreateArchive(ctx, &eventbridge.CreateArchiveInput{ArchiveName: aws.String("EventArchive-X1y2Z3"),
		EventSourceArn: bus.EventBusArn, EventPattern: aws.String(pattern), RetentionDays: aws.Int32(14)}); err != nil {
		t.Fatalf("create archive: %v", err)
	}

	now := time.Now().UTC().Truncate(time.Second)
	inWindow := []string{"01HW-IN-1", "01HW-IN-2"}
	const outOfWindow = "01HW-OLD"
	var entries []ebtypes.PutEventsRequestEntry
	for _, id := range inWindow {
		entries = append(entries, entry(id, now.Add(-10*time.Minute)))
	}
	entries = append(entries, entry(outOfWindow, now.Add(-3*time.Hour)))
	out, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("put events: %v (failed %d)", err, out.FailedEntryCount)
	}
	first := drain(ctx, t, q, aws.ToString(queue.QueueUrl), 3)
	drain(ctx, t, q, aws.ToString(yours.QueueUrl), 3)
	for _, e := range first {
		if e.ReplayName != "" {
			t.Fatalf("a first delivery is marked replayed: %+v", e)
		}
	}

	res, err := Start(ctx, eb, Options{Bus: "linegate", Since: now.Add(-time.Hour), Until: now, Wait: true, PollEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	wantName := DefaultName(now.Add(-time.Hour), now)
	if res.State != "COMPLETED" || res.Name != wantName || res.Archive != "EventArchive-X1y2Z3" ||
		res.BusARN != aws.ToString(bus.EventBusArn) || !strings.HasSuffix(res.ARN, ":replay/"+wantName) || !strings.HasSuffix(res.ArchiveARN, ":archive/EventArchive-X1y2Z3") {
		t.Fatalf("result = %+v", res)
	}
	d, err := eb.DescribeReplay(ctx, &eventbridge.DescribeReplayInput{ReplayName: aws.String(res.Name)})
	if err != nil {
		t.Fatalf("describe replay: %v", err)
	}
	if got := aws.ToString(d.Destination.Arn); got != res.BusARN {
		t.Fatalf("replay destination = %s; want the bus %s", got, res.BusARN)
	}
	if got := aws.ToString(d.EventSourceArn); got != res.ArchiveARN {
		t.Fatalf("replay source = %s; want the archive %s", got, res.ArchiveARN)
	}
	if f := d.Destination.FilterArns; len(f) != 2 || !strings.HasSuffix(f[0], ":rule/linegate/replay") || !strings.HasSuffix(f[1], ":rule/linegate/background") {
		t.Fatalf("replay FilterArns = %v; want linegate's replay and background rules", f)
	}

	replayed := map[string]busEvent{}
	for _, e := range drain(ctx, t, q, aws.ToString(queue.QueueUrl), 0) {
		if e.ReplayName != res.Name {
			t.Fatalf("a message after the replay is not marked with its name %q: %+v", res.Name, e)
		}
		replayed[webhookEventID(t, e.Detail)] = e
	}
	for i, id := range inWindow {
		e, ok := replayed[id]
		if !ok {
			t.Fatalf("event %s (in the window) was not replayed to the rule's queue; replayed: %v", id, keys(replayed))
		}
		if e.Source != "line.webhook" || e.DetailType != "message" || !jsonEqual(t, e.Detail, entries[i].Detail) {
			t.Fatalf("replayed event %s changed: %+v", id, e)
		}
	}

	t.Run("the user's own rule gets no replay", func(t *testing.T) {
		if n := len(drain(ctx, t, q, aws.ToString(yours.QueueUrl), 0)); n != 0 {
			t.Skipf("MOTO DIVERGES FROM AWS: moto replayed %d events to a rule the replay's FilterArns does not name "+
				"(AWS sends a replay only to the rules in FilterArns); FilterArns is checked by the request only", n)
		}
	})

	t.Run("same window twice is refused", func(t *testing.T) {
		_, err := Start(ctx, eb, Options{Bus: "linegate", Since: now.Add(-time.Hour), Until: now})
		if !errors.Is(err, ErrExists) {
			t.Fatalf("second replay of the window: err = %v; want ErrExists", err)
		}
	})

	t.Run("events before since are not replayed", func(t *testing.T) {
		if _, ok := replayed[outOfWindow]; ok {
			t.Skip("MOTO DIVERGES FROM AWS: moto 5.x replays the whole archive, ignoring EventStartTime/EventEndTime " +
				"(AWS replays only events whose time is in the window); the window is not checked against moto")
		}
	})
}

func entry(id string, at time.Time) ebtypes.PutEventsRequestEntry {
	detail := fmt.Sprintf(`{"destination":"U0000","receivedAt":%q,"event":{"type":"message","webhookEventId":%q,"mode":"active","timestamp":%d}}`,
		at.Format(time.RFC3339Nano), id, at.UnixMilli())
	return ebtypes.PutEventsRequestEntry{EventBusName: aws.String("linegate"), Source: aws.String("line.webhook"),
		DetailType: aws.String("message"), Detail: aws.String(detail), Time: aws.Time(at)}
}

// drain receives until the queue is empty (want > 0: until want messages
// came), deleting what it reads.
func drain(ctx context.Context, t *testing.T, q *sqs.Client, url string, want int) []busEvent {
	t.Helper()
	var got []busEvent
	for empty := 0; empty < 2 && (want == 0 || len(got) < want); {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			empty++
		}
		for _, m := range out.Messages {
			var e busEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
				t.Fatalf("queue body is not an EventBridge event: %v: %s", err, aws.ToString(m.Body))
			}
			got = append(got, e)
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	}
	if want > 0 && len(got) != want {
		t.Fatalf("queue had %d message(s); want %d", len(got), want)
	}
	return got
}

func webhookEventID(t *testing.T, detail json.RawMessage) string {
	t.Helper()
	var d struct {
		Event struct {
			WebhookEventID string `json:"webhookEventId"`
		} `json:"event"`
	}
	if err := json.Unmarshal(detail, &d); err != nil {
		t.Fatalf("detail is not the envelope: %v: %s", err, detail)
	}
	return d.Event.WebhookEventID
}

func jsonEqual(t *testing.T, a json.RawMessage, b *string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(aws.ToString(b)), &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func keys(m map[string]busEvent) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
