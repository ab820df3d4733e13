package alert

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/lineapi"
	"github.com/linegate/linegate/pkg/postback"
)

// buttonsOf returns the label and data of every postback button of a pushed
// Flex card.
func buttonsOf(t *testing.T, c pushCall) map[string]string {
	t.Helper()
	var msgs []struct {
		Contents struct {
			Footer struct {
				Contents []struct {
					Action struct {
						Type  string `json:"type"`
						Label string `json:"label"`
						Data  string `json:"data"`
					} `json:"action"`
				} `json:"contents"`
			} `json:"footer"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(c.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Contents.Footer.Contents {
			if b.Action.Type == "postback" {
				out[b.Action.Label] = b.Action.Data
			}
		}
	}
	return out
}

// A DLQ alarm card carries Redrive, Silence 1 h and Acknowledge, each with
// data the stack signed for exactly that action and target; an OK card and
// an alarm on another queue carry no Redrive.
func TestDLQAlarmCardCarriesSignedButtons(t *testing.T) {
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), nil)
	const dlq = "linegate-InteractiveDLQ-8XKQ2M1ZP0A4"
	tests := []struct {
		name    string
		event   string
		dlqs    []string
		want    map[string][2]string // label -> action, target
		without []string
	}{
		{"dlq alarm", "alarm-alarm", []string{dlq}, map[string][2]string{
			"Redrive":     {postback.Redrive, dlq},
			"Silence 1 h": {postback.Silence, "linegate-InteractiveDLQ-NotEmpty"},
			"Acknowledge": {postback.Ack, "linegate-InteractiveDLQ-NotEmpty"},
		}, nil},
		{"alarm on another queue", "alarm-alarm", []string{"other"}, map[string][2]string{
			"Silence 1 h": {postback.Silence, "linegate-InteractiveDLQ-NotEmpty"},
		}, []string{"Redrive"}},
		{"back to OK", "alarm-ok", []string{dlq}, nil, []string{"Redrive", "Silence 1 h", "Acknowledge"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, p, _ := newTestNotifier(t, []string{opUser}, WithButtons(signer, time.Hour, tt.dlqs))
			if err := n.Handle(context.Background(), loadEvent(t, tt.event)); err != nil {
				t.Fatal(err)
			}
			got := buttonsOf(t, p.calls[0])
			for label, at := range tt.want {
				c, err := signer.Verify(got[label])
				if err != nil || c.Action != at[0] || c.Target != at[1] {
					t.Errorf("%s button: %+v, %v; want %s on %s", label, c, err, at[0], at[1])
				}
			}
			for _, label := range tt.without {
				if _, ok := got[label]; ok {
					t.Errorf("unexpected %s button", label)
				}
			}
		})
	}
	// Without a key there are no buttons at all.
	n, p, _ := newTestNotifier(t, []string{opUser})
	_ = n.Handle(context.Background(), loadEvent(t, "alarm-alarm"))
	if b := buttonsOf(t, p.calls[0]); len(b) != 0 {
		t.Fatalf("buttons without a signer: %v", b)
	}
}

func heldEvent() events.SNSEvent {
	return events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
		MessageID: "m-held", Message: "LINE refused a push at 2026-12-01T00:00:00Z: the channel's monthly message limit is reached.",
		Timestamp:         time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		MessageAttributes: map[string]any{"linegate-kind": map[string]any{"Type": "String", "Value": KindHeld}},
	}}}}
}

// The held notice becomes a card with Resend held; when LINE cannot carry
// it (the quota is spent) the notifier does not fail, since email does.
func TestHeldNoticeCard(t *testing.T) {
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), nil)
	n, p, _ := newTestNotifier(t, []string{opUser}, WithButtons(signer, time.Hour, nil))
	if err := n.Handle(context.Background(), heldEvent()); err != nil {
		t.Fatal(err)
	}
	if c, err := signer.Verify(buttonsOf(t, p.calls[0])["Resend held"]); err != nil || c.Action != postback.ResendHeld {
		t.Fatalf("Resend held button: %+v %v", c, err)
	}
	if !strings.Contains(string(p.calls[0].Messages), "monthly") {
		t.Errorf("card %s", p.calls[0].Messages)
	}
	p.fail = map[string]error{opUser: lineapi.ErrMonthlyLimit}
	if err := n.Handle(context.Background(), heldEvent()); err != nil {
		t.Fatalf("held notice refused for the monthly limit: %v, want nil (email carries it)", err)
	}
	if err := n.Handle(context.Background(), loadEvent(t, "alarm-alarm")); !errors.Is(err, lineapi.ErrMonthlyLimit) {
		t.Fatalf("alarm card refused for the monthly limit: %v, want the error (retried, then the failure queue)", err)
	}
}

// A notice with the same ID gets the same retry key (LINE delivers it once),
// another ID another key.
func TestNoticeRetryKeys(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser})
	nt := Notice{ID: "quota:2026-12:warn:2026-12-01", Level: "WARN", Badge: "QUOTA", Title: "Push quota", Headline: "85% used"}
	_ = n.Notify(context.Background(), nt)
	_ = n.Notify(context.Background(), nt)
	nt.ID = "quota:2026-12:alarm:2026-12-01"
	_ = n.Notify(context.Background(), nt)
	if len(p.calls) != 3 || p.calls[0].RetryKey != p.calls[1].RetryKey || p.calls[0].RetryKey == p.calls[2].RetryKey {
		t.Fatalf("retry keys %v", p.calls)
	}
	if err := n.Notify(context.Background(), Notice{}); err == nil {
		t.Fatal("a notice without an ID was pushed")
	}
}
