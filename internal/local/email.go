package local

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/console"
	"github.com/linegate/linegate/internal/template"
)

// The template's email subscriptions (AlertEmail: the escalation topic's,
// with no filter, and the ops topic's, filtered to held-results notices)
// are modelled as a recorded delivery: what SNS would send the address,
// shown at /_local/email and in the console. Nothing leaves the machine.

// emailDelivery is one message an email subscription would have sent.
type emailDelivery struct {
	To           string    `json:"to"`
	Topic        string    `json:"topic"`
	Subscription string    `json:"subscription"`
	Subject      string    `json:"subject"`
	Message      string    `json:"message"`
	MessageID    string    `json:"messageId"`
	At           time.Time `json:"at"`
	// Alarm and State name the alarm of a CloudWatch alarm notification.
	Alarm string `json:"alarm,omitempty"`
	State string `json:"state,omitempty"`
}

// maxEmails bounds the deliveries kept (the newest).
const maxEmails = 200

// outbox keeps the email deliveries of this run.
type outbox struct {
	mu   sync.Mutex
	sent []emailDelivery
}

func (o *outbox) add(d emailDelivery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, d)
	if len(o.sent) > maxEmails {
		o.sent = slices.Clone(o.sent[len(o.sent)-maxEmails:])
	}
}

func (o *outbox) list() []emailDelivery {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]emailDelivery{}, o.sent...)
}

// subscribeEmail records every message of the subscription's topic that
// its filter policy lets through.
func (r *Runtime) subscribeEmail(ctx context.Context, sub template.Subscription) error {
	arn := r.res.topicARN[sub.Topic]
	if arn == "" {
		return fmt.Errorf("email subscription %s: topic %s is not provisioned", sub.LogicalID, sub.Topic)
	}
	filter, err := parseFilterPolicy(sub.FilterPolicy)
	if err != nil {
		return fmt.Errorf("email subscription %s: %w", sub.LogicalID, err)
	}
	topic := sub.Topic
	for _, t := range r.top.Topics {
		if t.LogicalID == sub.Topic {
			topic = t.Name
		}
	}
	return r.back.subscribe(ctx, arn, func(_ context.Context, ev events.SNSEvent) error {
		for _, rec := range ev.Records {
			if !filter.matches(rec.SNS.MessageAttributes) {
				continue
			}
			d := emailDelivery{To: sub.Endpoint, Topic: topic, Subscription: sub.LogicalID, Subject: rec.SNS.Subject,
				Message: rec.SNS.Message, MessageID: rec.SNS.MessageID, At: time.Now()}
			var a struct{ AlarmName, NewStateValue string }
			if json.Unmarshal([]byte(rec.SNS.Message), &a) == nil {
				d.Alarm, d.State = a.AlarmName, a.NewStateValue
			}
			r.emails.add(d)
			r.out.line("email     to %s (%s): %s", sub.Endpoint, topic, orDefault(rec.SNS.Subject, "(no subject)"))
			r.console.hub.Notify(console.TopicAlarms)
		}
		return nil
	})
}

// filterPolicy is an SNS subscription filter policy on message attributes,
// in the forms the template uses: each key lists the string values it
// accepts; every key must match. No policy lets everything through.
type filterPolicy map[string][]string

func parseFilterPolicy(raw json.RawMessage) (filterPolicy, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string][]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("filter policy %s: only lists of exact string values are modelled locally: %w", raw, err)
	}
	out := filterPolicy{}
	for k, vs := range m {
		for _, v := range vs {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("filter policy %s: only lists of exact string values are modelled locally", raw)
			}
			out[k] = append(out[k], s)
		}
	}
	return out, nil
}

// matches reports whether SNS would deliver a message with attrs (as Lambda
// receives them: {"Type": "String", "Value": "..."}).
func (f filterPolicy) matches(attrs map[string]any) bool {
	for k, allowed := range f {
		v, ok := attrs[k]
		if !ok {
			return false
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case map[string]any:
			s, _ = x["Value"].(string)
		}
		if !slices.Contains(allowed, s) {
			return false
		}
	}
	return true
}
