package alert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/crash"
)

// errMalformed marks an SNS record that is neither a CloudWatch alarm nor a
// crash report. Handle skips such records.
var errMalformed = errors.New("malformed ops message")

// regionRE matches AWS region names ("ap-northeast-1", "us-gov-west-1"). A
// region goes into a console host name, so anything else is refused.
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// stateChangeLayout is CloudWatch's StateChangeTime ("2017-01-12T16:30:42.236+0000").
const stateChangeLayout = "2006-01-02T15:04:05.000-0700"

// opsMessage is one readable SNS record (or a finding of the notifier's
// own sweep): exactly one of alarm, crash, deadLetter, held and
// unannounced is set.
type opsMessage struct {
	id          string // SNS MessageId, or a hash of the body when there is none
	alarm       *events.CloudWatchAlarmSNSPayload
	crash       *crash.Report
	deadLetter  *crash.DeadLetter
	held        *heldNotice
	unannounced *unannounced
	when        time.Time // state change, crash or dead-letter time
	region      string    // from the alarm ARN or the crash report; may be empty
	topicReg    string    // from the topic ARN; may be empty
}

// heldNotice is the worker's notice that results are held (pkg/held).
type heldNotice struct{ text string }

// unannounced is what the sweep found in a DLQ without a dead-letter
// notice: messages SQS moved there after maxReceiveCount receives (an
// invocation that crashed or timed out on its last receive) or that
// EventBridge could not deliver to their queue.
type unannounced struct {
	Queue string `json:"queue"`
	Count int    `json:"count"`
	Depth int    `json:"depth"`
}

func (m opsMessage) kind() string {
	switch {
	case m.alarm != nil:
		return "alarm"
	case m.held != nil:
		return "held"
	case m.deadLetter != nil:
		return "dead-letter"
	case m.unannounced != nil:
		return "unannounced"
	}
	return "crash"
}

// parseRecord decides the kind of a record by its linegate-kind attribute
// (crash report) and otherwise reads it as a CloudWatch alarm notification.
// Every error wraps errMalformed.
func parseRecord(rec events.SNSEventRecord) (opsMessage, error) {
	m := opsMessage{id: rec.SNS.MessageID, topicReg: arnRegion(rec.SNS.TopicArn)}
	if m.id == "" {
		sum := sha256.Sum256([]byte(rec.SNS.Message))
		m.id = "sha256:" + hex.EncodeToString(sum[:])
	}
	kind, tagged := attribute(rec.SNS.MessageAttributes, crash.AttributeKind)
	switch {
	case tagged && kind == crash.KindCrash:
		r, err := crash.Parse([]byte(rec.SNS.Message))
		if err != nil {
			return opsMessage{}, fmt.Errorf("%w: %w", errMalformed, err)
		}
		// Scrub again: the report may come from an older or foreign worker.
		r.Error = crash.Scrub(r.Error)
		r.Stack = crash.Scrub(r.Stack)
		m.crash = &r
		m.when = r.Time
		m.region = r.Region
		return m, nil
	case tagged && kind == crash.KindDeadLetter:
		d, err := crash.ParseDeadLetter([]byte(rec.SNS.Message))
		if err != nil {
			return opsMessage{}, fmt.Errorf("%w: %w", errMalformed, err)
		}
		d.Error = crash.Scrub(d.Error) // the notice may come from an older or foreign worker
		m.deadLetter = &d
		m.when = d.Time
		m.region = d.Region
		return m, nil
	case tagged && kind == KindHeld:
		m.held = &heldNotice{text: rec.SNS.Message}
		m.when = rec.SNS.Timestamp
		return m, nil
	case tagged:
		return opsMessage{}, fmt.Errorf("%w: unknown %s %q", errMalformed, crash.AttributeKind, truncateRunes(kind, 40))
	}
	a, err := parseAlarm(rec.SNS.Message)
	if err != nil {
		return opsMessage{}, err
	}
	m.alarm = &a
	m.region = arnRegion(a.AlarmARN)
	m.when = rec.SNS.Timestamp
	if t, err := time.Parse(stateChangeLayout, a.StateChangeTime); err == nil {
		m.when = t
	} else if t, err := time.Parse(time.RFC3339Nano, a.StateChangeTime); err == nil {
		m.when = t
	}
	return m, nil
}

