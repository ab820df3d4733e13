package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/cloud"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/template"
)

// queueStats is a queue's CloudWatch view.
type queueStats struct {
	Visible, InFlight int
	OldestAge         time.Duration
}

// backend is where the template's resources live: the in-memory cloud, or
// any AWS-compatible endpoint reached with the real SDK clients.
type backend interface {
	ports() cloudPorts
	stats(ctx context.Context, url string) (queueStats, error)
	// subscribe delivers every message on a topic to fn as Lambda's SNS event.
	subscribe(ctx context.Context, topicARN string, fn func(context.Context, events.SNSEvent) error) error
	store(ctx context.Context, table template.Table) (tableStore, error)
	close()
}

// memBackend is the in-memory cloud, and the template's DynamoDB tables
// served by the AWS endpoint: the in-process worker reaches them with
// pkg/idempotency's DynamoDB store and the real SDK client over an
// in-process transport, so it shares them with a worker run by `sam local
// invoke` (one idempotency table for both) and runs Lambda's store code.
type memBackend struct {
	c      *mem.Cloud
	scale  float64
	tables *awswire.Tables
	ddb    *dynamodb.Client
}

// newMemBackend builds the cloud and the tables, restored from st and
// journaled to it when st is not nil (--state).
func newMemBackend(top *template.Topology, scale float64, log *slog.Logger, st *localstate.Store) (*memBackend, error) {
	b := &memBackend{scale: scale,
		c:      mem.New(mem.WithTimeScale(scale), mem.WithRegion(top.Region), mem.WithAccount(top.AccountID), mem.WithLogger(log)),
		tables: awswire.NewTables(top.Region, top.AccountID)}
	if st != nil {
		if err := b.c.Persist(st); err != nil {
			b.close()
			return nil, fmt.Errorf("--state: %w", err)
		}
		if err := b.tables.Persist(st); err != nil {
			b.close()
			return nil, fmt.Errorf("--state: %w", err)
		}
	}
	for _, t := range top.Tables {
		err := b.tables.CreateTable(t.Name, orDefault(t.HashKey, idempotency.AttrID), "S")
		if err == nil && t.TTLAttribute != "" {
			err = b.tables.EnableTTL(t.Name, t.TTLAttribute)
		}
		if err != nil {
			b.close()
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
	}
	b.ddb = dynamodb.NewFromConfig(aws.Config{Region: top.Region, BaseEndpoint: aws.String("http://linegate-local.invalid"),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:  awswire.InProcess(awswire.New(awswire.WithDynamoDB(b.tables)))})
	return b, nil
}

func (b *memBackend) ports() cloudPorts {
	return cloudPorts{bus: b.c, ops: b.c, queues: b.c, rules: b.c, topics: b.c, events: b.c, notify: b.c}
}
func (b *memBackend) stats(_ context.Context, url string) (queueStats, error) {
	s := b.c.QueueStats(url)
	// The age is reported in wall-clock time: handlers run in real time, so a
	// queue falling behind is measured against the threshold unscaled.
	return queueStats{Visible: s.Visible, InFlight: s.InFlight, OldestAge: time.Duration(float64(s.OldestAge) / b.scale)}, nil
}
func (b *memBackend) subscribe(_ context.Context, arn string, fn func(context.Context, events.SNSEvent) error) error {
	_, err := b.c.SubscribeFunc(arn, fn)
	return err
}
func (b *memBackend) store(_ context.Context, t template.Table) (tableStore, error) {
	return idempotency.NewDynamoDB(b.ddb, t.Name), nil
}
func (b *memBackend) close() { _ = b.c.Close() }

// endpointBackend talks to an AWS-compatible endpoint (moto_server,
// LocalStack) with the SDK clients linegate uses in AWS.
type endpointBackend struct {
	cfg    aws.Config
	c      cloud.Clients
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sent remembers when each message was first seen, for the age metric
	// (SQS has no attribute for it; CloudWatch does).
}

func endpointConfig(endpoint, region string) aws.Config {
	return aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// endpointAccount asks the endpoint which account it plays.
func endpointAccount(ctx context.Context, endpoint string) (string, error) {
	out, err := sts.NewFromConfig(endpointConfig(endpoint, template.DefaultRegion)).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("endpoint %s: get caller identity: %w", endpoint, err)
	}
	return aws.ToString(out.Account), nil
}

func newEndpointBackend(endpoint, region string, log *slog.Logger) *endpointBackend {
	cfg := endpointConfig(endpoint, region)
	return &endpointBackend{cfg: cfg, c: cloud.NewAWS(cfg), log: log, cancel: func() {}}
}

func (b *endpointBackend) ports() cloudPorts {
	return cloudPorts{bus: b.c.EventBridge, ops: b.c.SNS, queues: b.c.SQS, rules: b.c.EventBridge, topics: b.c.SNS, events: b.c.EventBridge, notify: b.c.SNS}
}

func (b *endpointBackend) stats(ctx context.Context, url string) (queueStats, error) {
	out, err := b.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return queueStats{}, fmt.Errorf("queue attributes %s: %w", url, err)
	}
	v, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	f, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	// ApproximateAgeOfOldestMessage is a CloudWatch metric, not a queue
	// attribute: the endpoint backend cannot observe it and reports 0.
	return queueStats{Visible: v, InFlight: f}, nil
}

