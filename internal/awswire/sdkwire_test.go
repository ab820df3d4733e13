package awswire_test

// The wire as the real SDK reads it: every operation the server serves is
// called with aws-sdk-go-v2's own client, and what the client's
// deserializer decoded is checked field by field and against what the port
// answered. A member the server spells differently from the service model
// (`QueueUrls` where SQS's model says `queueUrls`) decodes to nothing and
// fails here; an operation the server serves but this table does not know
// fails TestEveryServedOperationIsCheckedThroughTheSDK.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/cloud/mem"
)

// wire is one server over a fresh in-memory cloud, the SDK clients that
// reach it over HTTP, and the outputs its ports answered.
type wire struct {
	t      *testing.T
	ctx    context.Context
	cloud  *mem.Cloud // the ports: setup goes here directly, not over the wire
	tables *awswire.Tables
	sqs    *sqs.Client
	eb     *eventbridge.Client
	sns    *sns.Client
	ddb    *dynamodb.Client

	mu       sync.Mutex
	answered map[string]any // by "Service.Op": the port's last output
}

func newWire(t *testing.T) *wire {
	t.Helper()
	w := &wire{t: t, cloud: mem.New(), tables: awswire.NewTables("us-east-1", "123456789012"), answered: map[string]any{}}
	t.Cleanup(func() { _ = w.cloud.Close() })
	srv := httptest.NewServer(newServer(w.cloud, w.tables, awswire.WithAnswered(func(service, op string, out any) {
		w.mu.Lock()
		w.answered[service+"."+op] = out
		w.mu.Unlock()
	})))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	w.ctx = ctx
	cfg := sdkConfig(srv.URL)
	w.sqs, w.eb, w.sns, w.ddb = sqs.NewFromConfig(cfg), eventbridge.NewFromConfig(cfg), sns.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	return w
}

// newServer serves every service linegate local serves.
func newServer(c *mem.Cloud, tables *awswire.Tables, opts ...awswire.Option) *awswire.Server {
	return awswire.New(append([]awswire.Option{awswire.WithSQS(c), awswire.WithEventBridge(c), awswire.WithSNS(c), awswire.WithDynamoDB(tables)}, opts...)...)
}

func (w *wire) portAnswer(op string) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answered[op]
}

// callFailed is what must panics with; TestWireThroughTheSDK's cases turn
// it into a failure of their test.
type callFailed struct{ err error }

// must returns v, or stops the case when the call failed.
func must[T any](v T, err error) T {
	if err != nil {
		panic(callFailed{err})
	}
	return v
}

// queue creates a queue through the port and returns its URL and ARN.
func (w *wire) queue(name string, attrs map[string]string) (string, string) {
	w.t.Helper()
	out := must(w.cloud.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}))
	at := must(w.cloud.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}}))
	return aws.ToString(out.QueueUrl), at.Attributes["QueueArn"]
}

// withDLQ creates work-dlq and work (redriven to it after 3 receives) and
// returns their URLs and ARNs.
func (w *wire) withDLQ() (url, arn, dlqURL, dlqARN string) {
	w.t.Helper()
	dlqURL, dlqARN = w.queue("work-dlq", nil)
	url, arn = w.queue("work", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, dlqARN)})
	return url, arn, dlqURL, dlqARN
}

func (w *wire) sendDirect(url, body string) {
	w.t.Helper()
	must(w.cloud.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"color": {DataType: aws.String("String"), StringValue: aws.String("blue")},
			"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 254, 255}},
		}}))
}

func (w *wire) receiveDirect(url string, n int32) []sqstypes.Message {
	w.t.Helper()
	out := must(w.cloud.ReceiveMessage(w.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: n}))
	if len(out.Messages) != int(n) {
		w.t.Fatalf("setup: received %d messages, want %d", len(out.Messages), n)
	}
	return out.Messages
}

func md5Hex(s string) string { sum := md5.Sum([]byte(s)); return hex.EncodeToString(sum[:]) }

// wireCase drives one operation with the SDK client and checks the fields
// it decoded; it returns the decoded output.
type wireCase func(t *testing.T, w *wire) any

