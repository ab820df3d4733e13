package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/testmetrics"
)

// viaQueue delivers an SNS event's records the way the ops queue does: one
// SQS record each, whose body is the SNS notification (raw delivery off).
func viaQueue(t *testing.T, ev events.SNSEvent) events.SQSEvent {
	t.Helper()
	var out events.SQSEvent
	for i, r := range ev.Records {
		attrs := map[string]map[string]string{}
		for k, v := range r.SNS.MessageAttributes {
			val, _ := attribute(r.SNS.MessageAttributes, k)
			typ := "String"
			if m, ok := v.(map[string]any); ok {
				typ, _ = m["Type"].(string)
			}
			attrs[k] = map[string]string{"Type": typ, "Value": val}
		}
		body, err := json.Marshal(map[string]any{
			"Type": "Notification", "MessageId": r.SNS.MessageID, "TopicArn": r.SNS.TopicArn, "Subject": r.SNS.Subject,
			"Message": r.SNS.Message, "Timestamp": r.SNS.Timestamp.Format("2006-01-02T15:04:05.000Z"),
			"SignatureVersion": "1", "Signature": "EXAMPLE", "MessageAttributes": attrs,
		})
		if err != nil {
			t.Fatal(err)
		}
		out.Records = append(out.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("sqs-%d-%s", i, r.SNS.MessageID), Body: string(body), EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:ap-northeast-1:123456789012:linegate-OpsQueue",
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return out
}

// crashes returns n crash reports of one panic site (the crash-trace
// sample), one second apart from start, each with its own event and SNS
// message; site changes the panicking line so that sites differ.
func crashes(t *testing.T, n int, site int, start time.Time, idPrefix string) []events.SNSEventRecord {
	t.Helper()
	base := loadEvent(t, "crash-trace").Records[0]
	rep, err := crash.Parse([]byte(base.SNS.Message))
	if err != nil {
		t.Fatal(err)
	}
	var out []events.SNSEventRecord
	for i := range n {
		r := rep
		r.WebhookEventID = fmt.Sprintf("01EV%s%03d", idPrefix, i)
		r.Time = start.Add(time.Duration(i) * time.Second)
		r.Stack = strings.Replace(rep.Stack, "handlers/h.go:11", fmt.Sprintf("handlers/h.go:%d", 11+site), 1)
		body, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rec := base
		rec.SNS.MessageID = fmt.Sprintf("%s-%03d", idPrefix, i)
		rec.SNS.Message = string(body)
		out = append(out, rec)
	}
	return out
}

// alarms returns notifications of one alarm: one per state, a minute apart.
func alarms(t *testing.T, name string, start time.Time, states ...string) []events.SNSEventRecord {
	t.Helper()
	var out []events.SNSEventRecord
	old := "OK"
	for i, state := range states {
		ev := alarmEvent(t, name)
		var a map[string]any
		if err := json.Unmarshal([]byte(ev.Records[0].SNS.Message), &a); err != nil {
			t.Fatal(err)
		}
		a["OldStateValue"], a["NewStateValue"] = old, state
		a["StateChangeTime"] = start.Add(time.Duration(i) * time.Minute).UTC().Format(stateChangeLayout)
		old = state
		b, _ := json.Marshal(a)
		r := ev.Records[0]
		r.SNS.Message = string(b)
		r.SNS.MessageID = fmt.Sprintf("%s-%d", name, i)
		out = append(out, r)
	}
	return out
}

var burstStart = time.Date(2026, 3, 14, 1, 2, 3, 0, time.UTC)

// A burst becomes one card per stack signature and one per alarm, each
// with its count and time span, pushed once to each operator.
func TestQueueBatchIsCoalesced(t *testing.T) {
	var recs []events.SNSEventRecord
	recs = append(recs, crashes(t, 50, 0, burstStart, "a")...)
	recs = append(recs, alarms(t, "linegate-interactive-dlq", burstStart, "ALARM", "OK", "ALARM")...)
	recs = append(recs, crashes(t, 3, 1, burstStart.Add(time.Minute), "b")...)
	recs = append(recs, alarms(t, "linegate-worker-errors", burstStart, "ALARM")...)
	m := &testmetrics.Recorder{}
	n, p, _ := newTestNotifier(t, []string{opUser, opGroup}, WithMetrics(m))
	resp, err := n.HandleQueue(context.Background(), viaQueue(t, events.SNSEvent{Records: recs}))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleQueue = %+v, %v", resp, err)
	}
	for _, op := range []string{opUser, opGroup} {
		if calls := p.to(op); len(calls) != 1 {
			t.Fatalf("operator %s: %d pushes for one burst, want 1", op, len(calls))
		}
	}
	cards := messagesOf(t, p.to(opUser)[0])
	if len(cards) != 4 {
		t.Fatalf("%d cards, want 4 (two stack signatures, two alarms)", len(cards))
	}
	want := []struct {
		alt   string
		texts []string
	}{
		{"[CRASH ×50] linegate-WorkerFunction-Ab12Cd34Ef56: runtime error", []string{"CRASH ×50", "50 crashes", "2026-03-14 10:02:03 – 10:02:52 JST", "01EVa000"}},
		{"[ALARM ×3] linegate-interactive-dlq: OK → ALARM", []string{"ALARM ×3", "3 notifications (newest shown)", "10:02:03 – 10:04:03 JST", "OK → ALARM"}},
		{"[CRASH ×3] linegate-WorkerFunction-Ab12Cd34Ef56", []string{"50 crashes"}},
		{"[ALARM] linegate-worker-errors: OK → ALARM", nil},
	}
	for i, w := range want {
		alt := cards[i]["altText"].(string)
		if !strings.HasPrefix(alt, w.alt) {
			t.Errorf("card %d altText %q, want it to start %q", i, alt, w.alt)
		}
		all := strings.Join(texts(cards[i]["contents"]), "\n")
		for j, s := range w.texts {
			if got := strings.Contains(all, s); got != (i != 2 || j != 0) {
				t.Errorf("card %d: contains %q = %v:\n%s", i, s, got, all)
			}
		}
	}
	if m.Total(MetricRecords) != 57 || m.Total(MetricCrashes) != 2 || m.Total(MetricAlarms) != 2 || m.Total(MetricPushes) != 2 {
		t.Errorf("metrics = %v", m.Counts())
	}
	if probs := validateMessages(t, p.calls[0].Messages); len(probs) > 0 {
		t.Errorf("coalesced cards break LINE's schema: %v", probs)
	}
}

// The alarm card of a group shows the newest state by state change time,
// whatever the record order.
func TestAlarmGroupShowsNewestState(t *testing.T) {
	recs := alarms(t, "linegate-api-5xx", burstStart, "ALARM", "OK")
	recs[0], recs[1] = recs[1], recs[0] // the OK (newer) arrives first
	n, p, _ := newTestNotifier(t, []string{opUser})
	if _, err := n.HandleQueue(context.Background(), viaQueue(t, events.SNSEvent{Records: recs})); err != nil {
		t.Fatal(err)
	}
	card := messagesOf(t, p.calls[0])[0]
	if alt := card["altText"]; alt != "[OK ×2] linegate-api-5xx: ALARM → OK" {
		t.Fatalf("altText %q; want the newest state, OK", alt)
	}
}

func TestCrashSignature(t *testing.T) {
	at := burstStart
	a := mustParse(t, crashes(t, 1, 0, at, "a")[0])
	sameSiteOtherEvent := mustParse(t, crashes(t, 1, 0, at.Add(time.Hour), "b")[0])
	otherLine := mustParse(t, crashes(t, 1, 1, at, "c")[0])
	otherFunction := mustParse(t, crashes(t, 1, 0, at, "d")[0])
	r := *otherFunction.crash
	r.Function = "linegate-LongWorkerFunction"
	otherFunction.crash = &r
	otherMessage := mustParse(t, crashes(t, 1, 0, at, "e")[0])
	r2 := *otherMessage.crash
	r2.Error = "runtime error: index out of range [7] with length 2"
	otherMessage.crash = &r2
	notGo := mustParse(t, crashes(t, 1, 0, at, "f")[0])
	r3 := *notGo.crash
	r3.Stack, r3.Error = "Traceback (most recent call last):", "KeyError: 'x'"
	notGo.crash = &r3
	notGoOtherError := notGo
	r4 := r3
	r4.Error = "KeyError: 'y'"
	notGoOtherError.crash = &r4

	for _, tt := range []struct {
		name string
		a, b opsMessage
		same bool
	}{
		{"same site, another event and time", a, sameSiteOtherEvent, true},
		{"same frames, another panic message", a, otherMessage, true},
		{"another line", a, otherLine, false},
		{"another function", a, otherFunction, false},
		{"not a Go stack: by error text", notGo, notGoOtherError, false},
	} {
		if got := crashSignature(tt.a) == crashSignature(tt.b); got != tt.same {
			t.Errorf("%s: same signature = %v, want %v", tt.name, got, tt.same)
		}
	}
	if sig := crashSignature(a); !strings.Contains(sig, "handlers/h.go:11") || strings.Contains(sig, "runtime/debug") {
		t.Errorf("signature %q: want the frames below the panic, with line numbers", sig)
	}
}

func TestQueueGolden(t *testing.T) {
	n, p, _ := newTestNotifier(t, []string{opUser})
	recs := append(crashes(t, 3, 0, burstStart, "g"), alarms(t, "linegate-interactive-dlq", burstStart, "ALARM", "OK")...)
	if _, err := n.HandleQueue(context.Background(), viaQueue(t, events.SNSEvent{Records: recs})); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(p.calls, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "queue-coalesced.golden.json"), append(got, '\n'))
}

