package alert

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/telemetry"
)

// Header colours by alarm state.
const (
	colorAlarm        = "#D93025"
	colorOK           = "#1E8E3E"
	colorInsufficient = "#80868B"
	colorCrash        = colorAlarm
	colorHeld         = "#E37400"
	colorLabel        = "#80868B"
	colorValue        = "#202124"
)

// card is what an operator needs to know about one ops message, before it is
// laid out as a Flex bubble or as plain text.
type card struct {
	badge     string  // "ALARM", "OK", "INSUFFICIENT_DATA", "CRASH"
	color     string  // header background
	title     string  // alarm name or crashed function
	headline  string  // "OK → ALARM" or the panic error
	detail    string  // the alarm reason
	rows      []field // what and where and when
	stack     []string
	linkLabel string
	link      string
	buttons   []button // signed postback actions (ChatOps)
	alt       string
}

type field struct{ label, value string }

// button is a postback action on a card: what the operator taps, and the
// data the stack signed for it.
type button struct{ label, data string }

// render lays one group of ops messages out as a Flex message, or as a text
// message when the Flex JSON would exceed the size limit (fallback reports
// that).
func (n *Notifier) render(g *group) (msg messaging_api.MessageInterface, fallback bool) {
	m := g.msg
	var c card
	switch {
	case m.alarm != nil:
		c = n.alarmCard(m)
	case m.held != nil:
		c = n.heldCard(m)
	case m.deadLetter != nil:
		c = n.deadLetterCard(m)
	case m.unannounced != nil:
		c = n.unannouncedCard(m)
	default:
		c = n.crashCard(m)
	}
	if g.digest {
		c.alt = truncateUTF16(oneLine(fmt.Sprintf("[%s] %s: Still happening: %s", c.badge, c.title, c.headline)), MaxAltText)
		c.headline = truncateUTF16("Still happening: "+c.headline, maxError)
	}
	return n.lay(n.withCount(c, g))
}

// lay renders a card as Flex, or as text when the Flex JSON would exceed
// the size limit (fallback reports that).
func (n *Notifier) lay(c card) (msg messaging_api.MessageInterface, fallback bool) {
	fm := flexMessage(c)
	if b, err := json.Marshal(fm); err == nil && len(b) <= n.flexLimit {
		return fm, false
	}
	return textMessage(c), true
}

func (n *Notifier) alarmCard(m opsMessage) card {
	a := m.alarm
	state := strings.ToUpper(strings.TrimSpace(a.NewStateValue))
	c := card{
		badge: truncateUTF16(oneLine(state), 40),
		color: stateColor(state),
		title: truncateUTF16(oneLine(a.AlarmName), maxTitle),
	}
	change := state
	if old := strings.TrimSpace(a.OldStateValue); old != "" {
		change = strings.ToUpper(old) + " → " + state
	}
	c.headline = truncateUTF16(oneLine(change), 100)
	c.detail = truncateUTF16(strings.TrimSpace(a.NewStateReason), maxReason)
	c.rows = append(c.rows, dimensionRows(a.Trigger)...)
	if metric := metricName(a.Trigger); metric != "" {
		c.rows = append(c.rows, field{"Metric", truncateUTF16(metric, maxValue)})
	}
	if !m.when.IsZero() {
		c.rows = append(c.rows, field{"Time", n.formatTime(m.when)})
	}
	if d := strings.TrimSpace(a.AlarmDescription); d != "" {
		c.rows = append(c.rows, field{"About", truncateUTF16(d, maxDescription)})
	}
	if region := n.regionFor(m); region != "" {
		c.link = alarmURL(region, a.AlarmName)
		c.linkLabel = "Open alarm"
	}
	if state == "ALARM" {
		if q := dimension(a.Trigger, "QueueName"); q != "" && slices.Contains(n.dlqs, q) {
			c.buttons = n.sign(c.buttons, "Redrive", postback.Redrive, q)
		}
		c.buttons = n.sign(c.buttons, "Silence 1 h", postback.Silence, a.AlarmName)
		c.buttons = n.sign(c.buttons, "Acknowledge", postback.Ack, a.AlarmName)
	}
	c.alt = truncateUTF16(oneLine(fmt.Sprintf("[%s] %s: %s", state, a.AlarmName, change)), MaxAltText)
	return c
}