// subscribe creates an inbox queue subscribed to the topic and polls it,
// turning each SNS notification into the event Lambda would get.
func (b *endpointBackend) subscribe(ctx context.Context, arn string, fn func(context.Context, events.SNSEvent) error) error {
	name := "linegate-local-inbox-" + strconv.Itoa(int(time.Now().UnixNano()%1e9))
	q, err := b.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("create inbox queue: %w", err)
	}
	attrs, err := b.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("inbox queue arn: %w", err)
	}
	if _, err := b.c.SNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(arn), Protocol: aws.String("sqs"),
		Endpoint: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}); err != nil {
		return fmt.Errorf("subscribe inbox to %s: %w", arn, err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	prev := b.cancel
	b.cancel = func() { prev(); cancel() }
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for pctx.Err() == nil {
			out, err := b.c.SQS.ReceiveMessage(pctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for _, m := range out.Messages {
				ev, err := snsEventFromNotification(aws.ToString(m.Body))
				if err != nil {
					b.log.Warn("inbox message is not an SNS notification", "error", err.Error())
				} else if err := fn(pctx, ev); err != nil {
					continue // left for redelivery, as an async invoke retry
				}
				_, _ = b.c.SQS.DeleteMessage(pctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
			}
		}
	}()
	return nil
}

// snsEventFromNotification rebuilds Lambda's SNS event from the JSON envelope
// SNS delivers to an SQS subscriber.
func snsEventFromNotification(body string) (events.SNSEvent, error) {
	var n struct {
		Type              string
		MessageId         string
		TopicArn          string
		Subject           string
		Message           string
		Timestamp         time.Time
		SignatureVersion  string
		Signature         string
		SigningCertURL    string
		UnsubscribeURL    string
		MessageAttributes map[string]struct{ Type, Value string }
	}
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return events.SNSEvent{}, err
	}
	if n.Type != "Notification" {
		return events.SNSEvent{}, errors.New("not a Notification")
	}
	attrs := map[string]any{}
	for k, v := range n.MessageAttributes {
		attrs[k] = map[string]any{"Type": v.Type, "Value": v.Value}
	}
	return events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns", EventSubscriptionArn: n.TopicArn + ":local",
		SNS: events.SNSEntity{Type: n.Type, MessageID: n.MessageId, TopicArn: n.TopicArn, Subject: n.Subject, Message: n.Message,
			Timestamp: n.Timestamp, SignatureVersion: n.SignatureVersion, Signature: n.Signature, SigningCertURL: n.SigningCertURL,
			UnsubscribeURL: n.UnsubscribeURL, MessageAttributes: attrs},
	}}}, nil
}

// store creates the idempotency table on the endpoint (on-demand, TTL on).
func (b *endpointBackend) store(ctx context.Context, t template.Table) (tableStore, error) {
	db := dynamodb.NewFromConfig(b.cfg)
	key := t.HashKey
	if key == "" {
		key = idempotency.AttrID
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(t.Name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(key), KeyType: ddbtypes.KeyTypeHash}},
	})
	var exists *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("create table %s: %w", t.Name, err)
	}
	if t.TTLAttribute != "" {
		_, _ = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(t.Name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true)}})
	}
	return idempotency.NewDynamoDB(db, t.Name), nil
}

func (b *endpointBackend) close() {
	b.cancel()
	b.wg.Wait()
}

// resources are the physical identities of what provision created, by
// logical id.
type resources struct {
	queueURL, queueARN, topicARN map[string]string
}

// queueMaker is the SQS calls provisioning makes.
type queueMaker interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

// ruleMaker is the EventBridge calls provisioning makes.
type ruleMaker interface {
	CreateEventBus(ctx context.Context, in *eventbridge.CreateEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.CreateEventBusOutput, error)
	PutRule(ctx context.Context, in *eventbridge.PutRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error)
	PutTargets(ctx context.Context, in *eventbridge.PutTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error)
}

// topicMaker is the SNS calls provisioning makes.
type topicMaker interface {
	CreateTopic(ctx context.Context, in *sns.CreateTopicInput, optFns ...func(*sns.Options)) (*sns.CreateTopicOutput, error)
	Subscribe(ctx context.Context, in *sns.SubscribeInput, optFns ...func(*sns.Options)) (*sns.SubscribeOutput, error)
}