// wireCases is every operation the server serves, by "Service.Op".
var wireCases = map[string]wireCase{
	"SQS.CreateQueue": func(t *testing.T, w *wire) any {
		out := must(w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String("made.fifo"),
			Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "45"}}))
		if u := aws.ToString(out.QueueUrl); !strings.HasSuffix(u, "/made.fifo") {
			t.Errorf("QueueUrl %q, want the URL of made.fifo", u)
		}
		return out
	},
	"SQS.GetQueueUrl": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		out := must(w.sqs.GetQueueUrl(w.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")}))
		if aws.ToString(out.QueueUrl) != url {
			t.Errorf("QueueUrl %q, want %q", aws.ToString(out.QueueUrl), url)
		}
		return out
	},
	"SQS.GetQueueAttributes": func(t *testing.T, w *wire) any {
		url, arn := w.queue("q", map[string]string{"VisibilityTimeout": "45"})
		out := must(w.sqs.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}}))
		if out.Attributes["QueueArn"] != arn || out.Attributes["VisibilityTimeout"] != "45" {
			t.Errorf("Attributes %v, want QueueArn %s and VisibilityTimeout 45", out.Attributes, arn)
		}
		return out
	},
	"SQS.SetQueueAttributes": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		out := must(w.sqs.SetQueueAttributes(w.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"VisibilityTimeout": "77"}}))
		at := must(w.cloud.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"VisibilityTimeout"}}))
		if at.Attributes["VisibilityTimeout"] != "77" {
			t.Errorf("VisibilityTimeout %q after SetQueueAttributes, want 77", at.Attributes["VisibilityTimeout"])
		}
		return out
	},
	"SQS.SendMessage": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q.fifo", map[string]string{"FifoQueue": "true"})
		out := must(w.sqs.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("hello"),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d1"),
			MessageAttributes:       map[string]sqstypes.MessageAttributeValue{"color": {DataType: aws.String("String"), StringValue: aws.String("blue")}},
			MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793")}}}))
		if aws.ToString(out.MessageId) == "" || aws.ToString(out.MD5OfMessageBody) != md5Hex("hello") || aws.ToString(out.MD5OfMessageAttributes) == "" ||
			aws.ToString(out.MD5OfMessageSystemAttributes) == "" || aws.ToString(out.SequenceNumber) == "" {
			t.Errorf("SendMessage decoded %+v; want MessageId, the body's MD5, both attribute MD5s and a SequenceNumber", out)
		}
		return out
	},
	"SQS.SendMessageBatch": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q.fifo", map[string]string{"FifoQueue": "true"})
		out := must(w.sqs.SendMessageBatch(w.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{
			{Id: aws.String("ok"), MessageBody: aws.String("a"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("a")},
			{Id: aws.String("bad"), MessageBody: aws.String("b"), MessageGroupId: aws.String("g")}, // no deduplication id
		}}))
		if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "ok" || aws.ToString(out.Successful[0].MessageId) == "" ||
			aws.ToString(out.Successful[0].MD5OfMessageBody) != md5Hex("a") || aws.ToString(out.Successful[0].SequenceNumber) == "" {
			t.Errorf("Successful %+v, want entry ok with its MessageId, MD5 and SequenceNumber", out.Successful)
		}
		if len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" || aws.ToString(out.Failed[0].Code) == "" ||
			aws.ToString(out.Failed[0].Message) == "" || !out.Failed[0].SenderFault {
			t.Errorf("Failed %+v, want entry bad with its code, message and SenderFault", out.Failed)
		}
		return out
	},
	"SQS.ReceiveMessage": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "hi there")
		out := must(w.sqs.ReceiveMessage(w.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}, MessageAttributeNames: []string{"All"}}))
		if len(out.Messages) != 1 {
			t.Fatalf("Messages %+v, want one", out.Messages)
		}
		m := out.Messages[0]
		if aws.ToString(m.Body) != "hi there" || aws.ToString(m.MessageId) == "" || aws.ToString(m.ReceiptHandle) == "" ||
			aws.ToString(m.MD5OfBody) != md5Hex("hi there") || aws.ToString(m.MD5OfMessageAttributes) == "" ||
			m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" ||
			aws.ToString(m.MessageAttributes["color"].StringValue) != "blue" || string(m.MessageAttributes["blob"].BinaryValue) != string([]byte{0, 1, 254, 255}) {
			t.Errorf("message %+v; want its body, ids, MD5s, system attributes and both message attributes", m)
		}
		return out
	},
	"SQS.DeleteMessage": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "x")
		m := w.receiveDirect(url, 1)[0]
		out := must(w.sqs.DeleteMessage(w.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}))
		if st := w.cloud.QueueStats(url); st.Visible+st.InFlight != 0 {
			t.Errorf("queue %+v after DeleteMessage, want empty", st)
		}
		return out
	},
	"SQS.DeleteMessageBatch": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "x")
		m := w.receiveDirect(url, 1)[0]
		out := must(w.sqs.DeleteMessageBatch(w.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
			{Id: aws.String("real"), ReceiptHandle: m.ReceiptHandle}, {Id: aws.String("bogus"), ReceiptHandle: aws.String("not-a-handle")}}}))
		if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "real" || len(out.Failed) != 1 ||
			aws.ToString(out.Failed[0].Id) != "bogus" || aws.ToString(out.Failed[0].Code) == "" {
			t.Errorf("DeleteMessageBatch decoded %+v; want real deleted and bogus failed with a code", out)
		}
		return out
	},
	"SQS.ChangeMessageVisibility": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "x")
		m := w.receiveDirect(url, 1)[0]
		out := must(w.sqs.ChangeMessageVisibility(w.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}))
		if st := w.cloud.QueueStats(url); st.Visible != 1 {
			t.Errorf("queue %+v after a visibility of 0, want the message visible again", st)
		}
		return out
	},
	"SQS.ChangeMessageVisibilityBatch": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "x")
		m := w.receiveDirect(url, 1)[0]
		out := must(w.sqs.ChangeMessageVisibilityBatch(w.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("real"), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}, {Id: aws.String("bogus"), ReceiptHandle: aws.String("not-a-handle")}}}))
		if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "real" || len(out.Failed) != 1 ||
			aws.ToString(out.Failed[0].Id) != "bogus" || aws.ToString(out.Failed[0].Code) == "" {
			t.Errorf("ChangeMessageVisibilityBatch decoded %+v; want real changed and bogus failed with a code", out)
		}
		return out
	},
	"SQS.PurgeQueue": func(t *testing.T, w *wire) any {
		url, _ := w.queue("q", nil)
		w.sendDirect(url, "x")
		out := must(w.sqs.PurgeQueue(w.ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}))
		if st := w.cloud.QueueStats(url); st.Visible != 0 {
			t.Errorf("queue %+v after PurgeQueue, want empty", st)
		}
		return out
	},
	"SQS.StartMessageMoveTask": func(t *testing.T, w *wire) any {
		_, arn, dlqURL, dlqARN := w.withDLQ()
		w.sendDirect(dlqURL, "dead")
		out := must(w.sqs.StartMessageMoveTask(w.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN), DestinationArn: aws.String(arn)}))
		if aws.ToString(out.TaskHandle) == "" {
			t.Errorf("TaskHandle empty: %+v", out)
		}
		return out
	},
	"SQS.ListMessageMoveTasks": func(t *testing.T, w *wire) any {
		_, arn, dlqURL, dlqARN := w.withDLQ()
		w.sendDirect(dlqURL, "dead")
		must(w.cloud.StartMessageMoveTask(w.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN), DestinationArn: aws.String(arn)}))
		out := must(w.sqs.ListMessageMoveTasks(w.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARN), MaxResults: aws.Int32(1)}))
		if len(out.Results) != 1 {
			t.Fatalf("Results %+v, want the task", out.Results)
		}
		r := out.Results[0]
		if aws.ToString(r.SourceArn) != dlqARN || aws.ToString(r.DestinationArn) != arn || aws.ToString(r.Status) == "" ||
			r.StartedTimestamp == 0 || r.ApproximateNumberOfMessagesMoved != 1 {
			t.Errorf("task %+v; want its source, destination, status, start and 1 message moved", r)
		}
		return out
	},
	"SQS.ListDeadLetterSourceQueues": func(t *testing.T, w *wire) any {
		url, _, dlqURL, _ := w.withDLQ()
		out := must(w.sqs.ListDeadLetterSourceQueues(w.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL)}))
		if !slices.Equal(out.QueueUrls, []string{url}) {
			t.Errorf("QueueUrls %v, want [%s] (the queue whose redrive policy names the DLQ)", out.QueueUrls, url)
		}
		return out
	},

	"EventBridge.CreateEventBus": func(t *testing.T, w *wire) any {
		out := must(w.eb.CreateEventBus(w.ctx, &eventbridge.CreateEventBusInput{Name: aws.String("bus")}))
		if aws.ToString(out.EventBusArn) == "" {
			t.Errorf("EventBusArn empty: %+v", out)
		}
		return out
	},
	"EventBridge.PutRule": func(t *testing.T, w *wire) any {
		w.bus()
		out := must(w.eb.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventBusName: aws.String("bus"), EventPattern: aws.String(`{"source":["app"]}`)}))
		if aws.ToString(out.RuleArn) == "" {
			t.Errorf("RuleArn empty: %+v", out)
		}
		return out
	},
	"EventBridge.DescribeRule": func(t *testing.T, w *wire) any {
		w.rule()
		out := must(w.eb.DescribeRule(w.ctx, &eventbridge.DescribeRuleInput{Name: aws.String("r"), EventBusName: aws.String("bus")}))
		if aws.ToString(out.Name) != "r" || aws.ToString(out.Arn) == "" || aws.ToString(out.EventPattern) == "" ||
			out.State != ebtypes.RuleStateEnabled || aws.ToString(out.EventBusName) != "bus" {
			t.Errorf("DescribeRule decoded %+v; want its name, ARN, pattern, state and bus", out)
		}
		return out
	},
	"EventBridge.PutTargets": func(t *testing.T, w *wire) any {
		w.rule()
		_, arn := w.queue("target", nil)
		out := must(w.eb.PutTargets(w.ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), EventBusName: aws.String("bus"),
			Targets: []ebtypes.Target{{Id: aws.String("t"), Arn: aws.String(arn)}}}))
		if out.FailedEntryCount != 0 {
			t.Errorf("PutTargets decoded %+v, want no failed entry", out)
		}
		return out
	},
	"EventBridge.ListTargetsByRule": func(t *testing.T, w *wire) any {
		_, arn := w.target()
		out := must(w.eb.ListTargetsByRule(w.ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String("r"), EventBusName: aws.String("bus")}))
		if len(out.Targets) != 1 || aws.ToString(out.Targets[0].Id) != "t" || aws.ToString(out.Targets[0].Arn) != arn ||
			out.Targets[0].SqsParameters == nil || aws.ToString(out.Targets[0].SqsParameters.MessageGroupId) != "g" {
			t.Errorf("Targets %+v; want t with its ARN and MessageGroupId g", out.Targets)
		}
		return out
	},
	"EventBridge.PutEvents": func(t *testing.T, w *wire) any {
		w.target()
		w.cloud.FailPutEvents(func(e ebtypes.PutEventsRequestEntry) (string, bool) {
			return "ThrottlingException", aws.ToString(e.DetailType) == "refused"
		})
		at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
		out := must(w.eb.PutEvents(w.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
			{EventBusName: aws.String("bus"), Source: aws.String("app"), DetailType: aws.String("ok"), Detail: aws.String(`{"a":1}`), Time: &at},
			{EventBusName: aws.String("bus"), Source: aws.String("app"), DetailType: aws.String("refused"), Detail: aws.String(`{"a":2}`)},
		}}))
		if out.FailedEntryCount != 1 || len(out.Entries) != 2 || aws.ToString(out.Entries[0].EventId) == "" ||
			aws.ToString(out.Entries[1].ErrorCode) != "ThrottlingException" || aws.ToString(out.Entries[1].ErrorMessage) == "" {
			t.Errorf("PutEvents decoded %+v; want the first entry's EventId and the second's error", out)
		}
		return out
	},

	"SNS.CreateTopic": func(t *testing.T, w *wire) any {
		out := must(w.sns.CreateTopic(w.ctx, &sns.CreateTopicInput{Name: aws.String("ops")}))
		if aws.ToString(out.TopicArn) == "" {
			t.Errorf("TopicArn empty: %+v", out)
		}
		return out
	},
	"SNS.Subscribe": func(t *testing.T, w *wire) any {
		topic := must(w.cloud.CreateTopic(w.ctx, &sns.CreateTopicInput{Name: aws.String("ops")}))
		_, arn := w.queue("listener", nil)
		out := must(w.sns.Subscribe(w.ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn), ReturnSubscriptionArn: true}))
		if aws.ToString(out.SubscriptionArn) == "" {
			t.Errorf("SubscriptionArn empty: %+v", out)
		}
		return out
	},
	"SNS.Publish": func(t *testing.T, w *wire) any {
		topic := must(w.cloud.CreateTopic(w.ctx, &sns.CreateTopicInput{Name: aws.String("ops")}))
		out := must(w.sns.Publish(w.ctx, &sns.PublishInput{TopicArn: topic.TopicArn, Message: aws.String("m"),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("crash")}}}))
		if aws.ToString(out.MessageId) == "" {
			t.Errorf("Publish decoded %+v; want a MessageId", out)
		}
		return out
	},

	"DynamoDB.CreateTable": func(t *testing.T, w *wire) any {
		out := must(w.ddb.CreateTable(w.ctx, &dynamodb.CreateTableInput{TableName: aws.String("t"),
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
			BillingMode:          ddbtypes.BillingModePayPerRequest}))
		checkTable(t, out.TableDescription)
		return out
	},
	"DynamoDB.DescribeTable": func(t *testing.T, w *wire) any {
		w.table()
		out := must(w.ddb.DescribeTable(w.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("t")}))
		checkTable(t, out.Table)
		return out
	},
	"DynamoDB.UpdateTimeToLive": func(t *testing.T, w *wire) any {
		w.table()
		out := must(w.ddb.UpdateTimeToLive(w.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("t"),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)}}))
		if s := out.TimeToLiveSpecification; s == nil || aws.ToString(s.AttributeName) != "expires" || !aws.ToBool(s.Enabled) {
			t.Errorf("TimeToLiveSpecification %+v, want expires enabled", s)
		}
		return out
	},
	"DynamoDB.PutItem": func(t *testing.T, w *wire) any {
		w.table()
		w.item("k", "old")
		out := must(w.ddb.PutItem(w.ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item("k", "new"), ReturnValues: ddbtypes.ReturnValueAllOld}))
		checkItem(t, "Attributes (the old item)", out.Attributes, "k", "old")
		return out
	},
	"DynamoDB.GetItem": func(t *testing.T, w *wire) any {
		w.table()
		w.item("k", "v")
		out := must(w.ddb.GetItem(w.ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key("k")}))
		checkItem(t, "Item", out.Item, "k", "v")
		return out
	},
	"DynamoDB.UpdateItem": func(t *testing.T, w *wire) any {
		w.table()
		w.item("k", "v")
		out := must(w.ddb.UpdateItem(w.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key("k"),
			UpdateExpression: aws.String("SET #v = :v, n = :n"), ExpressionAttributeNames: map[string]string{"#v": "v"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": &ddbtypes.AttributeValueMemberS{Value: "w"}, ":n": &ddbtypes.AttributeValueMemberN{Value: "7"}},
			ReturnValues:              ddbtypes.ReturnValueAllNew}))
		checkItem(t, "Attributes (the new item)", out.Attributes, "k", "w")
		if n, ok := out.Attributes["n"].(*ddbtypes.AttributeValueMemberN); !ok || n.Value != "7" {
			t.Errorf("Attributes[n] = %#v, want N 7", out.Attributes["n"])
		}
		return out
	},
	"DynamoDB.DeleteItem": func(t *testing.T, w *wire) any {
		w.table()
		w.item("k", "v")
		out := must(w.ddb.DeleteItem(w.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key("k"), ReturnValues: ddbtypes.ReturnValueAllOld}))
		checkItem(t, "Attributes (the deleted item)", out.Attributes, "k", "v")
		return out
	},
}

