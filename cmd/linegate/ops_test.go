package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/pkg/bot"
)

func startLocal(t *testing.T) *local.Runtime {
	t.Helper()
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 300,
		Getenv: func(string) string { return "" }, Bot: func(config.Worker) *bot.Router { return testbot.New() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// doctor passes against a healthy linegate local and fails, printing the
// fix, when the webhook URL is unset, redelivery is off, or a DLQ holds
// messages.
func TestDoctorAgainstLocal(t *testing.T) {
	rt := startLocal(t)
	code, out, errOut := runCLI("doctor", "--endpoint-url", rt.URL())
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("healthy local: exit %d\n%s%s", code, out, errOut)
	}
	for _, check := range []string{"webhook endpoint", "test delivery", "webhook redelivery", "bot info", "channel secret", "push quota", "dead-letter queues", "alarms", "ops topic"} {
		if !strings.Contains(out, "PASS  "+check) {
			t.Errorf("no passing %q check in\n%s", check, out)
		}
	}

	tests := []struct {
		name   string
		break_ func()
		want   []string
	}{
		{"webhook URL unset", func() { rt.LINE().SetChannel(linemock.Channel{Active: true, Redelivery: true}) },
			[]string{"FAIL  webhook endpoint", "fix: set the webhook URL to " + rt.WebhookURL()}},
		{"redelivery off", func() { rt.LINE().SetChannel(linemock.Channel{Endpoint: rt.WebhookURL(), Active: true}) },
			[]string{"FAIL  webhook redelivery", "fix: turn \"Webhook redelivery\" on"}},
		{"a DLQ holds a message", func() {
			rt.LINE().SetChannel(linemock.Channel{Endpoint: rt.WebhookURL(), Active: true, Redelivery: true})
			c := rt.Cloud()
			u, _ := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-BackgroundDLQ")})
			_, _ = c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: aws.String("{}")})
		}, []string{"FAIL  dead-letter queues", "linegate-BackgroundDLQ holds 1", "linegate redrive --queue linegate-BackgroundDLQ --endpoint-url " + rt.URL()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.break_()
			code, out, _ := runCLI("doctor", "--endpoint-url", rt.URL())
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
		})
	}
	if code, _, _ := runCLI("doctor"); code != 2 {
		t.Fatalf("doctor without a target exited %d, want 2", code)
	}
}

// resend-held delivers what the monthly limit held, once quota is raised;
// before that it leaves it held and says why.
func TestResendHeldAgainstLocal(t *testing.T) {
	rt := startLocal(t)
	user := "U6666666666666666666666666666666f"
	rt.LINE().SetQuota(linemock.Quota{Limit: 10, Used: 10})
	// A generous attempt timeout: the test is about the held push, not the
	// webhook's speed on a loaded machine.
	lp := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret), lineplatform.WithTimeout(30*time.Second))
	if d, err := lp.Deliver(context.Background(), lp.Text(user, "probe:push kept for later")); err != nil || !d.Delivered {
		t.Fatalf("%+v %v", d, err)
	}
	waitFor(t, "the held result", func() bool {
		for _, e := range rt.Events() {
			if e.Outcome == "held" {
				return true
			}
		}
		return false
	})
	code, out, errOut := runCLI("resend-held", "--endpoint-url", rt.URL())
	if code != 1 || !strings.Contains(out, "0 held result(s) sent, 1 still held") || !strings.Contains(errOut, "monthly limit") {
		t.Fatalf("quota still spent: exit %d\n%s%s", code, out, errOut)
	}
	rt.LINE().SetQuota(linemock.Quota{Limit: 20, Used: 10})
	code, out, errOut = runCLI("resend-held", "--endpoint-url", rt.URL())
	if code != 0 || !strings.Contains(out, "1 held result(s) sent") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	found := false
	for _, m := range rt.LINE().Messages() {
		found = found || (m.To == user && bytes.Contains(m.Messages[0], []byte("kept for later")))
	}
	if !found {
		t.Fatal("the held result was not delivered")
	}
	if code, _, _ := runCLI("resend-held", "--endpoint-url", rt.URL(), "--stack", "x"); code != 2 {
		t.Fatal("both targets accepted")
	}
	_ = http.StatusOK
}
