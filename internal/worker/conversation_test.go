package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

// tableStore is everything the worker keeps in the idempotency table:
// records and crash markers (idempotency.Store), steps and sessions
// (StateStore). Both real stores are one.
type tableStore interface {
	idempotency.Store
	StateStore
}

// faultyStore injects failures into a tableStore: the next call of a kind
// fails with its error while the field is set.
type faultyStore struct {
	tableStore
	mu                              sync.Mutex
	claimValueErr, completeValueErr error
	getErr, putErr                  error
}

func (f *faultyStore) fault(err *error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *err
}

func (f *faultyStore) ClaimValue(ctx context.Context, key string, d time.Duration) ([]byte, error) {
	if err := f.fault(&f.claimValueErr); err != nil {
		return nil, err
	}
	return f.tableStore.ClaimValue(ctx, key, d)
}

func (f *faultyStore) CompleteValue(ctx context.Context, key string, v []byte, d time.Duration) error {
	if err := f.fault(&f.completeValueErr); err != nil {
		return err
	}
	return f.tableStore.CompleteValue(ctx, key, v, d)
}

func (f *faultyStore) Get(ctx context.Context, key string) (idempotency.Versioned, error) {
	if err := f.fault(&f.getErr); err != nil {
		return idempotency.Versioned{}, err
	}
	return f.tableStore.Get(ctx, key)
}

func (f *faultyStore) Put(ctx context.Context, key string, v []byte, expected int64, d time.Duration) (int64, error) {
	if err := f.fault(&f.putErr); err != nil {
		return 0, err
	}
	return f.tableStore.Put(ctx, key, v, expected, d)
}

// conversation is a worker over one store running a bot that charges once
// and replies, keeps a two-question survey in the chat's session, and
// panics on request.
type conversation struct {
	t       *testing.T
	store   *faultyStore
	clock   *testclock.Clock
	fix     *fixture
	metrics *testmetrics.Recorder
	logs    *bytes.Buffer // written under slog's lock, read after Handle returned

	charges       atomic.Int32
	failReply     atomic.Bool // the reply after the charge fails once
	chargeErr     error       // what the charge returns, if set
	failAfterSave atomic.Bool // the survey fails once after saving
	raceHook      func()      // runs between a survey's load and save
	sessionErr    error       // the last session error the survey saw
}

type paid struct {
	Receipt string `json:"receipt"`
	Yen     int    `json:"yen"`
}

// survey is the session of the question flow: the answers so far.
type survey struct {
	Answers []string `json:"answers"`
}

func newConversation(t *testing.T, newStore func(t *testing.T, clock *testclock.Clock) tableStore) *conversation {
	t.Helper()
	c := &conversation{t: t, clock: testclock.New(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)),
		metrics: &testmetrics.Recorder{}, logs: &bytes.Buffer{}}
	c.store = &faultyStore{tableStore: newStore(t, c.clock)}
	r := bot.NewRouter()
	r.OnText("pay", func(ctx context.Context, e *bot.Event, _ string) error {
		p, err := bot.Once(ctx, e, "charge", func(context.Context) (paid, error) {
			if c.chargeErr != nil {
				return paid{}, c.chargeErr
			}
			n := c.charges.Add(1)
			return paid{Receipt: fmt.Sprintf("r-%d", n), Yen: 500}, nil
		})
		if err != nil {
			return err
		}
		if c.failReply.CompareAndSwap(true, false) {
			return errors.New("LINE 500 after the charge")
		}
		return e.ReplyText(ctx, fmt.Sprintf("Paid %d yen, receipt %s", p.Yen, p.Receipt))
	})
	r.OnText("survey ", func(ctx context.Context, e *bot.Event, text string) error {
		var s survey
		sess, err := e.Session(ctx, &s)
		if err != nil {
			c.sessionErr = err
			return err
		}
		s.Answers = append(s.Answers, strings.TrimPrefix(text, "survey "))
		if c.raceHook != nil {
			c.raceHook()
		}
		if err := sess.Save(ctx, s); err != nil {
			c.sessionErr = err
			if errors.Is(err, bot.ErrSessionConflict) {
				return e.ReplyText(ctx, "conflict: please answer again")
			}
			return err
		}
		if c.failAfterSave.CompareAndSwap(true, false) {
			return errors.New("crashed after saving the session")
		}
		return e.ReplyText(ctx, strings.Join(s.Answers, ","))
	})
	r.OnText("boom", func(context.Context, *bot.Event, string) error { panic("boom: nil order") })
	// The records' claims, crash markers, steps and sessions share a table.
	c.fix = newFixtureOn(t, r, c.store, WithStateStore(c.store), WithClock(c.clock.Now), WithMetrics(c.metrics),
		WithLogger(slog.New(slog.NewJSONHandler(c.logs, nil))))
	return c
}

