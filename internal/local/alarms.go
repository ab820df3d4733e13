package local

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/template"
)

// CloudWatch alarm states.
const (
	StateOK           = "OK"
	StateAlarm        = "ALARM"
	StateInsufficient = "INSUFFICIENT_DATA"
)

// publisher is the one SNS call the alarm evaluator (and the worker's crash
// reports) make.
type publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// alarmEvaluator evaluates the template's alarms the way CloudWatch does, on
// the metrics the local runtime can observe: SQS queue depth and age of the
// oldest message, Lambda Errors of the local functions, API Gateway 4xx and
// 5xx (REST: 4XXError, 5XXError) of the local webhook, and every custom metric the functions
// write (EMF) or a developer puts (POST /_local/metrics: the way to drive
// Lambda Throttles or EventBridge's FailedInvocations, which nothing local
// produces). Other metrics have no local data points and follow
// TreatMissingData, as CloudWatch's documentation describes
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html):
// breaching and notBreaching count a missing point as such, ignore keeps
// the state, missing turns INSUFFICIENT_DATA when the whole range is
// missing. Alarms start in OK (as if deployed long ago), so starting
// `linegate local` does not page anybody; with --state they start in the
// state the previous run left them in, as CloudWatch keeps an alarm's state
// across redeploys, so a restart pages nobody again. On every state change
// the standard CloudWatch alarm JSON is published to the alarm's OKActions
// or AlarmActions topics, which is how the notifier (and the escalation
// email) hears about it.
type alarmEvaluator struct {
	r       *Runtime
	ops     publisher
	started time.Time
	mu      sync.Mutex
	alarms  []*alarmState
}

type alarmState struct {
	def     template.Alarm
	state   string
	reason  string
	changed time.Time
	window  []bool // the last EvaluationPeriods data points: breaching or not
	missing []bool
	// silencedUntil mutes the alarm's actions (ChatOps' Silence 1 h), as
	// DisableAlarmActions does: state changes are still tracked.
	silencedUntil time.Time
	// history is the newest state changes, oldest first (CloudWatch's alarm
	// history, for the console).
	history []alarmTransition
}

// alarmHistory is how many state changes each alarm remembers.
const alarmHistory = 20

// alarmTransition is one state change of an alarm.
type alarmTransition struct {
	From   string `json:"from"`
	To     string `json:"to"`
	At     string `json:"at"`
	Reason string `json:"reason"`
}

// bucketAlarms holds each alarm's state in the state directory.
const bucketAlarms = "local.alarms"

// savedAlarm is an alarm's state as the journal keeps it.
type savedAlarm struct {
	State   string            `json:"state"`
	Reason  string            `json:"reason"`
	Changed time.Time         `json:"changed"`
	History []alarmTransition `json:"history"`
}

func newAlarmEvaluator(r *Runtime) (*alarmEvaluator, error) {
	e := &alarmEvaluator{r: r, ops: r.ports.ops, started: time.Now()}
	saved := map[string]savedAlarm{}
	if r.state != nil {
		if err := localstate.EachJSON(r.state, bucketAlarms, func(k string, v savedAlarm) { saved[k] = v }); err != nil {
			return nil, fmt.Errorf("--state: restore the alarms: %w", err)
		}
	}
	var names []string
	var keep time.Duration
	for _, a := range r.top.Alarms {
		names = append(names, a.MetricName)
		keep = max(keep, 2*scaled(max(a.Period, time.Minute), r.cfg.TimeScale)+time.Minute)
	}
	r.metrics.watch(names, keep)
	for _, a := range r.top.Alarms {
		st := &alarmState{def: a, state: StateOK, reason: "Local runtime started", changed: time.Now()}
		if v, ok := saved[a.Name]; ok && v.State != "" {
			st.state, st.reason, st.changed, st.history = v.State, v.Reason, v.Changed, v.History
		}
		e.alarms = append(e.alarms, st)
	}
	return e, nil
}