// heldCard tells the operator that pushed results are held for the monthly
// limit, with the button that sends them once quota returns.
func (n *Notifier) heldCard(m opsMessage) card {
	c := card{
		badge:    "HELD",
		color:    colorHeld,
		title:    "Results held: monthly limit",
		headline: "LINE refused a push: the month's message quota is spent.",
		detail:   truncateUTF16(strings.TrimSpace(m.held.text), maxReason),
		alt:      "[HELD] LINE's monthly message limit is reached; pushed results are held",
	}
	if !m.when.IsZero() {
		c.rows = append(c.rows, field{"Time", n.formatTime(m.when)})
	}
	c.buttons = n.sign(c.buttons, "Resend held", postback.ResendHeld, "held")
	return c
}

// deadLetterCard says which event went to which DLQ and why, with Redrive
// (when the notifier may offer it for that queue) and Acknowledge.
func (n *Notifier) deadLetterCard(m opsMessage) card {
	d := m.deadLetter
	c := card{
		badge:    "DEAD LETTER",
		color:    colorAlarm,
		title:    truncateUTF16(oneLine(d.Queue), maxTitle),
		headline: truncateUTF16(strings.TrimSpace(orText(d.Error, "failed: "+d.Reason)), maxError),
		detail:   truncateUTF16(reasonText(d.Reason), maxReason),
	}
	add := func(label, value string) {
		if v := strings.TrimSpace(value); v != "" {
			c.rows = append(c.rows, field{label, truncateUTF16(oneLine(v), maxValue)})
		}
	}
	add("Event", d.EventType)
	add("Event ID", d.WebhookEventID)
	add("Reason", d.Reason)
	add("From", d.Source)
	if d.ReceiveCount > 0 {
		add("Receives", strconv.Itoa(d.ReceiveCount))
	}
	add("Time", n.formatTime(m.when))
	for _, f := range d.Frames {
		if len(c.stack) == maxFrames*2 {
			break
		}
		fn, loc, _ := strings.Cut(f, " ")
		c.stack = append(c.stack, truncateUTF16(fn, maxFrameLine), "  "+truncateUTF16(loc, maxFrameLine))
	}
	c.buttons = n.dlqButtons(c.buttons, d.Queue)
	c.alt = truncateUTF16(oneLine(fmt.Sprintf("[DEAD LETTER] %s: %s", d.Queue, c.headline)), MaxAltText)
	return c
}

// unannouncedCard tells of messages the sweep found in a DLQ that no
// worker announced.
func (n *Notifier) unannouncedCard(m opsMessage) card {
	u := m.unannounced
	c := card{
		badge:    "DEAD LETTER",
		color:    colorAlarm,
		title:    truncateUTF16(oneLine(u.Queue), maxTitle),
		headline: fmt.Sprintf("%d message(s) reached the DLQ with no notice from the worker (it holds %d).", u.Count, u.Depth),
		detail: "SQS moved them after the queue's maxReceiveCount receives (an invocation that crashed or timed out on its " +
			"last receive), or EventBridge could not deliver them to their work queue. Find them in the logs by " +
			"webhookEventId; fix, deploy, then redrive.",
	}
	c.rows = append(c.rows, field{"Time", n.formatTime(m.when)})
	c.buttons = n.dlqButtons(c.buttons, u.Queue)
	c.alt = truncateUTF16(oneLine(fmt.Sprintf("[DEAD LETTER] %s: %s", u.Queue, c.headline)), MaxAltText)
	return c
}

