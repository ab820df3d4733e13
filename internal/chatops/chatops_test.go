package chatops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/chatops"
	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/template"
	"github.com/linegate/linegate/internal/testmetrics"
	"github.com/linegate/linegate/pkg/bot"
)

const (
	operator = "U0000000000000000000000000000cafe"
	stranger = "U0000000000000000000000000000beef"
)

// replies records what the handler answered.
type replies struct{ texts []string }

func (r *replies) Send(_ context.Context, _ lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	b, _ := json.Marshal(msgs)
	r.texts = append(r.texts, string(b))
	return lineapi.ViaReply, nil
}
func (r *replies) Push(context.Context, string, string, ...messaging_api.MessageInterface) error {
	return nil
}
func (r *replies) ShowLoading(context.Context, string, int) error { return nil }
func (r *replies) MarkAsRead(context.Context, string) error       { return nil }

type silencer struct{ calls []string }

func (s *silencer) Silence(_ context.Context, alarm string, until time.Time) error {
	s.calls = append(s.calls, alarm+"@"+until.UTC().Format(time.RFC3339))
	return nil
}

func postbackEvent(t *testing.T, source, data string, m bot.Messenger) *bot.Event {
	t.Helper()
	quoted, _ := json.Marshal(data)
	raw := `{"type":"postback","mode":"active","timestamp":` + strconv.FormatInt(time.Now().UnixMilli(), 10) + `,"source":` + source +
		`,"webhookEventId":"01PB` + strconv.FormatInt(time.Now().UnixNano(), 10) + `","replyToken":"rt","postback":{"data":` + string(quoted) + `}}`
	e, err := bot.Parse(json.RawMessage(raw), "Ubot", time.Now(), m)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func user(id string) string { return `{"type":"user","userId":"` + id + `"}` }

// Each refusal does nothing, replies nothing, never reaches the bot, and
// writes an audit line; the operator's valid tap acts once and replies.
func TestInterceptActsOnlyForOperatorsOnSignedData(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), func() time.Time { return now })
	other, _ := postback.NewSigner([]byte("another stack's key 0123"), func() time.Time { return now })
	sil := &silencer{}
	logs := &bytes.Buffer{}
	metrics := &testmetrics.Recorder{}
	h, err := chatops.New(chatops.Config{Signer: signer, Operators: []string{operator}, Once: idempotency.NewMemory(),
		Silencer: sil, Log: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: metrics, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := signer.Sign(postback.Silence, "linegate-interactive-dlq", time.Hour)
	expired, _ := postback.NewSigner([]byte("a key only the stack knows"), func() time.Time { return now.Add(-2 * time.Hour) })
	old, _ := expired.Sign(postback.Silence, "linegate-interactive-dlq", time.Hour)
	foreign, _ := other.Sign(postback.Silence, "linegate-interactive-dlq", time.Hour)
	refusals := []struct{ name, source, data string }{
		{"another user", user(stranger), good},
		{"the operator in a group", `{"type":"group","groupId":"C0000000000000000000000000000001","userId":"` + operator + `"}`, good},
		{"another stack's key", user(operator), foreign},
		{"expired", user(operator), old},
		{"altered", user(operator), strings.Replace(good, "silence", "redrive", 1)},
		// A MAC compared as a prefix would let these through.
		{"empty MAC", user(operator), good[:strings.LastIndexByte(good, '.')+1]},
		{"truncated MAC", user(operator), good[:len(good)-1]},
		{"MAC of one character", user(operator), good[:strings.LastIndexByte(good, '.')+2]},
		{"MAC with more after it", user(operator), good + "A"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			r := &replies{}
			handled, err := h.Intercept(context.Background(), postbackEvent(t, tt.source, tt.data, r))
			if !handled || err != nil || len(r.texts) != 0 || len(sil.calls) != 0 {
				t.Fatalf("handled %v err %v replies %v silenced %v: want handled, nothing done or said", handled, err, r.texts, sil.calls)
			}
		})
	}
	if got := metrics.Total(chatops.MetricRefused); got != float64(len(refusals)) {
		t.Fatalf("%v refusals counted, want %d", got, len(refusals))
	}

	r := &replies{}
	if handled, err := h.Intercept(context.Background(), postbackEvent(t, user(operator), good, r)); !handled || err != nil {
		t.Fatal(handled, err)
	}
	if len(sil.calls) != 1 || sil.calls[0] != "linegate-interactive-dlq@2026-12-01T04:00:00Z" || len(r.texts) != 1 || !strings.Contains(r.texts[0], "silenced until 04:00") {
		t.Fatalf("silenced %v, replies %v", sil.calls, r.texts)
	}
	// The same button again: used, nothing happens.
	r2 := &replies{}
	_, _ = h.Intercept(context.Background(), postbackEvent(t, user(operator), good, r2))
	if len(sil.calls) != 1 || len(r2.texts) != 0 {
		t.Fatalf("a used button acted again: %v %v", sil.calls, r2.texts)
	}
	if !strings.Contains(logs.String(), `"outcome":"done"`) || !strings.Contains(logs.String(), `"reason":"not an operator in a one-to-one chat with the bot"`) ||
		strings.Contains(logs.String(), operator) {
		t.Fatalf("audit log:\n%s", logs)
	}
	// The bot's own postbacks are not intercepted.
	if handled, _ := h.Intercept(context.Background(), postbackEvent(t, user(operator), "action=buy", &replies{})); handled {
		t.Fatal("the bot's own postback was intercepted")
	}
}