func (w *wire) bus() {
	w.t.Helper()
	must(w.cloud.CreateEventBus(w.ctx, &eventbridge.CreateEventBusInput{Name: aws.String("bus")}))
}

func (w *wire) rule() {
	w.t.Helper()
	w.bus()
	must(w.cloud.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String("r"), EventBusName: aws.String("bus"), EventPattern: aws.String(`{"source":["app"]}`)}))
}

// target is rule r on bus routing to the FIFO queue target.fifo.
func (w *wire) target() (string, string) {
	w.t.Helper()
	w.rule()
	url, arn := w.queue("target.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	must(w.cloud.PutTargets(w.ctx, &eventbridge.PutTargetsInput{Rule: aws.String("r"), EventBusName: aws.String("bus"),
		Targets: []ebtypes.Target{{Id: aws.String("t"), Arn: aws.String(arn), SqsParameters: &ebtypes.SqsParameters{MessageGroupId: aws.String("g")}}}}))
	return url, arn
}

func (w *wire) table() {
	w.t.Helper()
	if err := w.tables.CreateTable("t", "id", "S"); err != nil {
		w.t.Fatal(err)
	}
}

func key(id string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: id}}
}

func item(id, v string) map[string]ddbtypes.AttributeValue {
	it := key(id)
	it["v"] = &ddbtypes.AttributeValueMemberS{Value: v}
	return it
}

