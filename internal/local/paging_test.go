package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/doctor"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/template"
)

// The acceptance tests of "every failure reaches the operator, once"
// (docs/adr/0005-every-failure-pages.md), through linegate local at
// --time-scale 60: a 15-minute coalescing window is 15 s, the notifier
// sweeps every second.

// cardsTo lists the altText of every card pushed to op, in push order, and
// the number of pushes.
func cardsTo(t *testing.T, rt *Runtime, op string) (alts []string, pushes int) {
	t.Helper()
	for _, m := range messages(t, rt) {
		if m.To != op || m.Via != "push" {
			continue
		}
		pushes++
		for _, raw := range m.Messages {
			var msg struct {
				AltText string `json:"altText"`
				Text    string `json:"text"`
			}
			_ = json.Unmarshal(raw, &msg)
			alts = append(alts, msg.AltText+msg.Text)
		}
	}
	return alts, pushes
}

func countPrefix(alts []string, prefix string) int {
	n := 0
	for _, a := range alts {
		if strings.HasPrefix(a, prefix) {
			n++
		}
	}
	return n
}

// Two permanent failures 20 scaled minutes apart page the operator twice:
// an alarm already in ALARM pages nobody, the dead-letter notice does.
func TestSecondDeadLetterPagesAgain(t *testing.T) {
	rt, p := start(t, Config{TimeScale: 60})
	first := deliver(t, p, p.Text("U00000000000000000000000000000d01", "probe:permanent"))
	waitEvent(t, rt, 20*time.Second, first, "dead-lettered", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	eventually(t, 20*time.Second, "the first dead letter's card", func() bool {
		alts, _ := cardsTo(t, rt, DefaultOperator)
		return countPrefix(alts, "[DEAD LETTER") == 1
	})
	waitSweeps(t, rt, 20) // 20 scaled minutes: the first card's window has passed
	second := deliver(t, p, p.Text("U00000000000000000000000000000d02", "probe:permanent"))
	waitEvent(t, rt, 20*time.Second, second, "dead-lettered", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	var alts []string
	eventuallySaw(t, 20*time.Second, "the second dead letter's card", func() bool {
		alts, _ = cardsTo(t, rt, DefaultOperator)
		return countPrefix(alts, "[DEAD LETTER") == 2
	}, func() string { return strings.Join(alts, "\n") })
	_, pushes := cardsTo(t, rt, DefaultOperator)
	if pushes < 2 {
		t.Fatalf("%d pushes for two dead letters 20 minutes apart, want at least 2", pushes)
	}
	t.Logf("cards: %q", alts)
	for _, id := range []string{first, second} {
		if !slices.ContainsFunc(sentMatching(t, rt, DefaultOperator, "push", id), func(sentMessage) bool { return true }) {
			t.Errorf("no card names the dead-lettered event %s", id)
		}
	}
}

var crashCounts = regexp.MustCompile(`(\d+) crashes`)

// A 20 s crash loop (a new panicking event every 0.25 s, 80 events: a
// 20-minute incident at --time-scale 60) gives each operator a crash card
// with its count and at most 8 pushes in all: crash, dead-letter and alarm
// cards together.
func TestCrashLoopPagesBounded(t *testing.T) {
	const group = "C0000000000000000000000000000beef"
	operators := []string{DefaultOperator, group}
	env := map[string]string{"OPERATOR_LINE_IDS": strings.Join(operators, ",")}
	rt, p := start(t, Config{TimeScale: 60, Getenv: func(k string) string { return env[k] }})
	const events = 80
	var ids []string
	tick := time.NewTicker(250 * time.Millisecond)
	for i := range events {
		<-tick.C
		ids = append(ids, deliver(t, p, p.Text(fmt.Sprintf("U%032x", 0xc0de000+i), "probe:panic")))
	}
	tick.Stop()
	for _, id := range ids {
		waitEvent(t, rt, 60*time.Second, id, "dead-lettered after its receives", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	}
	crashes := func(op string) int {
		n := 0
		for _, m := range messages(t, rt) {
			if m.To != op {
				continue
			}
			for _, raw := range m.Messages {
				s := string(raw)
				if !strings.Contains(s, "[CRASH") {
					continue
				}
				if c := crashCounts.FindStringSubmatch(s); c != nil {
					k, _ := strconv.Atoi(c[1])
					n += k
				} else {
					n++
				}
			}
		}
		return n
	}
	for _, op := range operators {
		eventuallySaw(t, 60*time.Second, "crash cards counting all 80 crashes for "+op, func() bool { return crashes(op) >= events },
			func() string { alts, _ := cardsTo(t, rt, op); return strings.Join(alts, "\n") })
	}
	waitSweeps(t, rt, 17) // a whole window more: any report still held would be paged
	for _, op := range operators {
		alts, pushes := cardsTo(t, rt, op)
		t.Logf("operator %s: %d pushes: %q", op, pushes, alts)
		if got := crashes(op); got != events {
			t.Errorf("operator %s: the crash cards count %d crashes, want %d", op, got, events)
		}
		if !slices.ContainsFunc(alts, func(a string) bool { return strings.HasPrefix(a, "[CRASH ×") }) {
			t.Errorf("operator %s: no crash card carries a count: %q", op, alts)
		}
		if pushes > 8 {
			t.Errorf("operator %s: %d pushes for one crash loop, want at most 8", op, pushes)
		}
		if n := countPrefix(alts, "[DEAD LETTER"); n != 0 {
			t.Errorf("operator %s: %d dead-letter cards of their own for crashed events (they fold into the crash's card)", op, n)
		}
	}
	dlq, _ := rt.queue("InteractiveDLQ")
	t.Logf("DLQ %s holds %d; sweeps %v", dlq.Name, getQueue(t, rt, dlq.Name).Visible, rt.sweeps.view())
}

// A restart on the same --state pages nothing again: the crash marker is
// a completed marker (no claim for the start to release), the ledger is in
// the journaled table, the alarms keep their state.
func TestRestartSendsNoSecondCrashCard(t *testing.T) {
	dir := t.TempDir()
	out := &syncBuffer{}
	cfg := Config{TimeScale: 60, StateDir: dir, Out: out}
	rt, p := start(t, cfg)
	id := deliver(t, p, p.Text("U00000000000000000000000000000e01", "probe:panic"))
	waitEvent(t, rt, 30*time.Second, id, "dead-lettered after its receives", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	eventually(t, 30*time.Second, "the crash card and the DLQ alarm's card", func() bool {
		alts, _ := cardsTo(t, rt, DefaultOperator)
		return countPrefix(alts, "[CRASH") == 1 && slices.ContainsFunc(alts, func(a string) bool { return strings.Contains(a, "interactive-dlq: OK → ALARM") })
	})
	waitSweeps(t, rt, 2)
	marker := idempotency.CrashKey(id)
	if err := samWorkerStore(t, rt).Claim(context.Background(), marker, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("the crash marker before the restart: %v, want a completed marker", err)
	}
	rt.Close()

	out2 := &syncBuffer{}
	cfg.Out = out2
	rt, p = start(t, cfg)
	// The runtime works, and a whole window of sweeps passes: a card held
	// or re-sent would be out by then.
	echo := deliver(t, p, p.Text("U00000000000000000000000000000e02", "after the restart"))
	waitEvent(t, rt, 20*time.Second, echo, "handled", func(v eventView) bool { return v.Outcome == "ok" })
	waitSweeps(t, rt, 17)
	alts, pushes := cardsTo(t, rt, DefaultOperator)
	if pushes != 0 {
		t.Errorf("after the restart the operator got %d push(es): %q, want none", pushes, alts)
	}
	if strings.Contains(out2.String(), "released") {
		t.Errorf("the restart released claims:\n%s", out2.String())
	}
	if err := samWorkerStore(t, rt).Claim(context.Background(), marker, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Errorf("the crash marker after the restart: %v, want it kept", err)
	}
	if a := alarmNamed(t, rt, "-interactive-dlq"); a.State != "ALARM" {
		t.Errorf("the interactive DLQ's alarm after the restart: %+v, want ALARM kept", a)
	}
}

func alarmNamed(t *testing.T, rt *Runtime, suffix string) alarmView {
	t.Helper()
	for _, a := range rt.alarms.views() {
		if strings.HasSuffix(a.Name, suffix) {
			return a
		}
	}
	t.Fatalf("no alarm named *%s", suffix)
	return alarmView{}
}

// With every LINE push refused (a revoked token), a crash's card cannot be
// pushed: after the ops queue's three receives it lands in the notifier's
// failure queue, whose alarm reaches the AlertEmail subscription of the
// escalation topic, which has no filter.
func TestAlertPathFailureReachesTheEmail(t *testing.T) {
	rt, p := start(t, Config{TimeScale: 60, Params: map[string]string{"AlertEmail": "ops@example.com"}})
	rt.LINE().Inject(linemock.Fault{Path: linemock.PathPush, Status: http.StatusUnauthorized, Message: "Authentication failed", Times: 1 << 30})
	deliver(t, p, p.Text("U00000000000000000000000000000f01", "probe:panic"))
	var got []emailDelivery
	eventuallySaw(t, 90*time.Second, "the notifier-failures alarm by email", func() bool {
		getJSON(t, rt.URL()+"/_local/email", &got)
		return slices.ContainsFunc(got, func(d emailDelivery) bool {
			return strings.HasSuffix(d.Alarm, "-notifier-failures") && d.State == "ALARM"
		})
	}, func() string { b, _ := json.MarshalIndent(got, "", " "); return string(b) })
	for _, d := range got {
		if strings.HasSuffix(d.Alarm, "-notifier-failures") {
			if d.To != "ops@example.com" || d.Subscription != "EscalationEmailSubscription" {
				t.Errorf("delivery %+v: want ops@example.com through the escalation topic's subscription", d)
			}
		}
	}
	var topics []topicView
	getJSON(t, rt.URL()+"/_local/topics", &topics)
	for _, tv := range topics {
		if strings.Contains(tv.Name, "EscalationTopic") && !slices.Contains(tv.Subscribers, "email:ops@example.com") {
			t.Errorf("the escalation topic's subscribers %v: want the unfiltered email", tv.Subscribers)
		}
	}
	if _, pushes := cardsTo(t, rt, DefaultOperator); pushes != 0 {
		t.Errorf("%d pushes accepted while LINE refuses every push", pushes)
	}
}

// Every alarm of the template is visible in linegate local and drives its
// card: a breaching data point put at /_local/metrics turns it ALARM, and
// the operator gets its card.
func TestEveryAlarmDrivesItsCard(t *testing.T) {
	rt, _ := start(t, Config{TimeScale: 60})
	alarms := rt.Topology().Alarms
	if len(alarms) < 25 {
		t.Fatalf("%d alarms in the template", len(alarms))
	}
	for _, a := range alarms {
		v := a.Threshold + 1
		put := metricPut{Namespace: a.Namespace, MetricName: a.MetricName, Dimensions: a.Dimensions, Value: &v}
		b, _ := json.Marshal(put)
		resp, err := http.Post(rt.URL()+"/_local/metrics", "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("put %s: %v %v", a.MetricName, resp, err)
		}
		_ = resp.Body.Close()
	}
	for _, a := range alarms {
		eventually(t, 30*time.Second, a.Name+" to have turned ALARM", func() bool {
			return slices.ContainsFunc(alarmNamed(t, rt, a.Name).History, func(tr alarmTransition) bool { return tr.To == "ALARM" })
		})
	}
	var missing []string
	eventuallySaw(t, 30*time.Second, "a card for every alarm", func() bool {
		alts, _ := cardsTo(t, rt, DefaultOperator)
		missing = nil
		for _, a := range alarms {
			if !slices.ContainsFunc(alts, func(s string) bool { return strings.Contains(s, "] "+a.Name+": ") }) {
				missing = append(missing, a.Name)
			}
		}
		return len(missing) == 0
	}, func() string { return strings.Join(missing, "\n") })
}

// A bad data point is refused with what to send.
func TestPutMetricRefusesBadInput(t *testing.T) {
	rt, _ := start(t, Config{})
	for _, body := range []string{`{`, `{"namespace":"AWS/Lambda"}`, `{"namespace":"x","metricName":"y","value":1,"unit":"Count"}`} {
		resp, err := http.Post(rt.URL()+"/_local/metrics", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e["error"] == "" {
			t.Errorf("%s: %d %v, want 400 with an error", body, resp.StatusCode, e)
		}
	}
}

// The expiry alarms page a dead letter before SQS deletes it: their
// threshold is the DLQ's retention less the warning, and for a DLQ fed by
// SQS's redrive from a standard queue (whose messages keep their original
// enqueue time, while the metric counts from the move) less the source
// queue's retention too.
func TestDLQExpiryThresholdsFollowRetention(t *testing.T) {
	top, err := template.Load(testTemplate, TemplateParams(nil, func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	warning := 48 * time.Hour // DLQExpiryWarningHours' default
	expiring := map[string]template.Alarm{}
	for _, a := range top.Alarms {
		if a.MetricName == "ApproximateAgeOfOldestMessage" && strings.HasSuffix(a.Name, "-expiring") {
			expiring[a.Dimensions["QueueName"]] = a
		}
	}
	dlqs := 0
	for _, q := range top.Queues {
		var sources []template.Queue
		for _, s := range top.Queues {
			if s.RedriveTarget == q.LogicalID {
				sources = append(sources, s)
			}
		}
		ruleTarget := false
		for _, r := range top.Rules {
			for _, tg := range r.Targets {
				ruleTarget = ruleTarget || tg.DLQLogicalID == q.LogicalID
			}
		}
		if len(sources) == 0 && !ruleTarget {
			continue
		}
		dlqs++
		a, ok := expiring[q.Name]
		if !ok {
			t.Errorf("dead-letter queue %s has no expiry alarm", q.LogicalID)
			continue
		}
		want := q.MessageRetention - warning
		if !q.FIFO {
			for _, s := range sources {
				want = min(want, q.MessageRetention-s.MessageRetention-warning)
			}
		}
		if got := time.Duration(a.Threshold) * time.Second; got != want {
			t.Errorf("%s: threshold %v, want %v (retention %v)", a.Name, got, want, q.MessageRetention)
		}
		if !slices.Contains(a.AlarmActions, "EscalationTopic") || a.TreatMissingData != "missing" {
			t.Errorf("%s: actions %v, missing data %s: want the escalation topic, and no state from an empty DLQ", a.Name, a.AlarmActions, a.TreatMissingData)
		}
	}
	if dlqs != len(expiring) {
		t.Errorf("%d DLQs, %d expiry alarms", dlqs, len(expiring))
	}
}

// linegate doctor against linegate local checks the DLQs the template
// defines, a DLQ added to it included, and warns without an AlertEmail
// (ALERT_EMAIL locally) and passes with one.
func TestDoctorDerivesDLQsAndWantsAnAlertEmail(t *testing.T) {
	data, err := os.ReadFile(testTemplate)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "  # ---------------------------------------------------------------- worker\n"
	extra := "  AuditQueue:\n    Type: AWS::SQS::Queue\n    Properties:\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt AuditDLQ.Arn\n        maxReceiveCount: 3\n\n" +
		"  AuditDLQ:\n    Type: AWS::SQS::Queue\n\n"
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), anchor, extra+anchor, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"", "ops@example.com"} {
		t.Run("ALERT_EMAIL="+email, func(t *testing.T) {
			env := map[string]string{"ALERT_EMAIL": email}
			rt, _ := start(t, Config{Template: path, Getenv: func(k string) string { return env[k] }})
			target := doctor.Local{URL: rt.URL(), Token: DefaultToken, Secret: DefaultSecret}
			qs, err := target.DLQs(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, q := range qs {
				names = append(names, q.Name)
			}
			for _, want := range []string{"linegate-AuditDLQ", "linegate-LongDLQ", "linegate-RuleTargetDLQ", "linegate-NotifierFailureQueue"} {
				if !slices.Contains(names, want) {
					t.Errorf("doctor checks %v: not %s", names, want)
				}
			}
			results := map[string]doctor.Result{}
			for _, r := range doctor.Run(context.Background(), target) {
				results[r.Check] = r
			}
			want := doctor.Warn
			if email != "" {
				want = doctor.Pass
			}
			if r := results["alert email"]; r.Status != want {
				t.Errorf("alert email: %+v, want %s", r, want)
			}
		})
	}
}

// The notifier's sweep watches every DLQ the template defines (a queue's
// redrive target, a rule target's dead-letter queue): a DLQ added without
// its place in ALERT_DLQS fails here.
func TestNotifierSweepsEveryDLQ(t *testing.T) {
	top, err := template.Load(testTemplate, TemplateParams(nil, func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	byID := map[string]template.Queue{}
	for _, q := range top.Queues {
		byID[q.LogicalID] = q
	}
	for _, q := range top.Queues {
		if q.RedriveTarget != "" {
			want[byID[q.RedriveTarget].URL] = true
		}
	}
	for _, r := range top.Rules {
		for _, tg := range r.Targets {
			if tg.DLQLogicalID != "" {
				want[byID[tg.DLQLogicalID].URL] = true
			}
		}
	}
	var watched []string
	for _, f := range top.Functions {
		if v, ok := f.Env["ALERT_DLQS"]; ok {
			watched = strings.Split(v, ",")
		}
	}
	for url := range want {
		if !slices.Contains(watched, url) {
			t.Errorf("the notifier's sweep does not watch %s", url)
		}
	}
	if len(watched) != len(want) {
		t.Errorf("ALERT_DLQS %v, the template's DLQs %v", watched, want)
	}
}

// docs/operations.md lists every alarm of the template with what to do.
func TestEveryAlarmIsInTheOperationsDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	top, err := template.Load(testTemplate, TemplateParams(nil, func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range top.Alarms {
		name := "`*" + strings.TrimPrefix(a.Name, top.StackName) + "`"
		if !strings.Contains(string(doc), name) {
			t.Errorf("docs/operations.md does not list %s", name)
		}
	}
}

// The notifier's window and grace are compressed by the time scale like
// every period; other functions get none.
func TestScaledPagingEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		scale     float64
		window    string
		hasWindow bool
	}{
		{"the notifier at 60", map[string]string{"ALERT_STATE_TABLE": "t", "ALERT_WINDOW": "15m"}, 60, "15s", true},
		{"the default window at 60", map[string]string{"ALERT_STATE_TABLE": "t"}, 60, "15s", true},
		{"real time", map[string]string{"ALERT_STATE_TABLE": "t", "ALERT_WINDOW": "15m"}, 1, "15m", true},
		{"the worker", map[string]string{"IDEMPOTENCY_TABLE": "t"}, 60, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scaledPagingEnv(tt.env, tt.scale)
			got, ok := tt.env["ALERT_WINDOW"]
			if ok != tt.hasWindow || (ok && got != tt.window) {
				t.Fatalf("ALERT_WINDOW = %q (%v), want %q", got, ok, tt.window)
			}
			if tt.hasWindow && tt.scale == 60 && tt.env["ALERT_SWEEP_GRACE"] != "3s" {
				t.Fatalf("ALERT_SWEEP_GRACE = %q, want 3s", tt.env["ALERT_SWEEP_GRACE"])
			}
		})
	}
}

// The functions' EMF lines reach the alarms as CloudWatch Logs turns them
// into metrics: a watched metric is kept with its dimensions, the rest is
// not decoded at all.
func TestEMFTapKeepsWatchedMetrics(t *testing.T) {
	store := newMetricStore()
	store.watch([]string{"AlertPushesFailed"}, time.Hour)
	var out bytes.Buffer
	tap := &emfTap{next: &out, store: store}
	now := time.Now()
	line := fmt.Sprintf(`{"AlertPushesFailed":[1,1],"AlertPushesSent":3,"Function":"linegate-NotifierFunction","_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"linegate","Dimensions":[["Function"]],"Metrics":[{"Name":"AlertPushesFailed","Unit":"Count"},{"Name":"AlertPushesSent","Unit":"Count"}]}]}}`, now.UnixMilli())
	// Written in two pieces, as a writer may.
	if _, err := tap.Write([]byte(line[:40])); err != nil {
		t.Fatal(err)
	}
	if _, err := tap.Write([]byte(line[40:] + "\n")); err != nil {
		t.Fatal(err)
	}
	if out.String() != line+"\n" {
		t.Fatalf("the log stream was changed: %q", out.String())
	}
	dims := map[string]string{"Function": "linegate-NotifierFunction"}
	if v, ok := store.stat("linegate", "AlertPushesFailed", dims, "Sum", time.Minute, now.Add(time.Second)); !ok || v != 2 {
		t.Fatalf("AlertPushesFailed = %v (%v), want 2", v, ok)
	}
	if _, ok := store.stat("linegate", "AlertPushesSent", dims, "Sum", time.Minute, now.Add(time.Second)); ok {
		t.Fatal("an unwatched metric was kept")
	}
	if _, ok := store.stat("linegate", "AlertPushesFailed", dims, "Sum", time.Minute, now.Add(2*time.Minute)); ok {
		t.Fatal("a point outside the period counted")
	}
}

// The chat queue's age alarm fires inside the reply token's minute: at
// most 45 s, configurable, and the template refuses more.
func TestChatQueueAgeAlarmWithinTheReplyToken(t *testing.T) {
	params := func(extra map[string]string) map[string]string {
		p := TemplateParams(nil, func(string) string { return "" })
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	for _, tt := range []struct {
		value string
		want  float64
	}{{"", 30}, {"45", 45}, {"10", 10}} {
		extra := map[string]string{}
		if tt.value != "" {
			extra["ChatQueueAgeAlarmSeconds"] = tt.value
		}
		top, err := template.Load(testTemplate, params(extra))
		if err != nil {
			t.Fatal(err)
		}
		var chat template.Queue
		for _, q := range top.Queues {
			if q.LogicalID == "InteractiveQueue" {
				chat = q
			}
		}
		found := false
		for _, a := range top.Alarms {
			if a.MetricName == "ApproximateAgeOfOldestMessage" && a.Dimensions["QueueName"] == chat.Name {
				found = true
				if a.Threshold != tt.want || a.Threshold > 45 {
					t.Errorf("ChatQueueAgeAlarmSeconds=%q: threshold %v, want %v (and at most 45)", tt.value, a.Threshold, tt.want)
				}
			}
		}
		if !found {
			t.Fatal("no age alarm on the chat queue")
		}
	}
	if _, err := template.Load(testTemplate, params(map[string]string{"ChatQueueAgeAlarmSeconds": "46"})); err == nil {
		t.Error("a chat queue age alarm of 46 s, past the reply token's life, was accepted")
	}
}