// Redrive acts on the listed DLQs only; Resend held reports what it sent.
func TestRedriveAndResendTargets(t *testing.T) {
	c := mem.New()
	defer c.Close()
	ctx := context.Background()
	cloudtest.QueueWithDLQ(t, c, "work", "dlq", 1, nil)
	_, _ = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("not-offered")})
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), nil)
	resent := 0
	h, _ := chatops.New(chatops.Config{Signer: signer, Operators: []string{operator}, Queues: c, DLQs: []string{"dlq"},
		Resend: func(context.Context) (held.Report, error) { resent++; return held.Report{Sent: 3}, nil }})
	tap := func(action, target string) string {
		data, _ := signer.Sign(action, target, time.Hour)
		r := &replies{}
		if _, err := h.Intercept(ctx, postbackEvent(t, user(operator), data, r)); err != nil {
			t.Fatal(err)
		}
		return strings.Join(r.texts, "")
	}
	if got := tap(postback.Redrive, "not-offered"); !strings.Contains(got, "Redrive failed: not-offered is not a dead-letter queue this stack redrives") {
		t.Fatalf("reply %s", got)
	}
	if got := tap(postback.Redrive, "dlq"); !strings.Contains(got, "Redrive of dlq done: 0 message(s) moved back") {
		t.Fatalf("reply %s", got)
	}
	if got := tap(postback.ResendHeld, "held"); resent != 1 || !strings.Contains(got, "3 held result(s) sent") {
		t.Fatalf("resent %d, reply %s", resent, got)
	}
	if got := tap(postback.Ack, "linegate-api-5xx"); !strings.Contains(got, "linegate-api-5xx acknowledged") {
		t.Fatalf("reply %s", got)
	}
}

type fakeAlarms struct{ disabled []string }

func (f *fakeAlarms) DisableAlarmActions(_ context.Context, in *cloudwatch.DisableAlarmActionsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.DisableAlarmActionsOutput, error) {
	f.disabled = append(f.disabled, in.AlarmNames...)
	return &cloudwatch.DisableAlarmActionsOutput{}, nil
}

type fakeSchedules struct {
	in  *scheduler.CreateScheduleInput
	err error
}

func (f *fakeSchedules) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	f.in = in
	return &scheduler.CreateScheduleOutput{}, f.err
}

