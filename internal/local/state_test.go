package local

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/idempotency/idempotencytest"
	"github.com/linegate/linegate/internal/lineplatform"
)

// samWorkerStore is the idempotency store of a worker run by `sam local
// invoke` against rt: pkg/idempotency's DynamoDB store through the SDK,
// over the network to rt's AWS endpoint, on the template's table.
func samWorkerStore(t *testing.T, rt *Runtime) *idempotency.DynamoDB {
	t.Helper()
	db := dynamodb.NewFromConfig(aws.Config{Region: rt.Topology().Region, BaseEndpoint: aws.String(rt.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("defaultkey", "defaultsecret", "")})
	return idempotency.NewDynamoDB(db, rt.Topology().Tables[0].Name)
}

func webhookEventID(t *testing.T, ev json.RawMessage) string {
	t.Helper()
	var e struct{ WebhookEventID string }
	if err := json.Unmarshal(ev, &e); err != nil || e.WebhookEventID == "" {
		t.Fatalf("no webhookEventId in %s: %v", ev, err)
	}
	return e.WebhookEventID
}

// One idempotency table in local: an event a worker under `sam local
// invoke` already handled is a duplicate for the in-process worker, and an
// event the in-process worker handled is a duplicate for that worker.
func TestOneIdempotencyTableForInProcessAndSAMWorkers(t *testing.T) {
	rt, p := start(t, Config{TimeScale: 30})
	sam := samWorkerStore(t, rt)
	ctx := context.Background()

	handledBySAM := p.Text("U00000000000000000000000000000a01", "hello from sam")
	id := webhookEventID(t, handledBySAM)
	if err := sam.Claim(ctx, id, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sam.Complete(ctx, id, time.Hour); err != nil {
		t.Fatal(err)
	}
	deliver(t, p, handledBySAM)
	waitEvent(t, rt, 10*time.Second, id, "a duplicate for the in-process worker", func(v eventView) bool { return v.Outcome == "duplicate" })
	if _, ok := findMessage(t, rt, "U00000000000000000000000000000a01", "reply", "hello from sam"); ok {
		t.Fatal("the in-process worker answered an event the sam worker had handled")
	}

	id = deliver(t, p, p.Text("U00000000000000000000000000000a02", "hello in process"))
	waitEvent(t, rt, 10*time.Second, id, "handled in process", func(v eventView) bool { return v.Outcome == "ok" })
	if err := sam.Claim(ctx, id, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("the sam worker's claim of an event handled in process: %v, want ErrCompleted", err)
	}
}

// With --state, a restart keeps what the first run did: the event log with
// its outcomes, a dead letter in its DLQ, the idempotency table, and the
// chat queue's deduplication window (LINE redelivering the first body after
// the restart is dropped by SQS, so nothing runs twice).
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{TimeScale: 30, StateDir: dir}
	rt, p := start(t, cfg)
	user := "U00000000000000000000000000000b01"
	hello := p.Text(user, "hello before")
	id := deliver(t, p, hello)
	waitEvent(t, rt, 10*time.Second, id, "handled", func(v eventView) bool { return v.Outcome == "ok" })
	dead := deliver(t, p, p.Text("U00000000000000000000000000000b02", "probe:permanent"))
	waitEvent(t, rt, 10*time.Second, dead, "dead-lettered", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	dlq, _ := rt.queue("InteractiveDLQ")
	eventually(t, 10*time.Second, "the dead letter in "+dlq.Name, func() bool { return getQueue(t, rt, dlq.Name).Visible == 1 })
	rt.Close()

	rt, _ = start(t, cfg)
	p = lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret), lineplatform.WithTimeout(deliveryTimeout))
	if v, ok := event(t, rt, id); !ok || v.Outcome != "ok" || v.Deliveries != 1 {
		t.Fatalf("event log after the restart: %+v (found %v), want the first run's ok", v, ok)
	}
	if q := getQueue(t, rt, dlq.Name); q.Visible != 1 {
		t.Fatalf("%s after the restart: %+v, want the dead letter", dlq.Name, q)
	}
	if err := samWorkerStore(t, rt).Claim(context.Background(), id, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("claim of the handled event after the restart: %v, want ErrCompleted", err)
	}
	// LINE redelivers the first body (as after a timeout): accepted, and
	// dropped by the chat queue's deduplication window kept on disk.
	if d, err := p.Deliver(context.Background(), hello); err != nil || !d.Delivered {
		t.Fatalf("redelivery: %+v %v", d, err)
	}
	waitEvent(t, rt, 10*time.Second, id, "the redelivery accepted", func(v eventView) bool { return v.Deliveries == 2 })
	fence(t, rt, p, user, 10*time.Second) // had the chat queue taken the redelivery, it would have been received by now
	v, _ := event(t, rt, id)
	if v.Outcome != "ok" || v.ReceiveCount != 1 {
		t.Fatalf("after the redelivery: %+v, want ok and no second receive (deduplicated by SQS)", v)
	}
	if n := len(sentMatching(t, rt, user, "", "hello before")); n != 0 {
		t.Fatalf("the local LINE API (fresh after the restart) got %d echoes of the redelivered event, want none", n)
	}
}

