package mem

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
)

// SNS limits and the delays between the retries of an asynchronous Lambda
// invocation (AWS retries twice, about one and two minutes apart).
const (
	maxSNSMessage = 262144
	maxSubject    = 100
)

var invokeRetryDelays = []time.Duration{time.Minute, 2 * time.Minute}

type topic struct {
	name, arn string
	subs      []*subscription
}

type subscription struct {
	arn      string
	protocol string
	endpoint string
	raw      bool
	fn       func(context.Context, events.SNSEvent) error
}

type publication struct {
	message   string
	subject   string
	attrs     map[string]snstypes.MessageAttributeValue
	structure string
}

// notification is the JSON body SNS delivers to an SQS subscription without
// raw message delivery, in AWS's field order.
type notification struct {
	Type              string                  `json:"Type"`
	MessageID         string                  `json:"MessageId"`
	TopicArn          string                  `json:"TopicArn"`
	Subject           string                  `json:"Subject,omitempty"`
	Message           string                  `json:"Message"`
	Timestamp         string                  `json:"Timestamp"`
	SignatureVersion  string                  `json:"SignatureVersion"`
	Signature         string                  `json:"Signature"`
	SigningCertURL    string                  `json:"SigningCertURL"`
	UnsubscribeURL    string                  `json:"UnsubscribeURL"`
	MessageAttributes map[string]notifiedAttr `json:"MessageAttributes,omitempty"`
}

type notifiedAttr struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

// fakeSignature stands where AWS puts a real signature: mem does not sign,
// so consumers must not verify notifications in local mode.
const fakeSignature = "bWVtOiBub3Qgc2lnbmVk"

func (c *Cloud) topicArn(name string) string {
	return fmt.Sprintf("arn:aws:sns:%s:%s:%s", c.region, c.account, name)
}

func errTopicNotFound() error {
	return &snstypes.NotFoundException{Message: aws.String("Topic does not exist")}
}

func invalidParam(format string, args ...any) error {
	return &snstypes.InvalidParameterException{Message: aws.String("Invalid parameter: " + fmt.Sprintf(format, args...))}
}

// CreateTopic creates a standard topic, or returns the ARN of the existing
// topic with that name.
func (c *Cloud) CreateTopic(ctx context.Context, in *sns.CreateTopicInput, _ ...func(*sns.Options)) (*sns.CreateTopicOutput, error) {
	const op = "CreateTopic"
	if in == nil || in.Name == nil {
		return nil, opErr("SNS", op, required("CreateTopicInput", "Name"))
	}
	name := *in.Name
	if strings.HasSuffix(name, ".fifo") || in.Attributes["FifoTopic"] == "true" {
		return nil, opErr("SNS", op, invalidParam("mem: FIFO topics are not supported"))
	}
	if !validName(name, 256) {
		return nil, opErr("SNS", op, invalidParam("Topic Name"))
	}
	return locked(c, "SNS", op, func() (*sns.CreateTopicOutput, error) {
		arn := c.topicArn(name)
		if _, ok := c.topics[arn]; !ok {
			c.topics[arn] = &topic{name: name, arn: arn}
		}
		return &sns.CreateTopicOutput{TopicArn: aws.String(arn)}, nil
	})
}

// onTopic runs fn on the topic with that ARN as operation op (see locked);
// an unknown ARN fails with NotFoundException.
func onTopic[O any](c *Cloud, op, arn string, fn func(t *topic) (*O, error)) (*O, error) {
	return locked(c, "SNS", op, func() (*O, error) {
		t := c.topics[arn]
		if t == nil {
			return nil, errTopicNotFound()
		}
		return fn(t)
	})
}

// Subscribe subscribes an SQS queue (protocol "sqs", Endpoint = queue ARN),
// confirmed at once as AWS does for SQS endpoints. RawMessageDelivery
// "true" delivers the bare message; otherwise the JSON notification is the
// body. Other protocols and FilterPolicy are not supported (use
// SubscribeFunc for a function); subscribing the same endpoint twice
// returns the existing subscription.
func (c *Cloud) Subscribe(ctx context.Context, in *sns.SubscribeInput, _ ...func(*sns.Options)) (*sns.SubscribeOutput, error) {
	const op = "Subscribe"
	if in == nil || in.TopicArn == nil || in.Protocol == nil {
		return nil, opErr("SNS", op, required("SubscribeInput", "TopicArn, Protocol"))
	}
	if *in.Protocol != "sqs" {
		return nil, opErr("SNS", op, invalidParam("mem: protocol %q is not supported; use sqs, or SubscribeFunc for a function", *in.Protocol))
	}
	ep := deref(in.Endpoint)
	if !strings.HasPrefix(ep, "arn:aws:sqs:") {
		return nil, opErr("SNS", op, invalidParam("SQS endpoint ARN"))
	}
	raw := false
	for _, k := range slices.Sorted(maps.Keys(in.Attributes)) {
		v := in.Attributes[k]
		switch k {
		case "RawMessageDelivery":
			raw = strings.EqualFold(v, "true")
		case "DeliveryPolicy", "RedrivePolicy":
		default:
			return nil, opErr("SNS", op, invalidParam("mem: subscription attribute %s is not supported", k))
		}
	}
	return onTopic(c, op, *in.TopicArn, func(t *topic) (*sns.SubscribeOutput, error) {
		for _, s := range t.subs {
			if s.protocol == "sqs" && s.endpoint == ep {
				s.raw = raw
				return &sns.SubscribeOutput{SubscriptionArn: aws.String(s.arn)}, nil
			}
		}
		s := t.subscribe(&subscription{protocol: "sqs", endpoint: ep, raw: raw})
		return &sns.SubscribeOutput{SubscriptionArn: aws.String(s.arn)}, nil
	})
}

