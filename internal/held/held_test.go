package held_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/telemetry"
)

const user = "U0123456789abcdef0123456789abcdef"

type fixture struct {
	line  *linemock.Server
	cloud *mem.Cloud
	url   string
	base  string // the LINE API mock's URL
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
	f.url, f.base = aws.ToString(out.QueueUrl), srv.URL
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

// An item older than the refresh age is written anew (and the old copy
// deleted); a young one is left as it is.
func TestRefreshKeepsOldItemsAlive(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := start
	c := mem.New(mem.WithClock(func() time.Time { return clk }))
	defer c.Close()
	ctx := context.Background()
	q, _ := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("held"),
		Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}}) // the template's 14 days
	url := aws.ToString(q.QueueUrl)
	_, _ = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("old")})
	clk = start.Add(8 * 24 * time.Hour)
	_, _ = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("young")})
	n, err := held.Refresh(ctx, c, url, held.RefreshAge, 100, clk)
	if err != nil || n != 1 {
		t.Fatalf("refreshed %d, %v; want the old one", n, err)
	}
	clk = clk.Add(2 * time.Minute) // past the refresh's visibility timeout
	out, _ := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp"}})
	bodies := map[string]string{}
	for _, m := range out.Messages {
		bodies[aws.ToString(m.Body)] = m.Attributes["SentTimestamp"]
	}
	if len(bodies) != 2 || bodies["old"] != fmt.Sprint(start.Add(8*24*time.Hour).UnixMilli()) {
		t.Fatalf("queue after refresh: %v", bodies)
	}
}

// A resend deletes only what was sent: an item whose push fails for any
// reason but the monthly limit (a 400, a 500, a revoked token) stays held,
// and the failure is reported; the items after it are still tried.
func TestResendKeepsWhatFailedForAnotherReason(t *testing.T) {
	tests := []struct {
		name   string
		status int
		msg    string
	}{
		{"a permanent 400", 400, "The request body has 1 error(s)"},
		{"a server error", 500, "Internal server error"},
		{"a refused token", 401, "Authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.line.SetQuota(linemock.Quota{Limit: 10, Used: 10})
			h := held.NewHolder(f.cloud, f.url, held.WithLogger(slog.New(slog.DiscardHandler)))
			for i, s := range []string{"first", "second"} {
				ctx := telemetry.WithEventID(context.Background(), fmt.Sprint("01KEEP", i))
				if err := h.Wrap(f.api).Push(ctx, user, lineapi.RetryKey(fmt.Sprint("01KEEP", i), 0), text(s)); err != nil {
					t.Fatal(err)
				}
			}
			f.line.SetQuota(linemock.Quota{Limit: 100, Used: 10})
			// Every attempt of the first push fails (the client retries 5xx).
			f.line.Inject(linemock.Fault{Path: linemock.PathPush, Status: tt.status, Message: tt.msg, Times: 10})
			api := lineapi.New("token", lineapi.WithBaseURL(f.base), lineapi.WithLogger(slog.New(slog.DiscardHandler)),
				lineapi.WithMaxAttempts(1))
			rep, err := held.Resend(context.Background(), f.cloud, f.url, api, 1, nil)
			if err == nil || errors.Is(err, held.ErrQuotaSpent) || rep.Sent != 0 || rep.Kept != 1 {
				t.Fatalf("resend: %+v %v; want the failure reported and the item kept", rep, err)
			}
			st := f.cloud.QueueStats(f.url)
			if st.Visible+st.InFlight != 2 {
				t.Fatalf("queue after the failed resend: %+v, want both items still held", st)
			}
		})
	}
}