// provision creates the template's queues, buses, rules with their targets,
// topics and their queue subscriptions, identically on both backends.
func provision(ctx context.Context, queues queueMaker, rules ruleMaker, topics topicMaker, top *template.Topology) (resources, error) {
	res := resources{queueURL: map[string]string{}, queueARN: map[string]string{}, topicARN: map[string]string{}}
	urls, arns, topicARNs := res.queueURL, res.queueARN, res.topicARN
	// Create every queue first, then attach redrive policies: a queue's DLQ
	// must exist before the policy names it.
	for _, q := range top.Queues {
		attrs := map[string]string{
			"VisibilityTimeout":      strconv.Itoa(int(q.VisibilityTimeout / time.Second)),
			"MessageRetentionPeriod": strconv.Itoa(int(q.MessageRetention / time.Second)),
			"DelaySeconds":           strconv.Itoa(q.DelaySeconds),
		}
		if q.FIFO {
			attrs["FifoQueue"] = "true"
			attrs["ContentBasedDeduplication"] = strconv.FormatBool(q.ContentBasedDedup)
			if q.DeduplicationScope != "" {
				attrs["DeduplicationScope"] = q.DeduplicationScope
			}
			if q.FifoThroughputLimit != "" {
				attrs["FifoThroughputLimit"] = q.FifoThroughputLimit
			}
		}
		out, err := queues.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: attrs})
		if err != nil {
			return res, fmt.Errorf("create queue %s: %w", q.Name, err)
		}
		urls[q.LogicalID] = aws.ToString(out.QueueUrl)
		a, err := queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return res, fmt.Errorf("queue arn %s: %w", q.Name, err)
		}
		arns[q.LogicalID] = a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	for _, q := range top.Queues {
		if q.RedriveTarget == "" {
			continue
		}
		dlq, ok := arns[q.RedriveTarget]
		if !ok {
			return res, fmt.Errorf("queue %s: redrive target %s is not a queue of the template", q.LogicalID, q.RedriveTarget)
		}
		policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlq, "maxReceiveCount": q.MaxReceiveCount})
		if _, err := queues.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(urls[q.LogicalID]),
			Attributes: map[string]string{"RedrivePolicy": string(policy)}}); err != nil {
			return res, fmt.Errorf("redrive policy of %s: %w", q.Name, err)
		}
	}
	for _, b := range top.Buses {
		if b.Name == "default" {
			continue
		}
		// A second start against the same endpoint finds the bus there:
		// reuse it (queues, topics, rules and targets are created
		// idempotently by their APIs already).
		var exists *ebtypes.ResourceAlreadyExistsException
		if _, err := rules.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(b.Name)}); err != nil && !errors.As(err, &exists) {
			return res, fmt.Errorf("create bus %s: %w", b.Name, err)
		}
	}
	for _, t := range top.Topics {
		out, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(t.Name)})
		if err != nil {
			return res, fmt.Errorf("create topic %s: %w", t.Name, err)
		}
		topicARNs[t.LogicalID] = aws.ToString(out.TopicArn)
	}
	for _, sub := range top.Subscriptions {
		if sub.Protocol != "sqs" {
			continue // email: recorded by the runtime (subscribeEmail)
		}
		if _, err := topics.Subscribe(ctx, &sns.SubscribeInput{
			TopicArn: aws.String(topicARNs[sub.Topic]), Protocol: aws.String("sqs"), Endpoint: aws.String(arns[sub.Queue]),
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(sub.RawMessageDelivery)},
		}); err != nil {
			return res, fmt.Errorf("subscribe %s to %s: %w", sub.Queue, sub.Topic, err)
		}
	}
	for _, r := range top.Rules {
		if len(r.Pattern) == 0 {
			continue // schedule rules are not run locally
		}
		state := ebtypes.RuleStateEnabled
		if r.State == "DISABLED" {
			state = ebtypes.RuleStateDisabled
		}
		if _, err := rules.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(r.Name), EventBusName: aws.String(r.Bus),
			EventPattern: aws.String(string(r.Pattern)), State: state}); err != nil {
			return res, fmt.Errorf("put rule %s: %w", r.Name, err)
		}
		var targets []ebtypes.Target
		for _, tg := range r.Targets {
			t := ebtypes.Target{Id: aws.String(tg.ID)}
			switch {
			case tg.QueueLogicalID != "":
				t.Arn = aws.String(arns[tg.QueueLogicalID])
			case tg.TopicLogicalID != "":
				t.Arn = aws.String(topicARNs[tg.TopicLogicalID])
			default:
				continue // Lambda targets are not run locally
			}
			if tg.DLQLogicalID != "" {
				t.DeadLetterConfig = &ebtypes.DeadLetterConfig{Arn: aws.String(arns[tg.DLQLogicalID])}
			}
			if tg.MessageGroupID != "" {
				t.SqsParameters = &ebtypes.SqsParameters{MessageGroupId: aws.String(tg.MessageGroupID)}
			}
			t.RetryPolicy = &ebtypes.RetryPolicy{MaximumRetryAttempts: aws.Int32(int32(tg.MaxRetryAttempts)),
				MaximumEventAgeInSeconds: aws.Int32(int32(tg.MaxEventAge / time.Second))}
			targets = append(targets, t)
		}
		if len(targets) == 0 {
			continue
		}
		out, err := rules.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(r.Name), EventBusName: aws.String(r.Bus), Targets: targets})
		if err != nil {
			return res, fmt.Errorf("put targets of %s: %w", r.Name, err)
		}
		if out.FailedEntryCount > 0 {
			return res, fmt.Errorf("put targets of %s: %d failed: %s", r.Name, out.FailedEntryCount, aws.ToString(out.FailedEntries[0].ErrorMessage))
		}
	}
	return res, nil
}