// dlqButtons adds Redrive (when the stack lets the notifier offer it for
// queue) and Acknowledge.
func (n *Notifier) dlqButtons(bs []button, queue string) []button {
	if slices.Contains(n.dlqs, queue) {
		bs = n.sign(bs, "Redrive", postback.Redrive, queue)
	}
	return n.sign(bs, "Acknowledge", postback.Ack, queue)
}

// reasonText explains a dead-letter reason to the operator.
func reasonText(reason string) string {
	switch reason {
	case "permanent":
		return "The handler failed for good (bot.Permanent, or LINE refused the request as invalid): it was not retried."
	case "malformed":
		return "The record could not be decoded: retrying could never help."
	case "retries-exhausted":
		return "The handler failed on every receive the queue allows."
	}
	return ""
}

func orText(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// sign adds a button whose data the stack signed; without a signer (no
// CHATOPS_KEY) or when the data would not fit, the card goes without it.
func (n *Notifier) sign(bs []button, label, action, target string) []button {
	if n.signer == nil {
		return bs
	}
	data, err := n.signer.Sign(action, target, n.buttonTTL)
	if err != nil {
		return bs
	}
	return append(bs, button{label: truncateRunes(label, MaxLabel), data: data})
}

// dimension returns the value of the alarm metric's dimension name.
func dimension(t events.CloudWatchAlarmTrigger, name string) string {
	for _, d := range t.Dimensions {
		if d.Name == name {
			return d.Value
		}
	}
	return ""
}

func (n *Notifier) crashCard(m opsMessage) card {
	r := m.crash
	title := r.Function
	if strings.TrimSpace(title) == "" {
		title = "panic"
	}
	c := card{
		badge:    "CRASH",
		color:    colorCrash,
		title:    truncateUTF16(oneLine(title), maxTitle),
		headline: truncateUTF16(strings.TrimSpace(r.Error), maxError),
	}
	add := func(label, value string) {
		if v := strings.TrimSpace(value); v != "" {
			c.rows = append(c.rows, field{label, truncateUTF16(oneLine(v), maxValue)})
		}
	}
	add("Event", r.EventType)
	add("Event ID", r.WebhookEventID)
	add("Channel", r.Channel) // a named channel's; none for the default channel
	add("Function", r.Function)
	if r.ReceiveCount > 0 {
		add("Receives", strconv.Itoa(r.ReceiveCount))
	}
	add("Time", n.formatTime(m.when))
	c.stack = stackLines(r.Stack)
	if trace := strings.TrimSpace(r.TraceID); telemetry.IsTraceID(trace) {
		if region := n.regionFor(m); region != "" {
			if u := traceURL(region, trace); len(u) <= MaxURI {
				c.link = u
				c.linkLabel = "Open trace"
			}
		}
	}
	c.alt = truncateUTF16(oneLine(fmt.Sprintf("[CRASH] %s: %s", title, r.Error)), MaxAltText)
	return c
}

// stackLines gives the first frames of a Go stack, two lines per frame; a
// text that is not a Go stack shows its first lines.
func stackLines(stack string) []string {
	var out []string
	if frames := crash.TopFrames(stack, maxFrames); len(frames) > 0 {
		for _, f := range frames {
			out = append(out, truncateUTF16(f.Func, maxFrameLine), "  "+truncateUTF16(f.Loc, maxFrameLine))
		}
		return out
	}
	for _, l := range strings.Split(stack, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, truncateUTF16(l, maxFrameLine))
		}
		if len(out) == maxFrames {
			break
		}
	}
	return out
}

func (n *Notifier) formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(n.loc).Format("2006-01-02 15:04:05 MST")
}

// regionFor picks the region of console links: the configured one, else the
// alarm ARN's or the crash report's, else the topic ARN's.
func (n *Notifier) regionFor(m opsMessage) string {
	for _, r := range []string{n.region, m.region, m.topicReg} {
		if regionRE.MatchString(r) {
			return r
		}
	}
	return ""
}