// item puts an item; the tables have no port of their own, so this one
// setup call goes over the wire (before the call under test).
func (w *wire) item(id, v string) {
	w.t.Helper()
	must(w.ddb.PutItem(w.ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item(id, v)}))
}

func checkTable(t *testing.T, d *ddbtypes.TableDescription) {
	t.Helper()
	if d == nil || aws.ToString(d.TableName) != "t" || d.TableStatus != ddbtypes.TableStatusActive || aws.ToString(d.TableArn) == "" ||
		d.CreationDateTime == nil || d.CreationDateTime.IsZero() || d.ItemCount == nil ||
		len(d.KeySchema) != 1 || aws.ToString(d.KeySchema[0].AttributeName) != "id" || d.KeySchema[0].KeyType != ddbtypes.KeyTypeHash ||
		len(d.AttributeDefinitions) != 1 || d.AttributeDefinitions[0].AttributeType != ddbtypes.ScalarAttributeTypeS ||
		d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("table description %+v; want t, ACTIVE, its ARN, creation time, item count, key schema, attributes and billing mode", d)
	}
}

func checkItem(t *testing.T, what string, it map[string]ddbtypes.AttributeValue, id, v string) {
	t.Helper()
	gotID, _ := it["id"].(*ddbtypes.AttributeValueMemberS)
	gotV, _ := it["v"].(*ddbtypes.AttributeValueMemberS)
	if gotID == nil || gotID.Value != id || gotV == nil || gotV.Value != v {
		t.Errorf("%s = %#v, want id %s and v %s", what, it, id, v)
	}
}

