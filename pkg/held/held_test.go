package held_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/pkg/held"
	"github.com/linegate/linegate/pkg/idempotency"
	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/telemetry"
)

const user = "U0123456789abcdef0123456789abcdef"

type fixture struct {
	line  *linemock.Server
	cloud *mem.Cloud
	url   string
	api   *lineapi.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{line: linemock.New(), cloud: mem.New()}
	t.Cleanup(func() { _ = f.cloud.Close() })
	srv := httptest.NewServer(f.line)
	t.Cleanup(srv.Close)
	out, err := f.cloud.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("held")})
	if err != nil {
		t.Fatal(err)
	}
	f.url = aws.ToString(out.QueueUrl)
	f.api = lineapi.New("token", lineapi.WithBaseURL(srv.URL), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
	return f
}

func text(s string) messaging_api.MessageInterface { return messaging_api.TextMessage{Text: s} }

// With the quota spent, a push and a send that falls back to push are held
// (not failed) with their retry keys; once quota returns, a resend delivers
// each exactly once and empties the queue, and a second resend sends nothing.
func TestHeldWhenQuotaSpentAndSentWhenItReturns(t *testing.T) {
	f := newFixture(t)
	f.line.SetQuota(linemock.Quota{Limit: 10, Used: 10})
	var mu sync.Mutex
	var heldItems []held.Item
	h := held.NewHolder(f.cloud, f.url, held.WithLogger(slog.New(slog.DiscardHandler)),
		held.WithOnHeld(func(_ context.Context, it held.Item) { mu.Lock(); heldItems = append(heldItems, it); mu.Unlock() }))
	m := h.Wrap(f.api)
	ctx := telemetry.WithEventID(context.Background(), "01EVENT")
	key := lineapi.RetryKey("01EVENT", 0)
	if err := m.Push(ctx, user, key, text("one"), text("two")); err != nil {
		t.Fatalf("push with the quota spent: %v, want held (nil)", err)
	}
	via, err := m.Send(ctx, lineapi.Target{To: user, WebhookEventID: "01EVENT", Index: 1}, text("three"))
	if err != nil || via != lineapi.ViaPush {
		t.Fatalf("send with the quota spent: %v %v, want held", via, err)
	}
	if len(heldItems) != 2 || heldItems[0].RetryKey != key || heldItems[0].WebhookEventID != "01EVENT" ||
		heldItems[1].RetryKey != lineapi.RetryKey("01EVENT", 1) {
		t.Fatalf("held %+v", heldItems)
	}
	if n := f.cloud.QueueStats(f.url).Visible; n != 2 || len(f.line.Messages()) != 0 {
		t.Fatalf("%d held in the queue, %d sent; want 2 and 0", n, len(f.line.Messages()))
	}

	rep, err := held.Resend(context.Background(), f.cloud, f.url, f.api, 0, nil)
	if !errors.Is(err, held.ErrQuotaSpent) || rep.Sent != 0 || f.cloud.QueueStats(f.url).Visible != 2 {
		t.Fatalf("resend with the quota still spent: %+v %v; queue %+v, want nothing sent, both kept", rep, err, f.cloud.QueueStats(f.url))
	}

	f.line.SetQuota(linemock.Quota{Limit: 20, Used: 10})
	rep, err = held.Resend(context.Background(), f.cloud, f.url, f.api, 0, nil)
	if err != nil || rep.Sent != 2 {
		t.Fatalf("resend: %+v %v", rep, err)
	}
	recs := f.line.Messages()
	if len(recs) != 2 || recs[0].RetryKey != key || string(recs[0].Messages[1]) != `{"type":"text","text":"two"}` {
		t.Fatalf("sent %+v", recs)
	}
	if st := f.cloud.QueueStats(f.url); st.Visible+st.InFlight != 0 {
		t.Fatalf("queue after resend: %+v", st)
	}
	if rep, err := held.Resend(context.Background(), f.cloud, f.url, f.api, 0, nil); err != nil || rep.Sent != 0 || len(f.line.Messages()) != 2 {
		t.Fatalf("second resend sent again: %+v %v", rep, err)
	}
}

// Other failures are not held: a permanent 400 goes back to the handler.
func TestOnlyTheMonthlyLimitIsHeld(t *testing.T) {
	f := newFixture(t)
	f.line.Inject(linemock.Fault{Path: linemock.PathPush, Status: 400, Message: "The request body has 1 error(s)"})
	h := held.NewHolder(f.cloud, f.url)
	err := h.Wrap(f.api).Push(context.Background(), user, lineapi.RetryKey("e", 0), text("x"))
	if err == nil || f.cloud.QueueStats(f.url).Visible != 0 {
		t.Fatalf("err %v, queue %+v: a 400 must fail, not be held", err, f.cloud.QueueStats(f.url))
	}
}

type topic struct {
	mu   sync.Mutex
	msgs []*sns.PublishInput
}

func (tp *topic) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.msgs = append(tp.msgs, in)
	return &sns.PublishOutput{}, nil
}

// The operator is told once a month however many results are held.
func TestNoticeOncePerMonth(t *testing.T) {
	tp := &topic{}
	n := held.Notice{Pub: tp, Topic: "arn:aws:sns:us-east-1:1:ops", Once: idempotency.NewMemory()}
	f := newFixture(t)
	f.line.SetQuota(linemock.Quota{Limit: 0, Used: 0})
	h := held.NewHolder(f.cloud, f.url, held.WithOnHeld(n.Tell))
	for i := range 5 {
		if err := h.Wrap(f.api).Push(context.Background(), user, lineapi.RetryKey("e", i), text("x")); err != nil {
			t.Fatal(err)
		}
	}
	if len(tp.msgs) != 1 {
		t.Fatalf("%d notices for 5 held results, want 1", len(tp.msgs))
	}
	kind := tp.msgs[0].MessageAttributes[held.AttributeKind]
	if aws.ToString(kind.StringValue) != held.KindHeld || !strings.Contains(aws.ToString(tp.msgs[0].Message), "resend-held") {
		t.Fatalf("notice %+v", tp.msgs[0])
	}
}

func TestParse(t *testing.T) {
	good, _ := json.Marshal(held.Item{To: user, Messages: []json.RawMessage{json.RawMessage(`{"type":"text","text":"a"}`)}})
	for name, body := range map[string]string{
		"not json": "x", "no recipient": `{"messages":[{"type":"text","text":"a"}]}`, "no messages": `{"to":"U1"}`,
		"untyped message": `{"to":"U1","messages":[{"text":"a"}]}`,
		"six messages":    `{"to":"U1","messages":[{"type":"t"},{"type":"t"},{"type":"t"},{"type":"t"},{"type":"t"},{"type":"t"}]}`,
	} {
		if _, err := held.Parse([]byte(body)); !errors.Is(err, held.ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	if _, err := held.Parse(good); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: a HeldQueue body never panics the parser, and what it accepts
// can be pushed (a recipient and 1 to 5 typed messages).
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"to":"U1","retryKey":"k","messages":[{"type":"text","text":"a"}],"heldAt":"2026-12-01T00:00:00Z"}`))
	f.Add([]byte(`{"to":"","messages":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		it, err := held.Parse(body)
		if err == nil && (it.To == "" || len(it.Messages) == 0 || len(it.Messages) > 5) {
			t.Fatalf("accepted %+v", it)
		}
	})
}