// subscribe adds s to the topic under a new subscription ARN.
func (t *topic) subscribe(s *subscription) *subscription {
	s.arn = t.arn + ":" + uuid.NewString()
	t.subs = append(t.subs, s)
	return s
}

// SubscribeFunc subscribes fn to a topic the way a Lambda function is
// subscribed: each publication is delivered asynchronously as an
// events.SNSEvent with one record, built like Lambda's. A failing (or
// panicking) fn is retried twice, one and two minutes apart (divided by the
// time scale); then the event goes to the WithInvokeFailure hook, or is
// dropped with a log line. It returns the subscription ARN.
func (c *Cloud) SubscribeFunc(topicArn string, fn func(ctx context.Context, ev events.SNSEvent) error) (string, error) {
	const op = "Subscribe"
	if fn == nil {
		return "", opErr("SNS", op, invalidParam("nil function"))
	}
	s, err := onTopic(c, op, topicArn, func(t *topic) (*subscription, error) {
		return t.subscribe(&subscription{protocol: "lambda", fn: fn}), nil
	})
	if err != nil {
		return "", err
	}
	return s.arn, nil
}

// Publish sends a message to every subscription of the topic and returns its
// MessageId. MessageStructure "json" picks the "sqs" or "lambda" key, else
// "default", per protocol.
func (c *Cloud) Publish(ctx context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	const op = "Publish"
	if in == nil || in.Message == nil {
		return nil, opErr("SNS", op, required("PublishInput", "Message"))
	}
	arn := deref(in.TopicArn)
	if arn == "" {
		arn = deref(in.TargetArn)
	}
	if arn == "" {
		return nil, opErr("SNS", op, invalidParam("TopicArn or TargetArn Reason: no value for required parameter"))
	}
	p := publication{message: *in.Message, subject: deref(in.Subject), attrs: in.MessageAttributes, structure: deref(in.MessageStructure)}
	if err := validatePublication(p, in.Subject != nil); err != nil {
		return nil, opErr("SNS", op, err)
	}
	return onTopic(c, op, arn, func(t *topic) (*sns.PublishOutput, error) {
		return &sns.PublishOutput{MessageId: aws.String(c.publishLocked(ctx, t, p))}, nil
	})
}

func validatePublication(p publication, hasSubject bool) error {
	if p.message == "" {
		return invalidParam("Empty message")
	}
	if len(p.message) > maxSNSMessage {
		return invalidParam("Message too long")
	}
	if hasSubject {
		if p.subject == "" || len(p.subject) > maxSubject || strings.ContainsFunc(p.subject, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return invalidParam("Subject")
		}
	}
	switch p.structure {
	case "":
	case "json":
		var m map[string]any
		if json.Unmarshal([]byte(p.message), &m) != nil {
			return invalidParam("Message Structure - JSON message body failed to parse")
		}
		if _, ok := m["default"].(string); !ok {
			return invalidParam("Message Structure - No default entry in JSON message body")
		}
	default:
		return invalidParam("MessageStructure")
	}
	for name, a := range p.attrs {
		t := deref(a.DataType)
		switch {
		case t == "Binary" || strings.HasPrefix(t, "Binary."):
			if len(a.BinaryValue) == 0 {
				return &snstypes.InvalidParameterValueException{Message: aws.String("The message attribute '" + name + "' must contain non-empty message attribute value for message attribute type 'Binary'.")}
			}
		case t == "String" || t == "Number" || t == "String.Array" || strings.HasPrefix(t, "String.") || strings.HasPrefix(t, "Number."):
			if deref(a.StringValue) == "" {
				return &snstypes.InvalidParameterValueException{Message: aws.String("The message attribute '" + name + "' must contain non-empty message attribute value for message attribute type '" + t + "'.")}
			}
		default:
			return &snstypes.InvalidParameterValueException{Message: aws.String("The message attribute '" + name + "' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.")}
		}
	}
	return nil
}