// parseAlarm reads the standard CloudWatch alarm notification JSON. The alarm
// name and the new state are required.
func parseAlarm(body string) (events.CloudWatchAlarmSNSPayload, error) {
	var a events.CloudWatchAlarmSNSPayload
	trimmed := strings.TrimSpace(body)
	if !strings.HasPrefix(trimmed, "{") {
		return a, fmt.Errorf("%w: message is not a JSON object (and has no %s attribute)", errMalformed, crash.AttributeKind)
	}
	if err := json.Unmarshal([]byte(trimmed), &a); err != nil {
		return a, fmt.Errorf("%w: CloudWatch alarm JSON: %v", errMalformed, err)
	}
	var missing []string
	if strings.TrimSpace(a.AlarmName) == "" {
		missing = append(missing, "AlarmName")
	}
	if strings.TrimSpace(a.NewStateValue) == "" {
		missing = append(missing, "NewStateValue")
	}
	if len(missing) > 0 {
		return a, fmt.Errorf("%w: not a CloudWatch alarm: missing %s", errMalformed, strings.Join(missing, ", "))
	}
	return a, nil
}

// attribute returns a String message attribute as Lambda delivers it
// ({"Type": "String", "Value": "..."}); a bare string value is accepted too.
func attribute(attrs map[string]any, name string) (string, bool) {
	v, ok := attrs[name]
	if !ok {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case map[string]any:
		s, _ := v["Value"].(string)
		return s, true
	}
	return "", true
}

// arnRegion returns the region field of an ARN
// ("arn:aws:cloudwatch:ap-northeast-1:123456789012:alarm:x"), or "" when it
// is not a region name.
func arnRegion(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 5 || parts[0] != "arn" || !regionRE.MatchString(parts[3]) {
		return ""
	}
	return parts[3]
}

// notification is the JSON body SNS delivers to an SQS subscription when raw
// message delivery is off: the envelope the ops queue keeps.
type notification struct {
	Type              string                       `json:"Type"`
	MessageID         string                       `json:"MessageId"`
	TopicArn          string                       `json:"TopicArn"`
	Subject           string                       `json:"Subject"`
	Message           *string                      `json:"Message"`
	Timestamp         string                       `json:"Timestamp"`
	MessageAttributes map[string]notificationValue `json:"MessageAttributes"`
}

type notificationValue struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

// parseQueueRecord reads an ops queue record: the SNS notification in its
// body, then the message inside it as parseRecord does. Every error wraps
// errMalformed; a body that is not a notification says so (raw message
// delivery turned on by mistake strips the envelope and its attributes).
func parseQueueRecord(rec events.SQSMessage) (opsMessage, error) {
	var n notification
	if err := json.Unmarshal([]byte(rec.Body), &n); err != nil || n.Type != "Notification" || n.Message == nil {
		return opsMessage{}, fmt.Errorf("%w: the queue record is not an SNS notification (is raw message delivery on?)", errMalformed)
	}
	ts, _ := time.Parse(time.RFC3339Nano, n.Timestamp) // only a fallback time: zero when unreadable
	attrs := make(map[string]any, len(n.MessageAttributes))
	for k, v := range n.MessageAttributes {
		attrs[k] = map[string]any{"Type": v.Type, "Value": v.Value}
	}
	return parseRecord(events.SNSEventRecord{SNS: events.SNSEntity{
		Type: n.Type, MessageID: n.MessageID, TopicArn: n.TopicArn, Subject: n.Subject,
		Message: *n.Message, Timestamp: ts, MessageAttributes: attrs,
	}})
}