// In AWS a silence schedules, once, the re-enabling of the alarm's actions
// with the silence role, under the stack's prefix, and then disables them.
func TestCloudWatchSilencer(t *testing.T) {
	al, sc := &fakeAlarms{}, &fakeSchedules{}
	s := chatops.CloudWatchSilencer{Alarms: al, Schedules: sc, RoleARN: "arn:aws:iam::1:role/silence", Prefix: "linegate-silence"}
	until := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	if err := s.Silence(context.Background(), "linegate-interactive-dlq", until); err != nil {
		t.Fatal(err)
	}
	in := sc.in
	if len(al.disabled) != 1 || aws.ToString(in.ScheduleExpression) != "at(2026-12-01T04:00:00)" ||
		!strings.HasPrefix(aws.ToString(in.Name), "linegate-silence-") || len(aws.ToString(in.Name)) > 64 ||
		aws.ToString(in.Target.Arn) != "arn:aws:scheduler:::aws-sdk:cloudwatch:enableAlarmActions" ||
		aws.ToString(in.Target.RoleArn) != "arn:aws:iam::1:role/silence" ||
		aws.ToString(in.Target.Input) != `{"AlarmNames":["linegate-interactive-dlq"]}` || in.ActionAfterCompletion != "DELETE" {
		t.Fatalf("disabled %v, schedule %+v target %+v", al.disabled, in, in.Target)
	}
}

// calls records the order of the silencer's two calls.
type orderedCalls struct {
	log        []string
	disableErr error
	createErr  error
}

func (o *orderedCalls) DisableAlarmActions(_ context.Context, in *cloudwatch.DisableAlarmActionsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.DisableAlarmActionsOutput, error) {
	o.log = append(o.log, "disable "+strings.Join(in.AlarmNames, ","))
	return &cloudwatch.DisableAlarmActionsOutput{}, o.disableErr
}

func (o *orderedCalls) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	o.log = append(o.log, "schedule "+aws.ToString(in.Name))
	return &scheduler.CreateScheduleOutput{}, o.createErr
}