// Each channel's held items are its own: held with the channel's name,
// resent through its own client (its own quota), and a channel whose limit
// is still spent keeps its items, put back for the next resend, while the
// others' go out.
func TestHeldPerChannel(t *testing.T) {
	f := newFixture(t)
	lineB := linemock.New()
	srvB := httptest.NewServer(lineB)
	t.Cleanup(srvB.Close)
	apiB := lineapi.New("token-b", lineapi.WithBaseURL(srvB.URL), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
	f.line.SetQuota(linemock.Quota{Limit: 10, Used: 10})
	lineB.SetQuota(linemock.Quota{Limit: 10, Used: 10})
	h := held.NewHolder(f.cloud, f.url, held.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := telemetry.WithEventID(context.Background(), "01EV")
	if err := h.Wrap(f.api).Push(ctx, user, lineapi.RetryKey("01EV", 0), text("default")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WrapChannel("b", apiB).Send(ctx, lineapi.Target{To: user, WebhookEventID: "01EV", Channel: "b"}, text("b one")); err != nil {
		t.Fatal(err)
	}
	if err := h.WrapChannel("b", apiB).Push(ctx, user, lineapi.ChannelRetryKey("b", "01EV", 1), text("b two")); err != nil {
		t.Fatal(err)
	}
	f.line.SetQuota(linemock.Quota{Limit: 100, Used: 10}) // the default channel's limit raised, b's still spent
	pushers := func(ch string) (held.Pusher, bool) {
		switch ch {
		case "":
			return f.api, true
		case "b":
			return apiB, true
		}
		return nil, false
	}
	rep, err := held.ResendChannels(context.Background(), f.cloud, f.url, pushers, 0, slog.New(slog.DiscardHandler))
	if !errors.Is(err, held.ErrQuotaSpent) || rep.Sent != 1 || rep.Kept < 1 || fmt.Sprint(rep.Spent) != "[b]" {
		t.Fatalf("%+v %v: want the default's item sent, b's kept", rep, err)
	}
	if got := f.line.Messages(); len(got) != 1 || got[0].RetryKey != lineapi.RetryKey("01EV", 0) {
		t.Fatalf("the default channel's LINE got %+v", got)
	}
	if s := rep.String(); !strings.Contains(s, "monthly limit reached for b") {
		t.Fatalf("report %q does not name channel b", s)
	}
	if n := f.cloud.QueueStats(f.url).Visible; n != 2 {
		t.Fatalf("%d items visible after the run, want b's two put back", n)
	}
	lineB.SetQuota(linemock.Quota{Limit: 100, Used: 10})
	rep, err = held.ResendChannels(context.Background(), f.cloud, f.url, pushers, 0, slog.New(slog.DiscardHandler))
	if err != nil || rep.Sent != 2 || rep.Kept != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	keys := map[string]bool{}
	for _, m := range lineB.Messages() {
		keys[m.RetryKey] = true
	}
	if len(lineB.Messages()) != 2 || !keys[lineapi.ChannelRetryKey("b", "01EV", 0)] || !keys[lineapi.ChannelRetryKey("b", "01EV", 1)] || len(f.line.Messages()) != 1 {
		t.Fatalf("channel b's LINE got %+v, the default's %d", lineB.Messages(), len(f.line.Messages()))
	}
	// An item of a channel the resend has no client for stays held.
	lineB.SetQuota(linemock.Quota{Limit: 100, Used: 100})
	if err := h.WrapChannel("c", apiB).Push(ctx, user, "", text("c")); err != nil {
		t.Fatal(err)
	}
	rep, err = held.ResendChannels(context.Background(), f.cloud, f.url, pushers, 0, slog.New(slog.DiscardHandler))
	if err == nil || rep.Kept != 1 || rep.Sent != 0 || f.cloud.QueueStats(f.url).Visible+f.cloud.QueueStats(f.url).InFlight != 1 {
		t.Fatalf("%+v %v: want channel c's item kept", rep, err)
	}
}

// A spent channel's item first in the queue does not stop the run: the
// other channel's items received with it (and after it) still go out
// through their own client, and the spent one's is put back.
func TestSpentChannelFirstDoesNotStopTheOthers(t *testing.T) {
	f := newFixture(t)
	lineB := linemock.New()
	srvB := httptest.NewServer(lineB)
	t.Cleanup(srvB.Close)
	apiB := lineapi.New("token-b", lineapi.WithBaseURL(srvB.URL), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
	f.line.SetQuota(linemock.Quota{Limit: 10, Used: 10})
	lineB.SetQuota(linemock.Quota{Limit: 10, Used: 10})
	h := held.NewHolder(f.cloud, f.url, held.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := telemetry.WithEventID(context.Background(), "01EW")
	if err := h.Wrap(f.api).Push(ctx, user, lineapi.RetryKey("01EW", 0), text("default first")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ { // more than one receive's worth
		if err := h.WrapChannel("b", apiB).Push(ctx, user, lineapi.ChannelRetryKey("b", "01EW", i), text(fmt.Sprint("b ", i))); err != nil {
			t.Fatal(err)
		}
	}
	lineB.SetQuota(linemock.Quota{Limit: 100, Used: 10}) // b's limit raised, the default's still spent
	pushers := func(ch string) (held.Pusher, bool) {
		if ch == "b" {
			return apiB, true
		}
		return f.api, ch == ""
	}
	rep, err := held.ResendChannels(context.Background(), f.cloud, f.url, pushers, 0, slog.New(slog.DiscardHandler))
	if !errors.Is(err, held.ErrQuotaSpent) || rep.Sent != 12 || rep.Kept != 1 || fmt.Sprint(rep.Spent) != "[default]" {
		t.Fatalf("%+v %v: want b's 12 items sent and the default's kept", rep, err)
	}
	if n := len(lineB.Messages()); n != 12 || len(f.line.Messages()) != 0 {
		t.Fatalf("channel b's LINE got %d messages, the default's %d", n, len(f.line.Messages()))
	}
	if n := f.cloud.QueueStats(f.url).Visible; n != 1 {
		t.Fatalf("%d items visible after the run, want the default's one put back", n)
	}
}