// send delivers one record of event id with text on its receive'th
// delivery and returns whether it failed.
func (c *conversation) send(msgID, id, text string, receive int) bool {
	c.t.Helper()
	resp, err := c.fix.proc.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message(msgID, receive, textEvent(id, text, c.clock.Now(), "")),
	}})
	if err != nil {
		c.t.Fatal(err)
	}
	return len(resp.BatchItemFailures) == 1
}

func (c *conversation) replies() []string {
	var out []string
	for _, m := range c.fix.line.Messages() {
		for _, raw := range m.Messages {
			var msg struct{ Text string }
			if json.Unmarshal(raw, &msg) == nil && msg.Text != "" {
				out = append(out, msg.Text)
			}
		}
	}
	return out
}

// runConversationSuite checks bot.Once, Event.Session and the crash marker
// through the worker on the store newStore builds, with failures injected
// around it.
func runConversationSuite(t *testing.T, newStore func(t *testing.T, clock *testclock.Clock) tableStore) {
	t.Run("a retried handler charges once", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.failReply.Store(true)
		if !c.send("m1", "01PAY", "pay", 1) {
			t.Fatal("the first attempt (reply failed after the charge) did not fail")
		}
		if c.send("m1", "01PAY", "pay", 2) {
			t.Fatal("the retry failed")
		}
		if n := c.charges.Load(); n != 1 {
			t.Fatalf("%d charges for one event", n)
		}
		if got := c.replies(); len(got) != 1 || got[0] != "Paid 500 yen, receipt r-1" {
			t.Fatalf("replies %q; want the first charge's receipt once", got)
		}
		if c.send("m2", "01PAY2", "pay", 1) || c.charges.Load() != 2 {
			t.Fatalf("another event did not charge: %d charges", c.charges.Load())
		}
	})

	t.Run("a failed step runs again on the retry", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.chargeErr = errors.New("card gateway timeout")
		if !c.send("m1", "01PAYF", "pay", 1) {
			t.Fatal("the failing charge did not fail the record")
		}
		c.chargeErr = nil
		if c.send("m1", "01PAYF", "pay", 2) || c.charges.Load() != 1 {
			t.Fatalf("retry after a failed step: %d charges; want 1", c.charges.Load())
		}
	})

	t.Run("claim fails: nothing charged, retried", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.store.claimValueErr = errors.New("ProvisionedThroughputExceededException")
		if !c.send("m1", "01PAYC", "pay", 1) || c.charges.Load() != 0 {
			t.Fatalf("claim failure: charges %d; want the record failed and nothing charged", c.charges.Load())
		}
		c.store.claimValueErr = nil
		if c.send("m1", "01PAYC", "pay", 2) || c.charges.Load() != 1 {
			t.Fatalf("retry: %d charges; want 1", c.charges.Load())
		}
	})

	t.Run("save fails: the handler goes on, the failure is reported", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.store.completeValueErr = errors.New("RequestLimitExceeded")
		if c.send("m1", "01PAYS", "pay", 1) {
			t.Fatal("the record failed although the charge happened")
		}
		if got := c.replies(); len(got) != 1 || c.charges.Load() != 1 {
			t.Fatalf("replies %q, %d charges; want the receipt sent once", got, c.charges.Load())
		}
		if c.metrics.Total(MetricStepSavesFailed) != 1 || !strings.Contains(c.logs.String(), "step result not saved") {
			t.Fatalf("unsaved step not reported: %v\n%s", c.metrics.Counts(), c.logs)
		}
	})

	t.Run("a two-question survey in the session", func(t *testing.T) {
		c := newConversation(t, newStore)
		for i, answer := range []string{"coffee", "large"} {
			if c.send(fmt.Sprint("m", i), fmt.Sprint("01SV", i), "survey "+answer, 1) {
				t.Fatalf("answer %d failed: %v", i, c.sessionErr)
			}
		}
		if got := c.replies(); len(got) != 2 || got[0] != "coffee" || got[1] != "coffee,large" {
			t.Fatalf("replies %q", got)
		}
	})

	t.Run("an answer retried after its save is applied once", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.send("m0", "01SR0", "survey tea", 1)
		c.failAfterSave.Store(true)
		if !c.send("m1", "01SR1", "survey small", 1) {
			t.Fatal("the attempt that crashed after its save did not fail")
		}
		if c.send("m1", "01SR1", "survey small", 2) {
			t.Fatal(c.sessionErr)
		}
		if c.send("m2", "01SR2", "survey hot", 1) {
			t.Fatal(c.sessionErr)
		}
		if got := c.replies(); len(got) != 3 || got[1] != "tea,small" || got[2] != "tea,small,hot" {
			t.Fatalf("replies %q; want the retried answer recorded once", got)
		}
	})

	t.Run("a concurrent save is a conflict the handler sees", func(t *testing.T) {
		c := newConversation(t, newStore)
		c.send("m0", "01SC0", "survey tea", 1)
		c.raceHook = func() {
			c.raceHook = nil
			if c.send("m1", "01SC1", "survey large", 1) { // another event of the chat saves first
				t.Error(c.sessionErr)
			}
		}
		if c.send("m2", "01SC2", "survey small", 1) {
			t.Fatal("the conflicting event failed instead of answering")
		}
		if !errors.Is(c.sessionErr, bot.ErrSessionConflict) {
			t.Fatalf("session error %v; want ErrSessionConflict", c.sessionErr)
		}
		if got := c.replies(); len(got) != 3 || got[1] != "tea,large" || got[2] != "conflict: please answer again" {
			t.Fatalf("replies %q", got)
		}
	})

	t.Run("session store failures fail the record", func(t *testing.T) {
		c := newConversation(t, newStore)
		down := errors.New("dynamodb: 503")
		c.store.getErr = down
		if !c.send("m1", "01SF1", "survey tea", 1) || !errors.Is(c.sessionErr, down) {
			t.Fatalf("load failure: %v", c.sessionErr)
		}
		c.store.getErr, c.store.putErr = nil, down
		if !c.send("m1", "01SF1", "survey tea", 2) || !errors.Is(c.sessionErr, down) || errors.Is(c.sessionErr, bot.ErrSessionConflict) {
			t.Fatalf("save failure: %v; want the store's error, not a conflict", c.sessionErr)
		}
		c.store.putErr = nil
		if c.send("m1", "01SF1", "survey tea", 3) {
			t.Fatalf("retry: %v", c.sessionErr)
		}
	})

	t.Run("a redriven panic does not page again within 24 h", func(t *testing.T) {
		c := newConversation(t, newStore)
		for receive := 1; receive <= 5; receive++ { // five receives, then the DLQ
			c.send("m1", "01BOOM", "boom", receive)
		}
		// Redriven from the DLQ: a new message, its receive count starts over.
		c.clock.Advance(23 * time.Hour)
		c.send("m1-redriven", "01BOOM", "boom", 1)
		if n := len(c.fix.ops.Published()); n != 1 {
			t.Fatalf("%d crash reports within 24 h; want 1", n)
		}
		c.clock.Advance(2 * time.Hour)
		c.send("m1-redriven-again", "01BOOM", "boom", 1)
		if n := len(c.fix.ops.Published()); n != 2 {
			t.Fatalf("%d crash reports after the marker expired; want 2", n)
		}
		rep, err := crash.Parse([]byte(aws.ToString(c.fix.ops.Published()[0].Message)))
		if err != nil || rep.WebhookEventID != "01BOOM" {
			t.Fatalf("report %+v, %v", rep, err)
		}
	})

	t.Run("an absurdly long webhookEventId", func(t *testing.T) {
		c := newConversation(t, newStore)
		long := "01LONG" + strings.Repeat("X", 5*idempotency.MaxKeyBytes)
		c.failReply.Store(true)
		if !c.send("m1", long, "pay", 1) || c.send("m1", long, "pay", 2) {
			t.Fatal("the long id's record did not fail once then succeed")
		}
		if c.charges.Load() != 1 {
			t.Fatalf("%d charges", c.charges.Load())
		}
		if c.send("m1", long, "pay", 3) || c.fix.seen[len(c.fix.seen)-1].Outcome != OutcomeDuplicate {
			t.Fatalf("redelivery of the long id: %+v; want a duplicate", c.fix.seen[len(c.fix.seen)-1])
		}
		c.send("m2", long+"b", "boom", 1)
		c.send("m2", long+"b", "boom", 1)
		if n := len(c.fix.ops.Published()); n != 1 {
			t.Fatalf("%d crash reports for the long id; want 1", n)
		}
	})
}

func TestConversationOnMemory(t *testing.T) {
	runConversationSuite(t, func(t *testing.T, clock *testclock.Clock) tableStore {
		return idempotency.NewMemory(idempotency.WithClock(clock.Now))
	})
}

func TestConversationOnDynamoDBMoto(t *testing.T) {
	ep := motoserver.Start(t)
	client := dynamodb.NewFromConfig(motoserver.Config(ep))
	var n atomic.Int64
	runConversationSuite(t, func(t *testing.T, clock *testclock.Clock) tableStore {
		table := fmt.Sprintf("conversation-%d", n.Add(1))
		_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(idempotency.AttrID), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(idempotency.AttrID), KeyType: types.KeyTypeHash}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return idempotency.NewDynamoDB(client, table, idempotency.WithDynamoClock(clock.Now))
	})
}