// messageFor picks the protocol's message from a "json" structure.
func (p publication) messageFor(protocol string) string {
	if p.structure != "json" {
		return p.message
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(p.message), &m)
	if s, ok := m[protocol].(string); ok {
		return s
	}
	s, _ := m["default"].(string)
	return s
}

func notifiedAttrs(attrs map[string]snstypes.MessageAttributeValue) map[string]notifiedAttr {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]notifiedAttr, len(attrs))
	for k, a := range attrs {
		v := deref(a.StringValue)
		if a.BinaryValue != nil {
			v = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		out[k] = notifiedAttr{Type: deref(a.DataType), Value: v}
	}
	return out
}

// publishLocked fans a publication out; c.mu must be held.
func (c *Cloud) publishLocked(ctx context.Context, t *topic, p publication) string {
	id := uuid.NewString()
	now := c.now().UTC()
	ts := now.Format("2006-01-02T15:04:05.000Z")
	certURL := fmt.Sprintf("https://sns.%s.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem", c.region)
	c.metrics.Count("NumberOfMessagesPublished", 1)
	for _, s := range t.subs {
		unsub := fmt.Sprintf("https://sns.%s.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=%s", c.region, s.arn)
		switch s.protocol {
		case "sqs":
			msg := p.messageFor("sqs")
			var body string
			var attrs map[string]sqstypes.MessageAttributeValue
			if s.raw {
				body, attrs = msg, rawAttrs(p.attrs)
			} else {
				b, _ := marshal(notification{
					Type: "Notification", MessageID: id, TopicArn: t.arn, Subject: p.subject, Message: msg,
					Timestamp: ts, SignatureVersion: "1", Signature: fakeSignature, SigningCertURL: certURL,
					UnsubscribeURL: unsub, MessageAttributes: notifiedAttrs(p.attrs),
				})
				body = string(b)
			}
			if err := c.sendToArnLocked(ctx, s.endpoint, []byte(body), "", "", attrs); err != nil {
				c.log.Warn("sns: delivery to sqs failed; message dropped", "subscription_arn", s.arn, "err", err)
			}
		case "lambda":
			ma := map[string]any{}
			for k, a := range notifiedAttrs(p.attrs) {
				ma[k] = map[string]any{"Type": a.Type, "Value": a.Value}
			}
			ev := events.SNSEvent{Records: []events.SNSEventRecord{{
				EventVersion: "1.0", EventSubscriptionArn: s.arn, EventSource: "aws:sns",
				SNS: events.SNSEntity{
					Type: "Notification", MessageID: id, TopicArn: t.arn, Subject: p.subject,
					Message: p.messageFor("lambda"), Timestamp: now.Truncate(time.Millisecond),
					SignatureVersion: "1", Signature: fakeSignature, SigningCertURL: certURL,
					UnsubscribeURL: unsub, MessageAttributes: ma,
				},
			}}}
			c.wg.Add(1)
			go c.invoke(t.arn, s.fn, ev)
		}
	}
	return id
}

// rawAttrs maps SNS attributes to SQS attributes for raw delivery.
func rawAttrs(attrs map[string]snstypes.MessageAttributeValue) map[string]sqstypes.MessageAttributeValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]sqstypes.MessageAttributeValue, len(attrs))
	for k, a := range attrs {
		t := deref(a.DataType)
		if t == "String.Array" {
			t = "String"
		}
		out[k] = sqstypes.MessageAttributeValue{DataType: aws.String(t), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
	}
	return out
}

// invoke runs one asynchronous function delivery with AWS's retries.
func (c *Cloud) invoke(topicArn string, fn func(context.Context, events.SNSEvent) error, ev events.SNSEvent) {
	defer c.wg.Done()
	var err error
	for attempt := 0; ; attempt++ {
		if err = call(c.ctx, fn, ev); err == nil {
			return
		}
		if attempt == len(invokeRetryDelays) || c.ctx.Err() != nil {
			break
		}
		t := time.NewTimer(c.scaled(invokeRetryDelays[attempt]))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	c.metrics.Count("NumberOfNotificationsFailed", 1)
	if c.onInvokeFailure != nil {
		c.onInvokeFailure(topicArn, ev, err)
		return
	}
	c.log.Warn("sns: function failed every attempt; event dropped", "topic_arn", topicArn, "message_id", ev.Records[0].SNS.MessageID, "err", err)
}

// call runs fn, turning a panic into an error as Lambda reports a crash.
func call(ctx context.Context, fn func(context.Context, events.SNSEvent) error, ev events.SNSEvent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("function panicked: %v", r)
		}
	}()
	return fn(ctx, ev)
}
