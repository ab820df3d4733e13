package alert

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/testmetrics"
)

func TestTruncateUTF16(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"", 3, ""},
		{"abc", 0, ""},
		{"a😀b", 4, "a😀b"}, // 😀 is 2 UTF-16 units: 4 in all
		{"a😀b", 3, "a…"},  // the pair is never split
		{"😀😀", 3, "😀…"},
		{"日本語テキスト", 7, "日本語テキスト"},
		{"日本語テキスト", 6, "日本語テキ…"},
		{"bad\xffbyte", 20, "bad\uFFFDbyte"},
		{"bad\xffbyte", 5, "bad\uFFFD…"},
	}
	for _, tt := range tests {
		got := truncateUTF16(tt.in, tt.n)
		if got != tt.want {
			t.Errorf("truncateUTF16(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
		if utf16Len(got) > max(tt.n, 0) {
			t.Errorf("truncateUTF16(%q, %d) is %d units long", tt.in, tt.n, utf16Len(got))
		}
	}
}

func TestTruncateRunes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"Open alarm", MaxLabel, "Open alarm"},
		{"12345678901234567890", MaxLabel, "12345678901234567890"},
		{"123456789012345678901", MaxLabel, "1234567890123456789…"},
		{"アラームをコンソールで開いて詳細を確認する", MaxLabel, "アラームをコンソールで開いて詳細を確認…"},
		{"x", 0, ""},
	}
	for _, tt := range tests {
		if got := truncateRunes(tt.in, tt.n); got != tt.want {
			t.Errorf("truncateRunes(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// alarmEvent is one ALARM record for the named alarm.
func alarmEvent(t *testing.T, name string) events.SNSEvent {
	t.Helper()
	ev := loadEvent(t, "alarm-alarm")
	var a map[string]any
	if err := json.Unmarshal([]byte(ev.Records[0].SNS.Message), &a); err != nil {
		t.Fatal(err)
	}
	a["AlarmName"] = name
	a["AlarmArn"] = "arn:aws:cloudwatch:ap-northeast-1:123456789012:alarm:" + name
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	ev.Records[0].SNS.Message = string(b)
	return ev
}

func pushedMessage(t *testing.T, n *Notifier, p *fakePusher, ev events.SNSEvent) map[string]any {
	t.Helper()
	if err := n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 1 {
		t.Fatalf("%d pushes, want 1", len(p.calls))
	}
	msgs := messagesOf(t, p.calls[0])
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func TestAltTextLimit(t *testing.T) {
	frame := utf16Len("[ALARM] : OK → ALARM")
	for _, tt := range []struct {
		name      string
		nameUnits int
		truncated bool
	}{
		{"at the limit", MaxAltText - frame, false},
		{"one over", MaxAltText - frame + 1, true},
		{"far over", 3 * MaxAltText, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.Repeat("a", tt.nameUnits)
			n, p, _ := newTestNotifier(t, []string{opUser})
			alt := pushedMessage(t, n, p, alarmEvent(t, name))["altText"].(string)
			if utf16Len(alt) > MaxAltText {
				t.Fatalf("altText is %d units", utf16Len(alt))
			}
			if got := strings.HasSuffix(alt, "…"); got != tt.truncated {
				t.Errorf("altText truncated = %v, want %v (%d units)", got, tt.truncated, utf16Len(alt))
			}
			if !tt.truncated && alt != "[ALARM] "+name+": OK → ALARM" {
				t.Errorf("altText at the limit was changed")
			}
		})
	}
}

func TestURILimit(t *testing.T) {
	base := consoleBase("ap-northeast-1") + "#alarmsV2:"
	room := MaxURI - len(base+"alarm/")
	tests := []struct {
		name, alarm, want string
	}{
		{"fits exactly", strings.Repeat("a", room), base + "alarm/" + strings.Repeat("a", room)},
		{"one over links the alarm list", strings.Repeat("a", room+1), base},
		{"escaping counts", strings.Repeat("/", room/3+1), base},
		{"escaped name", "DLQ depth / interactive", base + "alarm/DLQ%20depth%20%2F%20interactive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := alarmURL("ap-northeast-1", tt.alarm)
			if got != tt.want {
				t.Errorf("alarmURL = %q (%d chars), want %q", got, len(got), tt.want)
			}
			if len(got) > MaxURI {
				t.Errorf("uri is %d chars", len(got))
			}
		})
	}
	// Through Handle: the button still points somewhere useful.
	n, p, _ := newTestNotifier(t, []string{opUser})
	m := pushedMessage(t, n, p, alarmEvent(t, strings.Repeat("x", 250)+strings.Repeat(" ", 5)))
	if uri := dig(t, m, "contents", "footer", "contents", 0, "action", "uri").(string); len(uri) > MaxURI {
		t.Errorf("uri %d chars", len(uri))
	}
}

func TestLabelLimit(t *testing.T) {
	fm := flexMessage(card{badge: "ALARM", title: "t", headline: "h", link: "https://example.com", linkLabel: "Open the alarm in the console"})
	b, err := json.Marshal(fm)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if label := dig(t, m, "contents", "footer", "contents", 0, "action", "label"); label != "Open the alarm in t…" {
		t.Errorf("label = %q, want it cut to %d characters", label, MaxLabel)
	}
}

func TestTextMessageLimit(t *testing.T) {
	prefix := "[CRASH] f\nh\n\n"
	for _, tt := range []struct {
		name      string
		detail    int
		truncated bool
	}{
		{"at the limit", MaxTextMessage - utf16Len(prefix), false},
		{"one over", MaxTextMessage - utf16Len(prefix) + 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm := textMessage(card{badge: "CRASH", title: "f", headline: "h", detail: strings.Repeat("d", tt.detail)})
			if utf16Len(tm.Text) != MaxTextMessage {
				t.Errorf("text is %d units, want exactly %d", utf16Len(tm.Text), MaxTextMessage)
			}
			if got := strings.HasSuffix(tm.Text, "…"); got != tt.truncated {
				t.Errorf("truncated = %v, want %v", got, tt.truncated)
			}
		})
	}
}

func TestFlexSizeLimitFallsBackToText(t *testing.T) {
	ev := loadEvent(t, "crash-trace")
	// Measure the card as rendered, then set the limit exactly there and one byte below.
	n, p, _ := newTestNotifier(t, []string{opUser})
	b, err := json.Marshal(pushedMessage(t, n, p, ev))
	if err != nil {
		t.Fatal(err)
	}
	size := len(b)
	for _, tt := range []struct {
		name  string
		limit int
		want  string
	}{
		{"at the limit", size, "flex"},
		{"one byte under", size - 1, "text"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			n, p, logs := newTestNotifier(t, []string{opUser}, WithMetrics(m))
			n.flexLimit = tt.limit
			msg := pushedMessage(t, n, p, ev)
			if msg["type"] != tt.want {
				t.Fatalf("message type %v, want %s", msg["type"], tt.want)
			}
			if tt.want == "text" {
				text := msg["text"].(string)
				for _, want := range []string{"[CRASH] linegate-WorkerFunction-Ab12Cd34Ef56", "runtime error: index out of range",
					"Event ID: 01FZ74A0TDDPYRVKNK77XKC3ZR", "Open trace: https://ap-northeast-1.console.aws.amazon.com/", "Stack:", "handlers/h.go:11"} {
					if !strings.Contains(text, want) {
						t.Errorf("fallback text lacks %q:\n%s", want, text)
					}
				}
				if m.Total(MetricTextFallback) != 1 || !strings.Contains(logs.String(), "card too large") {
					t.Errorf("fallback not counted/logged: %v\n%s", m.Counts(), logs)
				}
			}
		})
	}
}