// TestEveryServedOperationIsCheckedThroughTheSDK fails when the server
// serves an operation wireCases does not drive (or the table names one the
// server no longer serves).
func TestEveryServedOperationIsCheckedThroughTheSDK(t *testing.T) {
	c := mem.New()
	defer c.Close()
	served := awswire.Operations(newServer(c, awswire.NewTables("us-east-1", "123456789012")))
	var tabled []string
	for op := range wireCases {
		tabled = append(tabled, op)
	}
	sort.Strings(tabled)
	for _, op := range served {
		if _, ok := wireCases[op]; !ok {
			t.Errorf("%s is served but not checked through the SDK: add it to wireCases", op)
		}
	}
	for _, op := range tabled {
		if !slices.Contains(served, op) {
			t.Errorf("wireCases checks %s, which the server does not serve", op)
		}
	}
	if len(served) < 30 {
		t.Errorf("the server serves %d operations: %v; want every SQS, EventBridge, SNS and DynamoDB call linegate makes", len(served), served)
	}
}

// TestWireThroughTheSDK drives each served operation with the real SDK
// client and checks what its deserializer decoded: the fields each case
// names, and, where the port answers an SDK output type, every field of
// what the port answered.
func TestWireThroughTheSDK(t *testing.T) {
	ops := make([]string, 0, len(wireCases))
	for op := range wireCases {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		t.Run(op, func(t *testing.T) {
			w := newWire(t)
			defer func() {
				if r := recover(); r != nil {
					f, ok := r.(callFailed)
					if !ok {
						panic(r)
					}
					t.Fatalf("%s: a call failed: %v", op, f.err)
				}
			}()
			decoded := wireCases[op](t, w)
			answered := w.portAnswer(op)
			if answered == nil {
				t.Fatalf("the server answered %s without its port's output reaching the test", op)
			}
			if _, isMap := answered.(map[string]any); isMap {
				return // DynamoDB's outputs are the server's own documents: checked field by field above
			}
			if got, want := normalized(decoded), normalized(answered); !reflect.DeepEqual(got, want) {
				t.Errorf("the SDK decoded\n  %#v\nthe port answered\n  %#v", got, want)
			}
		})
	}
}

// normalized is v (an SDK output) with ResultMetadata dropped and empty
// slices and maps as nil, for comparing what the port answered with what
// the SDK decoded.
func normalized(v any) any {
	return normalize(reflect.ValueOf(v)).Interface()
}

func normalize(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(normalize(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "ResultMetadata" {
				continue
			}
			out.Field(i).Set(normalize(v.Field(i)))
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(normalize(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			out.SetMapIndex(k, normalize(v.MapIndex(k)))
		}
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(normalize(v.Elem()))
		return out
	}
	return v
}
