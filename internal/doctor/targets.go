package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/stack"
)

// verifyBody is LINE's verify request for the bot destination: a signed
// body without events, which the webhook answers 200 and publishes nothing
// for.
func verifyBody(destination string) []byte {
	d, _ := json.Marshal(destination) // a string always marshals
	return []byte(`{"destination":` + string(d) + `,"events":[]}`)
}

// postSigned signs a verify body for destination with secret and posts it
// to url.
func postSigned(ctx context.Context, hc *http.Client, url, secret, destination string) (int, error) {
	body := verifyBody(destination)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signature.Header, signature.Sign([]byte(secret), body))
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// Local is a `linegate local` reached over HTTP: its LINE API mock, its
// webhook, and its inspect endpoints.
type Local struct {
	URL    string // http://127.0.0.1:3000
	Token  string // a channel access token of Channel the local LINE API accepts
	Secret string // the secret Channel's local webhook verifies with
	// Channel is the named channel checked (linegate local --channel
	// NAME: its webhook /webhook/NAME, its settings); "" the default.
	Channel string
	HTTP    *http.Client
}

func (l Local) client() *http.Client {
	if l.HTTP != nil {
		return l.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// Describe names the target.
func (l Local) Describe() string { return "linegate local at " + l.URL + channelOf(l.Channel) }

// channelOf is how a report's first line names a named channel ch.
func channelOf(ch string) string {
	if ch == "" {
		return ""
	}
	return ", channel " + ch
}

// channelPath is the path element after /webhook of channel ch's webhook.
func channelPath(ch string) string {
	if ch == "" {
		return ""
	}
	return "/" + ch
}

// Line is a client of the local LINE API.
func (l Local) Line() *lineapi.Client {
	return lineapi.New(l.Token, lineapi.WithBaseURL(l.URL), lineapi.WithHTTPClient(l.client()), lineapi.WithMaxAttempts(1),
		lineapi.WithLogger(quietLogger()))
}

// WebhookURL is the local webhook of the channel.
func (l Local) WebhookURL() string {
	return strings.TrimRight(l.URL, "/") + "/webhook" + channelPath(l.Channel)
}

// Redelivery reads the local channel's console setting.
func (l Local) Redelivery(ctx context.Context) (bool, bool, error) {
	var c struct {
		Redelivery bool `json:"redelivery"`
	}
	path := "/_local/line/channel"
	if l.Channel != "" {
		path += "?channel=" + url.QueryEscape(l.Channel)
	}
	if err := l.get(ctx, path, &c); err != nil {
		return false, false, err
	}
	return c.Redelivery, true, nil
}

// PostSigned posts a verify body signed with the local secret.
func (l Local) PostSigned(ctx context.Context, destination string) (int, error) {
	return postSigned(ctx, l.client(), l.WebhookURL(), l.Secret, destination)
}

// DLQs reads /_local/queues' dead-letter queues.
func (l Local) DLQs(ctx context.Context) ([]Queue, error) {
	var qs []struct {
		Name       string `json:"name"`
		Visible    int    `json:"visible"`
		DeadLetter bool   `json:"deadLetter"`
	}
	if err := l.get(ctx, "/_local/queues", &qs); err != nil {
		return nil, err
	}
	var out []Queue
	for _, q := range qs {
		if q.DeadLetter {
			out = append(out, Queue{Name: q.Name, Visible: q.Visible,
				Redrive: fmt.Sprintf("linegate redrive --queue %s --endpoint-url %s", q.Name, l.URL)})
		}
	}
	return out, nil
}

// Alarms reads /_local/alarms.
func (l Local) Alarms(ctx context.Context) ([]Alarm, error) {
	var as []Alarm
	err := l.get(ctx, "/_local/alarms", &as)
	return as, err
}

// OpsSubscriptions reads /_local/topics' subscribers of the ops topic.
func (l Local) OpsSubscriptions(ctx context.Context) ([]Subscription, error) {
	return l.subscriptions(ctx, "OpsTopic")
}

// EscalationSubscriptions reads /_local/topics' subscribers of the
// escalation topic (an email subscription is recorded locally).
func (l Local) EscalationSubscriptions(ctx context.Context) ([]Subscription, error) {
	return l.subscriptions(ctx, "EscalationTopic")
}

// subscriptions reads the subscribers of the topic whose name contains
// topic.
func (l Local) subscriptions(ctx context.Context, topic string) ([]Subscription, error) {
	var ts []struct {
		Name        string   `json:"name"`
		Subscribers []string `json:"subscribers"`
	}
	if err := l.get(ctx, "/_local/topics", &ts); err != nil {
		return nil, err
	}
	var out []Subscription
	for _, t := range ts {
		if strings.Contains(t.Name, topic) {
			for _, s := range t.Subscribers {
				if q, ok := strings.CutPrefix(s, "sqs:"); ok {
					out = append(out, Subscription{Protocol: "sqs", Endpoint: q})
					continue
				}
				if e, ok := strings.CutPrefix(s, "email:"); ok {
					addr, filtered := strings.CutSuffix(e, " (filtered)")
					out = append(out, Subscription{Protocol: "email", Endpoint: addr, Filtered: filtered})
					continue
				}
				out = append(out, Subscription{Protocol: "lambda", Endpoint: s})
			}
		}
	}
	return out, nil
}

func (l Local) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(l.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	res, err := l.client().Do(req)
	if err != nil {
		return fmt.Errorf("linegate local at %s: %w", l.URL, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// sqsDepth, ruleTargets, alarmLister and topicLister are the AWS calls the
// stack target makes.
type sqsDepth interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}
type ruleTargets interface {
	ListTargetsByRule(ctx context.Context, in *eventbridge.ListTargetsByRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error)
}
type alarmLister interface {
	DescribeAlarms(ctx context.Context, in *cloudwatch.DescribeAlarmsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.DescribeAlarmsOutput, error)
}
type topicLister interface {
	ListSubscriptionsByTopic(ctx context.Context, in *sns.ListSubscriptionsByTopicInput, optFns ...func(*sns.Options)) (*sns.ListSubscriptionsByTopicOutput, error)
}

// Stack is a deployed stack: its outputs name the resources, its LINE
// client carries the deployed functions' credentials (of Channel), and the
// channel secret is read from SSM.
type Stack struct {
	Info *stack.Stack
	// Channel is the named channel checked (one of the stack's Channels:
	// its webhook is WebhookUrl/NAME; LINE and Secret must be its own);
	// "" the default.
	Channel  string
	LINE     *lineapi.Client
	Secret   func(ctx context.Context) (string, error)
	SQS      sqsDepth
	Events   ruleTargets
	Alarmsrc alarmLister
	SNS      topicLister
	HTTP     *http.Client
}

// Describe names the target.
func (s Stack) Describe() string { return "stack " + s.Info.Name + channelOf(s.Channel) }

// Line is the deployment's LINE client.
func (s Stack) Line() *lineapi.Client { return s.LINE }

// WebhookURL is the stack's WebhookUrl output (and /NAME for a named
// channel).
func (s Stack) WebhookURL() string { return s.Info.Outputs["WebhookUrl"] + channelPath(s.Channel) }

// Redelivery cannot be read: LINE's API has no endpoint for it.
func (s Stack) Redelivery(context.Context) (bool, bool, error) { return false, false, nil }

// PostSigned signs a verify body with the secret in SSM and posts it to
// the deployed webhook of the channel.
func (s Stack) PostSigned(ctx context.Context, destination string) (int, error) {
	if _, err := s.Info.Output("WebhookUrl"); err != nil {
		return 0, err
	}
	secret, err := s.Secret(ctx)
	if err != nil {
		return 0, err
	}
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return postSigned(ctx, hc, s.WebhookURL(), secret, destination)
}

// DLQs finds the stack's dead-letter queues where AWS keeps them, never
// from a list of names: every queue of the stack named by another queue's
// redrive policy (deadLetterTargetArn) or by a rule target's
// DeadLetterConfig, each with its depth.
func (s Stack) DLQs(ctx context.Context) ([]Queue, error) {
	type queue struct{ logical, url string }
	byARN := map[string]queue{}
	dlqs := map[string]bool{} // by ARN
	for _, id := range sortedIDs(s.Info.Resources) {
		r := s.Info.Resources[id]
		if r.Type != "AWS::SQS::Queue" {
			continue
		}
		a, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.PhysicalID),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameRedrivePolicy}})
		if err != nil {
			return nil, fmt.Errorf("attributes of %s: %w", id, err)
		}
		byARN[a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]] = queue{id, r.PhysicalID}
		if rp := a.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]; rp != "" {
			var p struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			}
			if err := json.Unmarshal([]byte(rp), &p); err != nil {
				return nil, fmt.Errorf("redrive policy of %s: %w", id, err)
			}
			dlqs[p.DeadLetterTargetArn] = true
		}
	}
	for _, id := range sortedIDs(s.Info.Resources) {
		r := s.Info.Resources[id]
		if r.Type != "AWS::Events::Rule" || s.Events == nil {
			continue
		}
		// A rule on a custom bus has the physical id "bus|rule".
		in := &eventbridge.ListTargetsByRuleInput{Rule: aws.String(r.PhysicalID)}
		if bus, rule, ok := strings.Cut(r.PhysicalID, "|"); ok {
			in.EventBusName, in.Rule = aws.String(bus), aws.String(rule)
		}
		for {
			out, err := s.Events.ListTargetsByRule(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("targets of %s: %w", id, err)
			}
			for _, t := range out.Targets {
				if t.DeadLetterConfig != nil && aws.ToString(t.DeadLetterConfig.Arn) != "" {
					dlqs[aws.ToString(t.DeadLetterConfig.Arn)] = true
				}
			}
			if out.NextToken == nil {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	var out []Queue
	for _, arn := range slices.Sorted(maps.Keys(dlqs)) {
		q, ok := byARN[arn]
		if !ok {
			return nil, fmt.Errorf("dead-letter queue %s is not a queue of stack %s", arn, s.Info.Name)
		}
		a, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			return nil, fmt.Errorf("depth of %s: %w", q.logical, err)
		}
		n, _ := strconv.Atoi(a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		out = append(out, Queue{Name: q.url[strings.LastIndexByte(q.url, '/')+1:], Visible: n,
			Redrive: fmt.Sprintf("linegate redrive --stack %s --queue %s", s.Info.Name, q.logical)})
	}
	return out, nil
}

func sortedIDs(m map[string]stack.Resource) []string { return slices.Sorted(maps.Keys(m)) }

// Alarms lists the stack's alarms (named "<stack>-…").
func (s Stack) Alarms(ctx context.Context) ([]Alarm, error) {
	var out []Alarm
	in := &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(s.Info.Name + "-")}
	for {
		res, err := s.Alarmsrc.DescribeAlarms(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe alarms: %w", err)
		}
		for _, a := range res.MetricAlarms {
			out = append(out, Alarm{Name: aws.ToString(a.AlarmName), State: string(a.StateValue), ActionsMuted: !aws.ToBool(a.ActionsEnabled)})
		}
		if res.NextToken == nil {
			return out, nil
		}
		in.NextToken = res.NextToken
	}
}

// EscalationSubscriptions lists the subscribers of the
// EscalationTopicArn output.
func (s Stack) EscalationSubscriptions(ctx context.Context) ([]Subscription, error) {
	arn, err := s.Info.Output("EscalationTopicArn")
	if err != nil {
		return nil, err
	}
	return s.subscriptions(ctx, arn)
}

// OpsSubscriptions lists the subscribers of the OpsTopicArn output.
func (s Stack) OpsSubscriptions(ctx context.Context) ([]Subscription, error) {
	arn, err := s.Info.Output("OpsTopicArn")
	if err != nil {
		return nil, err
	}
	return s.subscriptions(ctx, arn)
}

// subscriptions lists a topic's subscribers.
func (s Stack) subscriptions(ctx context.Context, arn string) ([]Subscription, error) {
	var out []Subscription
	in := &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)}
	for {
		res, err := s.SNS.ListSubscriptionsByTopic(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("subscriptions of %s: %w", arn, err)
		}
		for _, sub := range res.Subscriptions {
			out = append(out, Subscription{Protocol: aws.ToString(sub.Protocol), Endpoint: aws.ToString(sub.Endpoint),
				Pending: aws.ToString(sub.SubscriptionArn) == "PendingConfirmation"})
		}
		if res.NextToken == nil {
			return out, nil
		}
		in.NextToken = res.NextToken
	}
}