func TestOversizedInputsAtTheRealLimit(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser})
	if err := n.Handle(context.Background(), loadEvent(t, "oversized")); err != nil {
		t.Fatal(err)
	}
	msgs := messagesOf(t, p.calls[0])
	var types []string
	for _, m := range msgs {
		types = append(types, m["type"].(string))
	}
	// The escape-heavy crash report (every "<" costs 6 bytes of JSON) would
	// pass 30 KB as Flex and goes out as text; the others stay cards.
	if strings.Join(types, ",") != "flex,flex,text" {
		t.Errorf("message types = %v, want flex,flex,text", types)
	}
	full, err := json.Marshal(flexMessage(n.crashCard(mustParse(t, loadEvent(t, "oversized").Records[2]))))
	if err != nil {
		t.Fatal(err)
	}
	if len(full) <= MaxFlexBytes {
		t.Errorf("escape-heavy card is only %d bytes: the fixture no longer exercises the limit", len(full))
	}
}

func mustParse(t *testing.T, r events.SNSEventRecord) opsMessage {
	t.Helper()
	m, err := parseRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCrashTimeAndMissingFields(t *testing.T) {
	r := crash.Report{Error: "boom", Time: time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC)}
	body, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
		Message:           string(body),
		MessageAttributes: map[string]any{crash.AttributeKind: crash.KindCrash}, // bare string form
	}}}}
	n, p, _ := newTestNotifier(t, []string{opUser})
	m := pushedMessage(t, n, p, ev)
	all := strings.Join(texts(m["contents"]), "\n")
	for _, want := range []string{"CRASH", "panic", "boom", "2026-03-15 00:00:00 JST"} {
		if !strings.Contains(all, want) {
			t.Errorf("card lacks %q:\n%s", want, all)
		}
	}
	if probs := validateMessages(t, p.calls[0].Messages); len(probs) > 0 {
		t.Error(probs)
	}
	// Without an SNS MessageId the retry key still derives from the content.
	n2, p2, _ := newTestNotifier(t, []string{opUser})
	pushedMessage(t, n2, p2, ev)
	if p.calls[0].RetryKey != p2.calls[0].RetryKey {
		t.Errorf("keys differ for the same content: %s vs %s", p.calls[0].RetryKey, p2.calls[0].RetryKey)
	}
}