func stateColor(state string) string {
	switch state {
	case "ALARM":
		return colorAlarm
	case "OK":
		return colorOK
	default:
		return colorInsufficient
	}
}

// dimensionLabels names the resources linegate's alarms watch.
var dimensionLabels = map[string]string{
	"QueueName":    "Queue",
	"FunctionName": "Function",
	"ApiName":      "API",
	"EventBusName": "Event bus",
	"RuleName":     "Rule",
	"TopicName":    "Topic",
	"TableName":    "Table",
}

// dimensionRows lists the alarm's dimensions (of the metric, or of every
// metric of a metric-math alarm), each once.
func dimensionRows(t events.CloudWatchAlarmTrigger) []field {
	dims := append([]events.CloudWatchDimension(nil), t.Dimensions...)
	for _, q := range t.Metrics {
		dims = append(dims, q.MetricStat.Metric.Dimensions...)
	}
	var rows []field
	seen := map[events.CloudWatchDimension]bool{}
	for _, d := range dims {
		if seen[d] || strings.TrimSpace(d.Value) == "" || len(rows) == maxDimensions {
			continue
		}
		seen[d] = true
		label, ok := dimensionLabels[d.Name]
		if !ok {
			label = truncateUTF16(oneLine(d.Name), 30)
		}
		rows = append(rows, field{label, truncateUTF16(oneLine(d.Value), maxValue)})
	}
	return rows
}

// metricName is "Namespace MetricName" of the alarm's metric (the first
// named metric of a metric-math alarm).
func metricName(t events.CloudWatchAlarmTrigger) string {
	ns, name := t.Namespace, t.MetricName
	if name == "" {
		for _, q := range t.Metrics {
			if q.MetricStat.Metric.MetricName != "" {
				ns, name = q.MetricStat.Metric.Namespace, q.MetricStat.Metric.MetricName
				break
			}
		}
	}
	return oneLine(strings.TrimSpace(ns + " " + name))
}

// alarmURL links the alarm in the CloudWatch console; for a name so long that
// the link would pass LINE's URI limit, it links the alarm list instead.
func alarmURL(region, name string) string {
	base := consoleBase(region) + "#alarmsV2:"
	if u := base + "alarm/" + escapeComponent(name); len(u) <= MaxURI {
		return u
	}
	return base
}

// traceURL links an X-Ray trace in the CloudWatch console.
func traceURL(region, traceID string) string {
	return consoleBase(region) + "#xray:traces/" + escapeComponent(traceID)
}

// consoleBase is the CloudWatch console of region, in its partition: China
// (cn-*) and GovCloud (us-gov-*) regions have consoles of their own, with no
// region in the host name.
func consoleBase(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "https://console.amazonaws.cn/cloudwatch/home?region=" + region
	case strings.HasPrefix(region, "us-gov-"):
		return "https://console.amazonaws-us-gov.com/cloudwatch/home?region=" + region
	}
	return "https://" + region + ".console.aws.amazon.com/cloudwatch/home?region=" + region
}