// The re-enabling schedule exists before anything is disabled: when it
// cannot be created nothing is muted; when the disable fails the schedule
// enables what is enabled, and the operator is told.
func TestSilenceSchedulesBeforeDisabling(t *testing.T) {
	until := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name                  string
		createErr, disableErr error
		wantLog               []string
		wantErr               string
	}{
		{"both succeed", nil, nil, []string{"schedule", "disable"}, ""},
		{"the schedule cannot be created", errors.New("ServiceQuotaExceededException"), nil, []string{"schedule"}, "nothing was silenced"},
		{"the disable fails", nil, errors.New("AccessDenied"), []string{"schedule", "disable"}, "nothing was silenced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &orderedCalls{createErr: tt.createErr, disableErr: tt.disableErr}
			s := chatops.CloudWatchSilencer{Alarms: o, Schedules: o, RoleARN: "arn:aws:iam::1:role/silence", Prefix: "lgs-x"}
			err := s.Silence(context.Background(), "linegate-webhook-errors", until)
			var verbs []string
			for _, l := range o.log {
				verbs = append(verbs, strings.Fields(l)[0])
			}
			if strings.Join(verbs, ",") != strings.Join(tt.wantLog, ",") {
				t.Fatalf("calls %v, want %v", o.log, tt.wantLog)
			}
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Every legal stack name (CloudFormation allows 128 characters) gives each
// alarm a schedule name within Scheduler's 64 characters of [0-9a-zA-Z-_.],
// unique per alarm, under the prefix the worker is granted.
func TestScheduleNamesFitEveryStackName(t *testing.T) {
	stack := "a" + strings.Repeat("b1-", 42) + "z"
	if len(stack) != 128 {
		t.Fatalf("stack name of %d characters", len(stack))
	}
	top, err := template.Load("../../template.yaml", map[string]string{"OperatorLineIds": operator}, template.WithStackName(stack))
	if err != nil {
		t.Fatal(err)
	}
	var prefix string
	for _, f := range top.Functions {
		if p, ok := f.Env["CHATOPS_SCHEDULE_PREFIX"]; ok {
			prefix = p
		}
	}
	if prefix == "" || len(prefix) > 40 {
		t.Fatalf("CHATOPS_SCHEDULE_PREFIX %q: want one of at most 40 characters", prefix)
	}
	valid := regexp.MustCompile(`^[0-9A-Za-z_.-]{1,64}$`)
	until := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	seen := map[string]string{}
	for _, a := range top.Alarms {
		if !strings.HasPrefix(a.Name, stack+"-") {
			t.Fatalf("alarm %s is not named after the stack", a.Name)
		}
		name := chatops.ScheduleName(prefix, a.Name, until)
		if !valid.MatchString(name) || !strings.HasPrefix(name, prefix+"-") {
			t.Errorf("%s: schedule name %q (%d characters)", a.Name, name, len(name))
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%s and %s share the schedule name %s", a.Name, other, name)
		}
		seen[name] = a.Name
	}
	// A prefix someone made longer still fits, and still tells stacks apart.
	long := chatops.ScheduleName(stack+"-silence", top.Alarms[0].Name, until)
	other := chatops.ScheduleName(stack[:127]+"y-silence", top.Alarms[0].Name, until)
	if len(long) > chatops.MaxScheduleName || !valid.MatchString(long) || long == other {
		t.Errorf("long prefixes: %q and %q", long, other)
	}
}

// Every alarm of the template is in the Silence grant: the worker may
// disable its actions and the silence role may enable them again (the two
// share one list, &StackAlarms).
func TestEveryAlarmIsInTheSilenceGrant(t *testing.T) {
	data, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := template.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	resources := doc["Resources"].(map[string]any)
	granted := map[string]map[string]bool{} // action -> alarm names (after "alarm:")
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if act, ok := x["Action"].(string); ok && (act == "cloudwatch:DisableAlarmActions" || act == "cloudwatch:EnableAlarmActions") {
				res, _ := x["Resource"].([]any)
				for _, r := range res {
					sub, _ := r.(map[string]any)["Fn::Sub"].(string)
					if _, name, ok := strings.Cut(sub, ":alarm:"); ok {
						if granted[act] == nil {
							granted[act] = map[string]bool{}
						}
						granted[act][name] = true
					}
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(resources)
	alarms := 0
	for id, r := range resources {
		m := r.(map[string]any)
		if m["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms++
		name, _ := m["Properties"].(map[string]any)["AlarmName"].(map[string]any)["Fn::Sub"].(string)
		for _, act := range []string{"cloudwatch:DisableAlarmActions", "cloudwatch:EnableAlarmActions"} {
			if !granted[act][name] {
				t.Errorf("alarm %s (%s) is not in the %s grant", id, name, act)
			}
		}
	}
	if alarms < 25 || len(granted) != 2 {
		t.Fatalf("%d alarms, grants %v", alarms, granted)
	}
	for act, names := range granted {
		if len(names) != alarms {
			t.Errorf("%s covers %d names for %d alarms", act, len(names), alarms)
		}
	}
}

// Operators are per channel: a tap through channel b acts for b's
// operators only, and the default channel's operator is a stranger there
// (and the other way round).
func TestOperatorsPerChannel(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	signer, _ := postback.NewSigner([]byte("a key only the stack knows"), func() time.Time { return now })
	const operatorB = "U00000000000000000000000000000b0b"
	sil := &silencer{}
	h, err := chatops.New(chatops.Config{Signer: signer, Operators: []string{operator}, ChannelOperators: map[string][]string{"b": {operatorB}},
		Once: idempotency.NewMemory(), Silencer: sil, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, channel, who string
		acts               bool
	}{
		{"the default's operator on the default channel", "", operator, true},
		{"b's operator on the default channel", "", operatorB, false},
		{"the default's operator on channel b", "b", operator, false},
		{"b's operator on channel b", "b", operatorB, true},
		{"b's operator on channel c (no operators)", "c", operatorB, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(sil.calls)
			data, _ := signer.Sign(postback.Silence, "alarm-"+tt.name, time.Hour)
			r := &replies{}
			e := postbackEvent(t, user(tt.who), data, r)
			e.Channel = tt.channel
			handled, err := h.Intercept(context.Background(), e)
			if !handled || err != nil {
				t.Fatalf("handled %v, err %v", handled, err)
			}
			if acted := len(sil.calls) > before; acted != tt.acts || (len(r.texts) == 1) != tt.acts {
				t.Fatalf("acted %v (replies %v), want %v", acted, r.texts, tt.acts)
			}
		})
	}
}