// A claim the previous process left in the state directory (its handler
// died with it) is released when linegate local starts again on the
// directory, so the event runs at its next receive rather than after the
// claim expires; completed markers stay. The claim here is held for ten
// minutes: without the release the event could not run within the wait.
func TestStartReleasesClaimsLeftByThePreviousRun(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{TimeScale: 30, StateDir: dir}
	rt, p := start(t, cfg)
	ctx := context.Background()
	sam := samWorkerStore(t, rt)

	done := deliver(t, p, p.Text("U00000000000000000000000000000c01", "handled before"))
	waitEvent(t, rt, 10*time.Second, done, "handled", func(v eventView) bool { return v.Outcome == "ok" })
	// A handler that claimed this event and died holding the claim: every
	// receive of the event finds it held.
	stuck := p.Text("U00000000000000000000000000000c02", "claimed when the process died")
	id := webhookEventID(t, stuck)
	if err := sam.Claim(ctx, id, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	deliver(t, p, stuck)
	waitEvent(t, rt, 10*time.Second, id, "received and found claimed", func(v eventView) bool { return v.ReceiveCount >= 1 })
	rt.Close()

	out := &syncBuffer{}
	cfg.Out = out
	rt, _ = start(t, cfg)
	waitEvent(t, rt, 20*time.Second, id, "handled after the restart", func(v eventView) bool { return v.Outcome == "ok" })
	// Its reply token died with the first run's LINE API: the echo is pushed.
	if _, ok := findMessage(t, rt, "U00000000000000000000000000000c02", "", "claimed when the process died"); !ok {
		t.Fatal("no echo of the event whose claim was released")
	}
	if err := samWorkerStore(t, rt).Claim(ctx, done, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("claim of the event completed before the restart: %v, want ErrCompleted (completed markers stay)", err)
	}
	if !strings.Contains(out.String(), "released 1 claim(s) left in progress by the previous run") {
		t.Errorf("the console does not say a claim was released:\n%s", out.String())
	}
}

// The record of a reply's attempt is kept in the idempotency table with
// --state, and the start's release of claims left in progress leaves it:
// after a crash, the retry of an event whose reply was attempted still
// knows it. The table passes the attempts' contract as Lambda's does.
func TestReplyAttemptsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{TimeScale: 30, StateDir: dir}
	rt, _ := start(t, cfg)
	ctx := context.Background()
	const id = "01M8ATTEMPT0000000000000001"
	sam := samWorkerStore(t, rt)
	if err := sam.Claim(ctx, id, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := idempotency.NewAttempts(sam, 48*time.Hour).Begin(ctx, idempotency.ReplyKey(id)); err != nil {
		t.Fatal(err)
	}
	rt.Close()

	rt, _ = start(t, cfg)
	sam = samWorkerStore(t, rt)
	if err := sam.Claim(ctx, id, time.Minute); err != nil {
		t.Fatalf("the claim left by the first run: %v, want it released at the start", err)
	}
	if err := idempotency.NewAttempts(sam, 48*time.Hour).Begin(ctx, idempotency.ReplyKey(id)); !errors.Is(err, idempotency.ErrAttempted) {
		t.Fatalf("the reply's attempt after the restart: %v, want ErrAttempted", err)
	}
	db := dynamodb.NewFromConfig(aws.Config{Region: rt.Topology().Region, BaseEndpoint: aws.String(rt.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("defaultkey", "defaultsecret", "")})
	idempotencytest.RunAttempts(t, func(_ *testing.T, clock *idempotencytest.Clock) idempotency.VersionedStore {
		return idempotency.NewDynamoDB(db, rt.Topology().Tables[0].Name, idempotency.WithDynamoClock(clock.Now))
	})
}