// escapeComponent escapes like JavaScript's encodeURIComponent, which is what
// the console expects in its fragment (spaces as %20, not "+").
func escapeComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// flexMessage lays a card out as a Flex bubble.
func flexMessage(c card) *messaging_api.FlexMessage {
	header := &messaging_api.FlexBox{
		Layout:          messaging_api.FlexBoxLAYOUT_VERTICAL,
		BackgroundColor: c.color,
		Spacing:         "xs",
		Contents: []messaging_api.FlexComponentInterface{
			&messaging_api.FlexText{Text: c.badge, Size: "xs", Weight: messaging_api.FlexTextWEIGHT_BOLD, Color: "#FFFFFF"},
			&messaging_api.FlexText{Text: orDash(c.title), Size: "lg", Weight: messaging_api.FlexTextWEIGHT_BOLD, Color: "#FFFFFF", Wrap: true},
		},
	}
	body := []messaging_api.FlexComponentInterface{
		&messaging_api.FlexText{Text: orDash(c.headline), Size: "md", Weight: messaging_api.FlexTextWEIGHT_BOLD, Color: colorValue, Wrap: true},
	}
	if c.detail != "" {
		body = append(body, &messaging_api.FlexText{Text: c.detail, Size: "sm", Color: colorValue, Wrap: true})
	}
	if len(c.rows) > 0 {
		body = append(body, &messaging_api.FlexSeparator{Margin: "md"})
		for _, r := range c.rows {
			body = append(body, &messaging_api.FlexBox{
				Layout:  messaging_api.FlexBoxLAYOUT_BASELINE,
				Spacing: "sm",
				Contents: []messaging_api.FlexComponentInterface{
					&messaging_api.FlexText{Text: orDash(r.label), Flex: 2, Size: "xs", Color: colorLabel},
					&messaging_api.FlexText{Text: orDash(r.value), Flex: 5, Size: "xs", Color: colorValue, Wrap: true},
				},
			})
		}
	}
	if len(c.stack) > 0 {
		body = append(body,
			&messaging_api.FlexSeparator{Margin: "md"},
			&messaging_api.FlexText{Text: "Stack", Size: "xs", Weight: messaging_api.FlexTextWEIGHT_BOLD, Color: colorLabel},
			&messaging_api.FlexText{Text: strings.Join(c.stack, "\n"), Size: "xxs", Color: colorValue, Wrap: true},
		)
	}
	bubble := &messaging_api.FlexBubble{
		Header: header,
		Body:   &messaging_api.FlexBox{Layout: messaging_api.FlexBoxLAYOUT_VERTICAL, Spacing: "sm", Contents: body},
	}
	var footer []messaging_api.FlexComponentInterface
	for _, b := range c.buttons {
		footer = append(footer, &messaging_api.FlexButton{
			Style:  messaging_api.FlexButtonSTYLE_SECONDARY,
			Height: messaging_api.FlexButtonHEIGHT_SM,
			Action: &messaging_api.PostbackAction{Label: b.label, Data: b.data, DisplayText: b.label},
		})
	}
	if c.link != "" {
		footer = append(footer, &messaging_api.FlexButton{
			Style:  messaging_api.FlexButtonSTYLE_LINK,
			Height: messaging_api.FlexButtonHEIGHT_SM,
			Action: &messaging_api.UriAction{Label: truncateRunes(c.linkLabel, MaxLabel), Uri: c.link},
		})
	}
	if len(footer) > 0 {
		bubble.Footer = &messaging_api.FlexBox{Layout: messaging_api.FlexBoxLAYOUT_VERTICAL, Contents: footer}
		if len(c.buttons) > 0 {
			bubble.Footer.Spacing = "sm"
		}
	}
	return &messaging_api.FlexMessage{
		Message:  messaging_api.Message{Type: "flex"},
		AltText:  orDash(c.alt),
		Contents: bubble,
	}
}

// textMessage lays a card out as plain text: the fallback when the Flex
// message would be too large. The stack comes last so that truncation eats
// it first.
func textMessage(c card) *messaging_api.TextMessage {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s\n%s\n", c.badge, c.title, c.headline)
	for _, r := range c.rows {
		fmt.Fprintf(&b, "%s: %s\n", r.label, r.value)
	}
	if c.link != "" {
		fmt.Fprintf(&b, "%s: %s\n", c.linkLabel, c.link)
	}
	if c.detail != "" {
		fmt.Fprintf(&b, "\n%s\n", c.detail)
	}
	if len(c.stack) > 0 {
		fmt.Fprintf(&b, "\nStack:\n%s\n", strings.Join(c.stack, "\n"))
	}
	return &messaging_api.TextMessage{
		Message: messaging_api.Message{Type: "text"},
		Text:    truncateUTF16(strings.TrimSpace(b.String()), MaxTextMessage),
	}
}

// orDash keeps a required Flex text non-empty.
func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