// save journals an alarm's state (nothing without --state).
func (e *alarmEvaluator) save(a *alarmState) {
	if e.r.state == nil {
		return
	}
	b, err := json.Marshal(savedAlarm{State: a.state, Reason: a.reason, Changed: a.changed, History: a.history})
	if err != nil {
		return
	}
	e.r.state.Append(localstate.Change{Bucket: bucketAlarms, Key: a.def.Name, Value: b})
}

// period is how often data points are taken: the shortest alarm period,
// compressed by the time scale.
func (e *alarmEvaluator) period() time.Duration {
	p := time.Minute
	for _, a := range e.alarms {
		if a.def.Period > 0 && a.def.Period < p {
			p = a.def.Period
		}
	}
	return max(scaled(p, e.r.cfg.TimeScale), 50*time.Millisecond)
}

func (e *alarmEvaluator) run(ctx context.Context) {
	if len(e.alarms) == 0 {
		return
	}
	every(ctx, e.period(), e.evaluate)
}

// every calls f each period until ctx ends.
func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// evaluate takes one data point per alarm and applies state changes.
func (e *alarmEvaluator) evaluate(ctx context.Context) {
	snap := e.r.counters.take()
	e.mu.Lock()
	var changes []alarmChange
	for _, a := range e.alarms {
		value, ok := e.datapoint(ctx, a.def, snap)
		breach := ok && compare(a.def.ComparisonOperator, value, a.def.Threshold)
		n := max(1, a.def.EvaluationPeriods)
		a.window = append(a.window, breach)
		a.missing = append(a.missing, !ok)
		if len(a.window) > n {
			a.window, a.missing = a.window[len(a.window)-n:], a.missing[len(a.missing)-n:]
		}
		next, reason := a.decide(value, ok)
		if next != a.state {
			changes = append(changes, alarmChange{def: a.def, old: a.state, new: next, reason: reason, at: time.Now()})
			a.state, a.reason, a.changed = next, reason, time.Now()
			a.history = append(a.history, alarmTransition{From: changes[len(changes)-1].old, To: next, At: a.changed.UTC().Format(time.RFC3339Nano), Reason: reason})
			if len(a.history) > alarmHistory {
				a.history = a.history[len(a.history)-alarmHistory:]
			}
			e.save(a)
		}
	}
	e.mu.Unlock()
	for _, c := range changes {
		e.notify(ctx, c)
	}
}

// decide applies DatapointsToAlarm of EvaluationPeriods and TreatMissingData.
func (a *alarmState) decide(value float64, ok bool) (string, string) {
	need := a.def.DatapointsToAlarm
	if need <= 0 {
		need = max(1, a.def.EvaluationPeriods)
	}
	breaching, missing := 0, 0
	for i, b := range a.window {
		switch {
		case a.missing[i]:
			missing++
			if a.def.TreatMissingData == "breaching" {
				breaching++
			}
		case b:
			breaching++
		}
	}
	if missing == len(a.window) && (a.def.TreatMissingData == "missing" || a.def.TreatMissingData == "") {
		return StateInsufficient, "Insufficient Data: no datapoints were received"
	}
	if missing == len(a.window) && a.def.TreatMissingData == "ignore" {
		return a.state, a.reason
	}
	if breaching >= need {
		return StateAlarm, fmt.Sprintf("Threshold Crossed: %d out of the last %d datapoints [%s] was %s the threshold (%s).",
			breaching, len(a.window), formatValue(value), opWords(a.def.ComparisonOperator), formatValue(a.def.Threshold))
	}
	return StateOK, fmt.Sprintf("Threshold Crossed: %d out of the last %d datapoints [%s] was not %s the threshold (%s).",
		breaching, len(a.window), formatValue(value), opWords(a.def.ComparisonOperator), formatValue(a.def.Threshold))
}

