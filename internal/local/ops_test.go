package local

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
)

// postJSON posts v to url and fails the test on a non-2xx answer.
func postJSON(t *testing.T, url string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

// postbackData finds the data of the postback button whose label contains
// label in a recorded message.
func postbackData(raw json.RawMessage, label string) string {
	var walk func(v any) string
	walk = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "postback" && strings.Contains(x["label"].(string), label) {
				return x["data"].(string)
			}
			for _, c := range x {
				if d := walk(c); d != "" {
					return d
				}
			}
		case []any:
			for _, c := range x {
				if d := walk(c); d != "" {
					return d
				}
			}
		}
		return ""
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return walk(v)
}

// The "done when", against linegate local: tokens expire and are
// refreshed mid-run; the DLQ card's Redrive acts for the operator only, on
// unaltered data, once; use at 85 % brings a quota card within a scaled
// poll period; with the quota spent a push is held (not dead-lettered) and
// delivered by a resend once quota is raised.
func TestRunningForMonths(t *testing.T) {
	const scale = 300 // 15-minute polls and tokens take 3 s, the 190 s visibility 0.63 s
	rt, lp := start(t, Config{TimeScale: scale})
	user := "U4444444444444444444444444444444d"
	stranger := "U5555555555555555555555555555555e"

	t.Run("tokens expire and are refreshed, also mid-flight", func(t *testing.T) {
		deliver(t, lp, lp.Text(user, "before expiry"))
		eventually(t, 10*time.Second, "the first echo", func() bool { _, ok := findMessage(t, rt, user, "", "before expiry"); return ok })
		issued := rt.LINE().IssuedTokens()
		rt.LINE().ExpireTokens()
		deliver(t, lp, lp.Text(user, "after expiry"))
		eventually(t, 10*time.Second, "the echo after expiry", func() bool { _, ok := findMessage(t, rt, user, "", "after expiry"); return ok })
		if rt.LINE().IssuedTokens() <= issued || rt.LINE().Calls()[linemock.Call{Path: linemock.PathReply, Status: 401}] == 0 {
			t.Fatalf("issued %d→%d, 401s %v: want a 401 then a new token", issued, rt.LINE().IssuedTokens(), rt.LINE().Calls())
		}
	})

	t.Run("Redrive on the DLQ card acts for the operator only, on signed data, once", func(t *testing.T) {
		deliver(t, lp, lp.Text(user, "probe:fail"))
		eventually(t, 30*time.Second, "the DLQ to hold it", func() bool { return getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 1 })
		var card sentMessage
		eventually(t, 20*time.Second, "the DLQ alarm card", func() bool {
			var ok bool
			card, ok = findMessage(t, rt, DefaultOperator, "push", "linegate-interactive-dlq")
			return ok
		})
		data := postbackData(card.Messages[0], "Redrive")
		if data == "" {
			t.Fatalf("no Redrive postback on the card %s", card.Messages[0])
		}
		// Another user with the real data, and the operator with altered data: nothing.
		strangers := deliver(t, lp, lp.Postback(stranger, data))
		parts := strings.Split(data, ".")
		parts[2] = base64.RawURLEncoding.EncodeToString([]byte("linegate-BackgroundDLQ"))
		altered := deliver(t, lp, lp.Postback(DefaultOperator, strings.Join(parts, ".")))
		waitSettled(t, rt, 10*time.Second, strangers)
		waitSettled(t, rt, 10*time.Second, altered)
		if q := getQueue(t, rt, "linegate-InteractiveDLQ.fifo"); q.Visible != 1 {
			t.Fatalf("a refused postback moved the DLQ: %+v", q)
		}
		for _, m := range messages(t, rt) {
			if m.To == stranger {
				t.Fatalf("the stranger got an answer: %s", m.Messages)
			}
		}
		if _, ok := findMessage(t, rt, DefaultOperator, "", "You chose"); ok {
			t.Fatal("linegate's postback reached the bot")
		}
		// The operator's tap drains the DLQ and the operator is told so.
		deliver(t, lp, lp.Postback(DefaultOperator, data))
		eventually(t, 10*time.Second, "the operator's reply", func() bool {
			_, ok := findMessage(t, rt, DefaultOperator, "", "Redrive of linegate-InteractiveDLQ.fifo done: 1 message(s) moved back")
			return ok
		})
		eventually(t, 10*time.Second, "the DLQ drained", func() bool { return getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 0 })
		// The same button again: already used, nothing happens.
		before := len(messages(t, rt))
		again := deliver(t, lp, lp.Postback(DefaultOperator, data))
		waitSettled(t, rt, 10*time.Second, again)
		for _, m := range messages(t, rt)[before:] {
			if m.To == DefaultOperator && strings.Contains(string(m.Messages[0]), "Redrive of") {
				t.Fatal("a used button acted again")
			}
		}
	})

	t.Run("use at 85 % brings a quota card within one scaled poll period", func(t *testing.T) {
		postJSON(t, rt.URL()+"/_local/line/quota", map[string]int{"limit": 1000, "used": 850})
		period := 15 * time.Minute / scale
		eventually(t, 2*period+2*time.Second, "the quota card", func() bool {
			m, ok := findMessage(t, rt, DefaultOperator, "push", "Push quota over 80%")
			return ok && strings.Contains(string(m.Messages[0]), "by the month")
		})
	})

	t.Run("with the quota spent a push is held, then sent after a resend", func(t *testing.T) {
		postJSON(t, rt.URL()+"/_local/line/quota", map[string]int{"limit": 1000, "used": 1000})
		id := deliver(t, lp, lp.Text(user, "probe:push held result"))
		eventually(t, 10*time.Second, "outcome held", func() bool { e, _ := event(t, rt, id); return e.Outcome == "held" })
		if q := getQueue(t, rt, "linegate-HeldQueue"); q.Visible != 1 {
			t.Fatalf("held queue %+v, want 1", q)
		}
		// (The redriven probe:fail of the test above may be back in the DLQ by
		// now: look at this event's own entry.)
		if e, _ := event(t, rt, id); e.Outcome != "held" || e.DeadLetterQueue != "" || e.ReceiveCount != 1 {
			t.Fatalf("a held result was retried or dead-lettered: %+v", e)
		}
		if _, ok := findMessage(t, rt, user, "", "held result"); ok {
			t.Fatal("sent with the quota spent")
		}
		postJSON(t, rt.URL()+"/_local/line/quota", map[string]int{"limit": 2000, "used": 1000})
		// What `linegate resend-held --endpoint-url` does: SQS through the
		// runtime's shim, LINE through its local API.
		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()), Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
		q := sqs.NewFromConfig(cfg)
		url, err := q.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-HeldQueue")})
		if err != nil {
			t.Fatal(err)
		}
		line := lineapi.New(DefaultToken, lineapi.WithBaseURL(rt.URL()), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
		rep, err := held.Resend(context.Background(), q, aws.ToString(url.QueueUrl), line, 0, slog.New(slog.DiscardHandler))
		if err != nil || rep.Sent != 1 {
			t.Fatalf("resend: %+v %v", rep, err)
		}
		if _, ok := findMessage(t, rt, user, "push", "held result"); !ok {
			t.Fatal("the held result was not delivered")
		}
	})
}

// A function's queue URLs are the runtime's own, also inside a list
// (ALERT_DLQS) or a name=URL list (the worker's ROUTE_QUEUES), and only
// where a whole URL stands.
func TestReplaceURL(t *testing.T) {
	const old, new = "https://sqs.us-east-1.amazonaws.com/000000000000/linegate-LongQueue", "http://127.0.0.1:3000/000000000000/linegate-LongQueue"
	tests := []struct{ v, want string }{
		{old, new},
		{"long=" + old, "long=" + new},
		{"reports=http://r,long=" + old, "reports=http://r,long=" + new},
		{"long=" + old + "2", "long=" + old + "2"},
		{old + "2", old + "2"},
		{"http://a," + old + ",http://b", "http://a," + new + ",http://b"}, // ALERT_DLQS
		{old + "2," + old, old + "2," + new},
		{"", ""},
	}
	for _, tt := range tests {
		if got := replaceURL(tt.v, old, new); got != tt.want {
			t.Errorf("replaceURL(%q) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
