package alert

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/crash"
)

// FuzzParseRecord feeds arbitrary SNS messages, as alarms (no attribute) or as
// crash reports (kind attribute), through parsing and rendering: nothing may
// panic, unreadable records must be skipped without a push, and whatever is
// pushed must satisfy LINE's schema and limits.
func FuzzParseRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, message string, kind string) {
		rec := events.SNSEventRecord{SNS: events.SNSEntity{
			MessageID: "fuzz",
			TopicArn:  "arn:aws:sns:ap-northeast-1:123456789012:ops",
			Message:   message,
		}}
		if kind != "" {
			rec.SNS.MessageAttributes = map[string]any{crash.AttributeKind: map[string]any{"Type": "String", "Value": kind}}
		}
		_, parseErr := parseRecord(rec)

		p := &fakePusher{}
		n, err := New(p, []string{opUser}, WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{rec}}); err != nil {
			t.Fatalf("Handle = %v; only push failures may fail it", err)
		}
		if parseErr != nil {
			if len(p.calls) != 0 {
				t.Fatalf("unreadable record (%v) was pushed", parseErr)
			}
			return
		}
		if len(p.calls) != 1 {
			t.Fatalf("%d pushes for one readable record", len(p.calls))
		}
		if probs := validateMessages(t, p.calls[0].Messages); len(probs) > 0 {
			msg, _ := json.Marshal(message)
			t.Fatalf("invalid rendering of %s:\n%v", msg, probs)
		}
	})
}