// datapoint reads the alarm's metric; ok is false when there is no data.
// Data points in the metric store (EMF, or put at /_local/metrics) come
// first: they are how an alarm whose metric the local runtime also
// measures is driven by hand.
func (e *alarmEvaluator) datapoint(ctx context.Context, a template.Alarm, snap counterSnapshot) (float64, bool) {
	if v, ok := e.r.metrics.stat(a.Namespace, a.MetricName, a.Dimensions, a.Statistic, e.window(a), time.Now()); ok {
		return v, true
	}
	switch a.Namespace + "/" + a.MetricName {
	case "AWS/SQS/ApproximateNumberOfMessagesVisible", "AWS/SQS/ApproximateAgeOfOldestMessage":
		q, ok := e.r.queueByName(a.Dimensions["QueueName"])
		if !ok {
			return 0, false
		}
		st, err := e.r.back.stats(ctx, e.r.res.queueURL[q.LogicalID])
		if err != nil {
			return 0, false
		}
		if a.MetricName == "ApproximateAgeOfOldestMessage" {
			// SQS reports the age only while the queue holds a message.
			if st.Visible+st.InFlight == 0 {
				return 0, false
			}
			if e.r.isDLQ(q) {
				// A dead letter's retention runs in cloud time (compressed
				// like every period), so its age is compared in cloud time
				// with the threshold that warns before its deletion.
				return st.OldestAge.Seconds() * e.r.cfg.TimeScale, true
			}
			return st.OldestAge.Seconds(), true
		}
		return float64(st.Visible), true
	case "AWS/Lambda/Errors":
		n, ok := snap.errors[a.Dimensions["FunctionName"]]
		return float64(n), ok || snap.invoked[a.Dimensions["FunctionName"]] > 0
	case "AWS/ApiGateway/5XXError", "AWS/ApiGateway/5xx": // REST, HTTP API
		return float64(snap.api5xx), snap.apiCalls > 0
	case "AWS/ApiGateway/4XXError", "AWS/ApiGateway/4xx":
		return float64(snap.api4xx), snap.apiCalls > 0
	}
	return 0, false
}

// window is the span one of the alarm's data points covers: its period,
// compressed by the time scale, and one evaluation more, so that a point
// put just after an evaluation is not missed by the next (the evaluations
// are not aligned on the periods as CloudWatch's are; a point may count in
// two consecutive evaluations instead).
func (e *alarmEvaluator) window(a template.Alarm) time.Duration {
	return scaled(max(a.Period, time.Minute), e.r.cfg.TimeScale) + e.period()
}

type alarmChange struct {
	def      template.Alarm
	old, new string
	reason   string
	at       time.Time
}

// notify publishes the standard CloudWatch alarm notification to the topics
// of the new state's actions.
func (e *alarmEvaluator) notify(ctx context.Context, c alarmChange) {
	e.r.out.alarm(c.def.Name, c.old, c.new)
	if e.silenced(c.def.Name) {
		e.r.out.line("alarm     %s is silenced: no notification", c.def.Name)
		return
	}
	var topics []string
	switch c.new {
	case StateAlarm:
		topics = c.def.AlarmActions
	case StateOK:
		topics = c.def.OKActions
	}
	if len(topics) == 0 {
		return
	}
	body, err := json.Marshal(e.payload(c))
	if err != nil {
		return
	}
	for _, logical := range topics {
		arn := e.r.res.topicARN[logical]
		if arn == "" {
			continue
		}
		subject := fmt.Sprintf("%s: %q in %s", c.new, c.def.Name, e.r.top.Region)
		if len(subject) > 100 {
			subject = subject[:100]
		}
		if _, err := e.ops.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(arn), Subject: aws.String(subject), Message: aws.String(string(body))}); err != nil {
			e.r.log.Warn("alarm notification not published", "alarm", c.def.Name, "error", err.Error())
		}
	}
}

// alarmMessage is the JSON CloudWatch sends to SNS for an alarm state
// change: aws-lambda-go's payload plus the action lists the real message has.
type alarmMessage struct {
	events.CloudWatchAlarmSNSPayload
	AlarmConfigurationUpdatedTimestamp string   `json:"AlarmConfigurationUpdatedTimestamp"`
	OKActions                          []string `json:"OKActions"`
	AlarmActions                       []string `json:"AlarmActions"`
	InsufficientDataActions            []string `json:"InsufficientDataActions"`
}