// A failed push fails exactly the records behind its cards; redelivered
// together they make the same cards under the same retry keys, so the
// operator who got them is not notified twice.
func TestQueuePushFailureFailsItsRecordsOnly(t *testing.T) {
	var recs []events.SNSEventRecord
	for site := range 7 { // seven signatures: two pushes per operator (5 + 2 cards)
		recs = append(recs, crashes(t, 2, site, burstStart, fmt.Sprint("s", site))...)
	}
	batch := viaQueue(t, events.SNSEvent{Records: recs})
	n, p, _ := newTestNotifier(t, []string{opUser, opGroup})
	p.failCall = map[int]error{3: errors.New("line: 500")} // opGroup's second push (cards 6 and 7)
	resp, err := n.HandleQueue(context.Background(), batch)
	if err != nil {
		t.Fatalf("HandleQueue = %v; failures go in the response", err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	wantFailed := []string{batch.Records[10].MessageId, batch.Records[11].MessageId, batch.Records[12].MessageId, batch.Records[13].MessageId}
	if !slices.Equal(failed, wantFailed) {
		t.Fatalf("failed records %v, want %v (the last two signatures)", failed, wantFailed)
	}
	firstKeys := map[string]string{}
	for _, c := range p.calls {
		firstKeys[c.To+"/"+fmt.Sprint(len(messagesOf(t, c)))] = c.RetryKey
	}
	// SQS redelivers the failed records; they coalesce into the same cards.
	redelivered := events.SQSEvent{Records: batch.Records[10:]}
	p.calls, p.failCall = nil, nil
	if resp, _ := n.HandleQueue(context.Background(), redelivered); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery failed: %+v", resp)
	}
	for _, c := range p.calls {
		if want := firstKeys[c.To+"/2"]; c.RetryKey != want {
			t.Errorf("redelivered push to %s has key %s, want %s (LINE then answers 409 to the operator already notified)", c.To, c.RetryKey, want)
		}
	}
}

func TestQueueRecordsThatAreNotNotifications(t *testing.T) {
	good := viaQueue(t, loadEvent(t, "alarm-alarm")).Records[0]
	tests := []struct{ name, body string }{
		{"raw delivery: the bare alarm JSON", loadEvent(t, "alarm-alarm").Records[0].SNS.Message},
		{"not json", "user said: my secret diary text"},
		{"a notification without a message", `{"Type":"Notification","MessageId":"x"}`},
		{"a subscription confirmation", `{"Type":"SubscriptionConfirmation","MessageId":"x","Message":"You have chosen to subscribe"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &testmetrics.Recorder{}
			n, p, logs := newTestNotifier(t, []string{opUser}, WithMetrics(m))
			bad := events.SQSMessage{MessageId: "bad-1", Body: tt.body}
			resp, err := n.HandleQueue(context.Background(), events.SQSEvent{Records: []events.SQSMessage{bad, good}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("HandleQueue = %+v, %v; a record no retry can fix must not fail", resp, err)
			}
			if len(p.calls) != 1 || len(messagesOf(t, p.calls[0])) != 1 {
				t.Fatalf("pushes %+v; want the good record's card alone", p.calls)
			}
			out := logs.String()
			if !strings.Contains(out, "bad-1") || !strings.Contains(out, "not an SNS notification") || strings.Contains(out, "secret diary") {
				t.Errorf("log:\n%s", out)
			}
			if m.Total(MetricMalformed) != 1 {
				t.Errorf("malformed = %v", m.Total(MetricMalformed))
			}
		})
	}
}

// FuzzParseQueueRecord feeds arbitrary ops queue bodies through parsing,
// coalescing and rendering: nothing may panic or fail the record, unreadable
// bodies push nothing, and what is pushed satisfies LINE's schema.
func FuzzParseQueueRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, body string) {
		rec := events.SQSMessage{MessageId: "fuzz", Body: body}
		_, parseErr := parseQueueRecord(rec)
		p := &fakePusher{}
		n, err := New(p, []string{opUser}, WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := n.HandleQueue(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec, rec}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleQueue = %+v, %v; only push failures may fail records", resp, err)
		}
		if parseErr != nil {
			if len(p.calls) != 0 {
				t.Fatalf("unreadable record (%v) was pushed", parseErr)
			}
			return
		}
		if len(p.calls) != 1 || len(messagesOf(t, p.calls[0])) != 1 {
			t.Fatalf("%d pushes for one readable record delivered twice; want one push of one card", len(p.calls))
		}
		if probs := validateMessages(t, p.calls[0].Messages); len(probs) > 0 {
			t.Fatalf("invalid rendering of %q:\n%v", body, probs)
		}
	})
}

// SQS and SNS deliver at least once: a report that arrives twice in one
// batch counts once, and a failed push fails both of its records.
func TestDuplicateDeliveryCountsOnce(t *testing.T) {
	recs := crashes(t, 3, 0, burstStart, "d")
	batch := viaQueue(t, events.SNSEvent{Records: append(recs, recs[1])})
	n, p, _ := newTestNotifier(t, []string{opUser})
	p.fail = map[string]error{opUser: errors.New("line: 500")}
	resp, _ := n.HandleQueue(context.Background(), batch)
	if alt := messagesOf(t, p.calls[0])[0]["altText"].(string); !strings.HasPrefix(alt, "[CRASH ×3]") {
		t.Fatalf("altText %q; want the duplicate counted once", alt)
	}
	if len(resp.BatchItemFailures) != 4 {
		t.Fatalf("%d records failed; want all 4, the duplicate's too", len(resp.BatchItemFailures))
	}
}