// cloudWatchTime is the timestamp format of CloudWatch alarm messages.
const cloudWatchTime = "2006-01-02T15:04:05.000-0700"

// payload is the JSON CloudWatch sends to SNS for an alarm state change.
func (e *alarmEvaluator) payload(c alarmChange) alarmMessage {
	top := e.r.top
	arns := func(ids []string) []string {
		out := []string{}
		for _, id := range ids {
			if a := e.r.res.topicARN[id]; a != "" {
				out = append(out, a)
			}
		}
		return out
	}
	var dims []events.CloudWatchDimension
	keys := make([]string, 0, len(c.def.Dimensions))
	for k := range c.def.Dimensions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dims = append(dims, events.CloudWatchDimension{Name: k, Value: c.def.Dimensions[k]})
	}
	return alarmMessage{
		AlarmConfigurationUpdatedTimestamp: e.started.UTC().Format(cloudWatchTime),
		AlarmActions:                       arns(c.def.AlarmActions),
		OKActions:                          arns(c.def.OKActions),
		InsufficientDataActions:            []string{},
		CloudWatchAlarmSNSPayload: events.CloudWatchAlarmSNSPayload{
			AlarmName:       c.def.Name,
			AWSAccountID:    top.AccountID,
			NewStateValue:   c.new,
			NewStateReason:  c.reason,
			StateChangeTime: c.at.UTC().Format(cloudWatchTime),
			Region:          regionName(top.Region),
			AlarmARN:        fmt.Sprintf("arn:aws:cloudwatch:%s:%s:alarm:%s", top.Region, top.AccountID, c.def.Name),
			OldStateValue:   c.old,
			Trigger: events.CloudWatchAlarmTrigger{
				Period: int64(c.def.Period / time.Second), EvaluationPeriods: int64(max(1, c.def.EvaluationPeriods)),
				ComparisonOperator: c.def.ComparisonOperator, Threshold: c.def.Threshold, TreatMissingData: c.def.TreatMissingData,
				MetricName: c.def.MetricName, Namespace: c.def.Namespace, StatisticType: "Statistic",
				Statistic: strings.ToUpper(c.def.Statistic), Dimensions: dims,
			},
		}}
}

// alarmView is one alarm for /_local/alarms.
type alarmView struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Since  string `json:"since"`
	// Silenced is true while ChatOps' Silence 1 h mutes the alarm's actions.
	Silenced bool `json:"silenced,omitempty"`
	// History is the alarm's newest state changes, oldest first.
	History []alarmTransition `json:"history"`
}

func (e *alarmEvaluator) views() []alarmView {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]alarmView, 0, len(e.alarms))
	for _, a := range e.alarms {
		out = append(out, alarmView{Name: a.def.Name, State: a.state, Reason: a.reason, Since: a.changed.UTC().Format(time.RFC3339Nano),
			Silenced: time.Now().Before(a.silencedUntil), History: append([]alarmTransition{}, a.history...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func compare(op string, v, t float64) bool {
	switch op {
	case "GreaterThanOrEqualToThreshold":
		return v >= t
	case "GreaterThanThreshold":
		return v > t
	case "LessThanThreshold":
		return v < t
	case "LessThanOrEqualToThreshold":
		return v <= t
	}
	return false
}

func opWords(op string) string {
	switch op {
	case "GreaterThanOrEqualToThreshold":
		return "greater than or equal to"
	case "GreaterThanThreshold":
		return "greater than"
	case "LessThanThreshold":
		return "less than"
	case "LessThanOrEqualToThreshold":
		return "less than or equal to"
	}
	return op
}

func formatValue(v float64) string { return fmt.Sprintf("%.1f", v) }

// regionName is the long region name CloudWatch puts in alarm messages.
func regionName(r string) string {
	names := map[string]string{
		"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)",
		"ap-northeast-1": "Asia Pacific (Tokyo)", "eu-west-1": "EU (Ireland)",
	}
	if n, ok := names[r]; ok {
		return n
	}
	return r
}
