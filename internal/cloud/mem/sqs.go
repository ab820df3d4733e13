package mem

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
)

// SQS limits and defaults, as documented for CreateQueue, SendMessage and
// ReceiveMessage.
const (
	defaultVisibility     = 30
	maxVisibility         = 43200
	defaultRetention      = 345600
	defaultMaxMessageSize = 1048576
	maxDelay              = 900
	maxWait               = 20
	maxBatch              = 10
	maxMessageAttributes  = 10
	purgeCooldown         = 60 * time.Second
)

// queueDriver is the queue semantics the SQS adapters below are written
// against, by queue name: *queue.Set keeps them in memory. Everything
// SDK-shaped (validation, attributes, error types, batches) stays here.
type queueDriver interface {
	Configure(name string, cfg queue.Config)
	Send(name string, m queue.Message, delay time.Duration) (queue.Message, error)
	Receive(name string, max int, visibility time.Duration) (queue.Received, error)
	Delete(name, handle string) (bool, error)
	ChangeVisibility(name, handle string, d time.Duration) error
	Purge(name string) error
	Stats(name string) (queue.Stats, error)
	Move(src, dst string) (moved, stuck int, err error)
}

// sqsQueue is what SQS knows of a queue besides its messages.
type sqsQueue struct {
	name, url, arn string
	attrs          map[string]string // as set by the caller (canonical values)
	created        time.Time
	modified       time.Time
	lastPurge      time.Time
}

type redrive struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     int    `json:"maxReceiveCount"`
}

// QueueStats is a queue's depth as CloudWatch reports it: Visible is
// ApproximateNumberOfMessagesVisible, InFlight ...NotVisible, Delayed
// ...Delayed, and OldestAge ApproximateAgeOfOldestMessage, measured in cloud
// time (real age multiplied by the time scale, so it compares with the
// durations in template.yaml).
type QueueStats struct {
	Visible, InFlight, Delayed int
	OldestAge                  time.Duration
}

// QueueInfo describes one queue. DLQ is true when some queue's redrive
// policy targets it.
type QueueInfo struct {
	Name, URL, ARN string
	DLQ            bool
}

// QueueStats reports a queue's depth by URL; an unknown URL reports zeros.
func (c *Cloud) QueueStats(url string) QueueStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queueByURL(url)
	if q == nil {
		return QueueStats{}
	}
	st, _ := c.sqs.Stats(q.name)
	return QueueStats{Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed,
		OldestAge: time.Duration(float64(st.OldestAge) * c.scale)}
}

// Queues lists every queue, sorted by name.
func (c *Cloud) Queues() []QueueInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]QueueInfo, 0, len(c.queues))
	for _, name := range slices.Sorted(maps.Keys(c.queues)) {
		q := c.queues[name]
		out = append(out, QueueInfo{Name: q.name, URL: q.url, ARN: q.arn, DLQ: c.isDLQ(q)})
	}
	return out
}

// isDLQ reports whether some queue's redrive policy targets q.
func (c *Cloud) isDLQ(q *sqsQueue) bool {
	for _, o := range c.queues {
		if rp, ok := o.redrive(); ok && rp.DeadLetterTargetArn == q.arn {
			return true
		}
	}
	return false
}

// ListDeadLetterSourceQueues lists the URLs of the queues whose redrive
// policy names the queue as their dead-letter queue, sorted (AWS pages them;
// a template's handful fits one page).
func (c *Cloud) ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	if in == nil {
		return nil, opErr("SQS", "ListDeadLetterSourceQueues", required("ListDeadLetterSourceQueuesInput", "QueueUrl"))
	}
	return onQueue(c, "ListDeadLetterSourceQueues", in.QueueUrl, func(dlq *sqsQueue) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
		out := &sqs.ListDeadLetterSourceQueuesOutput{QueueUrls: []string{}}
		for _, name := range slices.Sorted(maps.Keys(c.queues)) {
			if rp, ok := c.queues[name].redrive(); ok && rp.DeadLetterTargetArn == dlq.arn {
				out.QueueUrls = append(out.QueueUrls, c.queueURL(name))
			}
		}
		return out, nil
	})
}

func (q *sqsQueue) redrive() (redrive, bool) {
	s, ok := q.attrs["RedrivePolicy"]
	if !ok || s == "" {
		return redrive{}, false
	}
	rp, err := parseRedrive(s)
	return rp, err == nil
}

// fifo reports whether q is a FIFO queue.
func (q *sqsQueue) fifo() bool { return q.attrs["FifoQueue"] == "true" }

func (q *sqsQueue) intAttr(name string, def int) int {
	if v, ok := q.attrs[name]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// seconds is an attribute's (or a call's) whole seconds as cloud time
// compressed by the time scale.
func (c *Cloud) seconds(n int) time.Duration {
	return c.scaled(time.Duration(n) * time.Second)
}

// configure hands the queue's attributes to the driver.
func (c *Cloud) configure(q *sqsQueue) {
	cfg := queue.Config{Retention: c.seconds(q.intAttr("MessageRetentionPeriod", defaultRetention)),
		FIFO: q.fifo(), ContentDedup: q.attrs["ContentBasedDeduplication"] == "true",
		DedupPerGroup: q.attrs["DeduplicationScope"] == "messageGroup", DedupWindow: c.scaled(queue.DefaultDedupWindow)}
	if rp, ok := q.redrive(); ok {
		if dlq := c.queueByArn(rp.DeadLetterTargetArn); dlq != nil {
			cfg.DeadLetter, cfg.MaxReceives = dlq.name, rp.MaxReceiveCount
		}
	}
	c.sqs.Configure(q.name, cfg)
}

func (c *Cloud) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", c.region, c.account, name)
}

func (c *Cloud) queueArn(name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.region, c.account, name)
}

func (c *Cloud) queueByURL(url string) *sqsQueue {
	for _, q := range c.queues {
		if q.url == url {
			return q
		}
	}
	return nil
}

func (c *Cloud) queueByArn(arn string) *sqsQueue {
	for _, q := range c.queues {
		if q.arn == arn {
			return q
		}
	}
	return nil
}

func errQueueDoesNotExist() error {
	return &sqstypes.QueueDoesNotExist{
		Message:           aws.String("The specified queue does not exist."),
		ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue"),
	}
}

// onQueue runs fn on the queue at url as operation op (see locked); an
// unknown URL fails with QueueDoesNotExist.
func onQueue[O any](c *Cloud, op string, url *string, fn func(q *sqsQueue) (*O, error)) (*O, error) {
	return locked(c, "SQS", op, func() (*O, error) {
		q := c.queueByURL(deref(url))
		if q == nil {
			return nil, errQueueDoesNotExist()
		}
		return fn(q)
	})
}

// batchOutcome is a batch call's per-entry results, in SQS's two lists.
type batchOutcome[S any] struct {
	ok     []S
	failed []sqstypes.BatchResultErrorEntry
}

// batch is the per-entry half of every SQS batch call, written once: it
// applies SQS's batch rules to the entry ids (1 to 10 entries, distinct,
// well-formed ids; a breach fails the whole call), then runs do on each
// entry of the queue at url and sorts the outcomes into Successful and
// Failed (a BatchResultErrorEntry carrying the entry's error code).
func batch[E, S any](c *Cloud, op string, url *string, entries []E, id func(E) *string, do func(q *sqsQueue, e E) (S, error)) (*batchOutcome[S], error) {
	if err := checkBatch(entries, id); err != nil {
		return nil, opErr("SQS", op, err)
	}
	return onQueue(c, op, url, func(q *sqsQueue) (*batchOutcome[S], error) {
		out := &batchOutcome[S]{ok: []S{}, failed: []sqstypes.BatchResultErrorEntry{}}
		for _, e := range entries {
			s, err := do(q, e)
			if err != nil {
				out.failed = append(out.failed, failure(id(e), err))
				continue
			}
			out.ok = append(out.ok, s)
		}
		return out, nil
	})
}

// checkBatch applies SQS's batch rules: 1..10 entries, distinct valid ids.
func checkBatch[E any](entries []E, id func(E) *string) error {
	if len(entries) == 0 {
		return &sqstypes.EmptyBatchRequest{Message: aws.String("There should be at least one entry in the request."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.EmptyBatchRequest")}
	}
	if len(entries) > maxBatch {
		return &sqstypes.TooManyEntriesInBatchRequest{Message: aws.String(fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", maxBatch, len(entries))), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.TooManyEntriesInBatchRequest")}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		s := deref(id(e))
		if !validName(s, 80) {
			return &sqstypes.InvalidBatchEntryId{Message: aws.String("A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.InvalidBatchEntryId")}
		}
		if seen[s] {
			return &sqstypes.BatchEntryIdsNotDistinct{Message: aws.String("Id " + s + " repeated."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.BatchEntryIdsNotDistinct")}
		}
		seen[s] = true
	}
	return nil
}

// failure turns an entry's error into a batch result error entry.
func failure(id *string, err error) sqstypes.BatchResultErrorEntry {
	code, msg := "InternalError", err.Error()
	if ae, ok := err.(interface {
		ErrorCode() string
		ErrorMessage() string
	}); ok {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
	}
	return sqstypes.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(msg), SenderFault: true}
}

// queueAttrSpec validates one settable attribute and returns its canonical value.
var queueAttrSpec = map[string]func(c *Cloud, v string) (string, error){
	"DelaySeconds":                  intRange(0, maxDelay),
	"MaximumMessageSize":            intRange(1024, defaultMaxMessageSize),
	"MessageRetentionPeriod":        intRange(60, 1209600),
	"ReceiveMessageWaitTimeSeconds": intRange(0, maxWait),
	"VisibilityTimeout":             intRange(0, maxVisibility),
	"RedrivePolicy":                 validRedrive,
	"RedriveAllowPolicy":            anyValue,
	"Policy":                        anyValue,
	"KmsMasterKeyId":                anyValue,
	"KmsDataKeyReusePeriodSeconds":  intRange(60, 86400),
	"SqsManagedSseEnabled":          boolValue,
	"FifoQueue":                     boolValue,
	"ContentBasedDeduplication":     boolValue,
	"DeduplicationScope":            oneOf("queue", "messageGroup"),
	"FifoThroughputLimit":           oneOf("perQueue", "perMessageGroupId"),
}

// fifoAttrs are the attributes only a FIFO queue has.
var fifoAttrs = []string{"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}

func oneOf(values ...string) func(*Cloud, string) (string, error) {
	return func(_ *Cloud, v string) (string, error) {
		if !slices.Contains(values, v) {
			return "", fmt.Errorf("must be one of %s", strings.Join(values, ", "))
		}
		return v, nil
	}
}

func intRange(lo, hi int) func(*Cloud, string) (string, error) {
	return func(_ *Cloud, v string) (string, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return "", fmt.Errorf("must be an integer from %d to %d", lo, hi)
		}
		return strconv.Itoa(n), nil
	}
}

func anyValue(_ *Cloud, v string) (string, error) { return v, nil }

func boolValue(_ *Cloud, v string) (string, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return "", fmt.Errorf("must be true or false")
	}
	return strconv.FormatBool(b), nil
}

func parseRedrive(v string) (redrive, error) {
	var raw struct {
		DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return redrive{}, fmt.Errorf("is not a JSON object: %v", err)
	}
	if raw.DeadLetterTargetArn == "" {
		return redrive{}, fmt.Errorf("needs deadLetterTargetArn")
	}
	// AWS accepts maxReceiveCount as a number or a numeric string.
	n, err := strconv.Atoi(strings.Trim(string(raw.MaxReceiveCount), `"`))
	if err != nil || n < 1 || n > 1000 {
		return redrive{}, fmt.Errorf("maxReceiveCount must be an integer from 1 to 1000")
	}
	return redrive{DeadLetterTargetArn: raw.DeadLetterTargetArn, MaxReceiveCount: n}, nil
}

func validRedrive(c *Cloud, v string) (string, error) {
	if v == "" {
		return "", nil // removes the policy
	}
	rp, err := parseRedrive(v)
	if err != nil {
		return "", err
	}
	if c.queueByArn(rp.DeadLetterTargetArn) == nil {
		return "", fmt.Errorf("dead letter target does not exist")
	}
	b, _ := json.Marshal(rp)
	return string(b), nil
}

// validateQueueAttrs checks the attributes given for the queue named name
// (an existing queue's, when cur is not nil, for SetQueueAttributes) the way
// SQS does, FIFO rules included, and returns their canonical values.
func (c *Cloud) validateQueueAttrs(name string, in map[string]string, cur *sqsQueue) (map[string]string, error) {
	fifo := in["FifoQueue"] == "true"
	if cur != nil {
		if _, ok := in["FifoQueue"]; ok {
			return nil, &sqstypes.InvalidAttributeName{Message: aws.String("Unknown Attribute FifoQueue.")}
		}
		fifo = cur.fifo()
	} else if fifo != strings.HasSuffix(name, ".fifo") {
		return nil, apiErr("InvalidParameterValue", "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length; a standard queue's name cannot end with .fifo.")
	}
	if !fifo {
		for _, k := range fifoAttrs {
			if _, ok := in[k]; ok {
				return nil, &sqstypes.InvalidAttributeName{Message: aws.String("Unknown Attribute " + k + ".")}
			}
		}
	}
	out := make(map[string]string, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		spec, ok := queueAttrSpec[k]
		if !ok {
			return nil, &sqstypes.InvalidAttributeName{Message: aws.String("Unknown Attribute " + k + ".")}
		}
		v, err := spec(c, in[k])
		if err != nil {
			return nil, &sqstypes.InvalidAttributeValue{Message: aws.String(fmt.Sprintf("Invalid value for the parameter %s: %v", k, err))}
		}
		out[k] = v
	}
	if rp, ok := out["RedrivePolicy"]; ok && rp != "" {
		p, _ := parseRedrive(rp)
		if dlq := c.queueByArn(p.DeadLetterTargetArn); dlq != nil && dlq.fifo() != fifo {
			return nil, &sqstypes.InvalidAttributeValue{Message: aws.String("Invalid value for the parameter RedrivePolicy. Reason: Dead-letter queue must be same type of queue as the source.")}
		}
	}
	if out["FifoThroughputLimit"] == "perMessageGroupId" && cmp.Or(out["DeduplicationScope"], attrOf(cur, "DeduplicationScope")) != "messageGroup" {
		return nil, &sqstypes.InvalidAttributeValue{Message: aws.String("Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId requires DeduplicationScope messageGroup.")}
	}
	return out, nil
}

func attrOf(q *sqsQueue, name string) string {
	if q == nil {
		return ""
	}
	return q.attrs[name]
}

// validQueueName is SQS's rule for queue names: validName of at most 80,
// the ".fifo" suffix included.
func validQueueName(n string) bool {
	return len(n) <= 80 && validName(strings.TrimSuffix(n, ".fifo"), 80)
}

// validName reports whether n is 1 to max letters, digits, hyphens and
// underscores: SQS's rule for batch entry ids, and SNS's for topic names.
func validName(n string, max int) bool {
	if n == "" || len(n) > max {
		return false
	}
	for _, r := range n {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// CreateQueue creates a queue (FIFO with FifoQueue "true" and a ".fifo"
// name), or returns the URL of an existing
// queue with that name when the given attributes agree with it (AWS's
// idempotency); different values fail with QueueNameExists.
func (c *Cloud) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	const op = "CreateQueue"
	if in == nil || in.QueueName == nil {
		return nil, opErr("SQS", op, required("CreateQueueInput", "QueueName"))
	}
	name := *in.QueueName
	if !validQueueName(name) {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"))
	}
	return locked(c, "SQS", op, func() (*sqs.CreateQueueOutput, error) {
		attrs, err := c.validateQueueAttrs(name, in.Attributes, nil)
		if err != nil {
			return nil, err
		}
		if q, ok := c.queues[name]; ok {
			for k, v := range attrs {
				if cur, ok := q.attrs[k]; (ok && cur != v) || (!ok && v != "") {
					return nil, &sqstypes.QueueNameExists{
						Message:           aws.String("A queue already exists with the same name and a different value for attribute " + k),
						ErrorCodeOverride: aws.String("QueueAlreadyExists"),
					}
				}
			}
			return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
		}
		now := c.now()
		q := &sqsQueue{name: name, url: c.queueURL(name), arn: c.queueArn(name), attrs: attrs, created: now, modified: now}
		c.queues[name] = q
		c.configure(q)
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	})
}

// GetQueueUrl returns the URL CreateQueue returned for the name.
func (c *Cloud) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	const op = "GetQueueUrl"
	if in == nil || in.QueueName == nil {
		return nil, opErr("SQS", op, required("GetQueueUrlInput", "QueueName"))
	}
	return locked(c, "SQS", op, func() (*sqs.GetQueueUrlOutput, error) {
		q, ok := c.queues[*in.QueueName]
		if !ok {
			return nil, errQueueDoesNotExist()
		}
		return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
	})
}

// SetQueueAttributes changes attributes with the same validation as CreateQueue.
func (c *Cloud) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	const op = "SetQueueAttributes"
	if in == nil || in.QueueUrl == nil || in.Attributes == nil {
		return nil, opErr("SQS", op, required("SetQueueAttributesInput", "QueueUrl, Attributes"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.SetQueueAttributesOutput, error) {
		attrs, err := c.validateQueueAttrs(q.name, in.Attributes, q)
		if err != nil {
			return nil, err
		}
		for k, v := range attrs {
			if v == "" {
				delete(q.attrs, k)
				continue
			}
			q.attrs[k] = v
		}
		q.modified = c.now()
		c.configure(q)
		return &sqs.SetQueueAttributesOutput{}, nil
	})
}

// GetQueueAttributes reports the requested attributes ("All" for every one),
// including the approximate counts.
func (c *Cloud) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	const op = "GetQueueAttributes"
	if in == nil || in.QueueUrl == nil {
		return nil, opErr("SQS", op, required("GetQueueAttributesInput", "QueueUrl"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.GetQueueAttributesOutput, error) {
		st, err := c.sqs.Stats(q.name)
		if err != nil {
			return nil, err
		}
		all := map[string]string{
			"QueueArn":                              q.arn,
			"CreatedTimestamp":                      strconv.FormatInt(q.created.Unix(), 10),
			"LastModifiedTimestamp":                 strconv.FormatInt(q.modified.Unix(), 10),
			"VisibilityTimeout":                     strconv.Itoa(q.intAttr("VisibilityTimeout", defaultVisibility)),
			"DelaySeconds":                          strconv.Itoa(q.intAttr("DelaySeconds", 0)),
			"MaximumMessageSize":                    strconv.Itoa(q.intAttr("MaximumMessageSize", defaultMaxMessageSize)),
			"MessageRetentionPeriod":                strconv.Itoa(q.intAttr("MessageRetentionPeriod", defaultRetention)),
			"ReceiveMessageWaitTimeSeconds":         strconv.Itoa(q.intAttr("ReceiveMessageWaitTimeSeconds", 0)),
			"SqsManagedSseEnabled":                  "true",
			"ApproximateNumberOfMessages":           strconv.Itoa(st.Visible),
			"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(st.InFlight),
			"ApproximateNumberOfMessagesDelayed":    strconv.Itoa(st.Delayed),
		}
		if q.fifo() {
			all["FifoQueue"] = "true"
			all["ContentBasedDeduplication"] = cmp.Or(q.attrs["ContentBasedDeduplication"], "false")
			all["DeduplicationScope"] = cmp.Or(q.attrs["DeduplicationScope"], "queue")
			all["FifoThroughputLimit"] = cmp.Or(q.attrs["FifoThroughputLimit"], "perQueue")
		}
		for _, k := range []string{"RedrivePolicy", "RedriveAllowPolicy", "Policy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"} {
			if v, ok := q.attrs[k]; ok {
				all[k] = v
			}
		}
		out := map[string]string{}
		for _, n := range in.AttributeNames {
			if n == sqstypes.QueueAttributeNameAll {
				out = all
				break
			}
			if v, ok := all[string(n)]; ok {
				out[string(n)] = v
				continue
			}
			if _, known := queueAttrSpec[string(n)]; !known {
				return nil, &sqstypes.InvalidAttributeName{Message: aws.String("Unknown Attribute " + string(n) + ".")}
			}
		}
		return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
	})
}

// PurgeQueue deletes every message. As on AWS, a second purge within 60 s
// (cloud time) fails with PurgeQueueInProgress.
func (c *Cloud) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, _ ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	const op = "PurgeQueue"
	if in == nil || in.QueueUrl == nil {
		return nil, opErr("SQS", op, required("PurgeQueueInput", "QueueUrl"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.PurgeQueueOutput, error) {
		now := c.now()
		if !q.lastPurge.IsZero() && now.Before(q.lastPurge.Add(c.scaled(purgeCooldown))) {
			return nil, &sqstypes.PurgeQueueInProgress{
				Message:           aws.String("Only one PurgeQueue operation on " + q.name + " is allowed every 60 seconds."),
				ErrorCodeOverride: aws.String("AWS.SimpleQueueService.PurgeQueueInProgress"),
			}
		}
		q.lastPurge = now
		return &sqs.PurgeQueueOutput{}, c.sqs.Purge(q.name)
	})
}

// sendLocked validates a message the way SQS does and enqueues it; c.mu
// must be held. SendMessage, its batch entries, EventBridge targets and SNS
// subscriptions all send through it.
func (c *Cloud) sendLocked(q *sqsQueue, s sendSpec) (sendResult, error) {
	if err := q.validateSend(&s); err != nil {
		return sendResult{}, err
	}
	delay := int(s.delay)
	if delay == 0 {
		delay = q.intAttr("DelaySeconds", 0)
	}
	m, err := c.sqs.Send(q.name, queue.Message{Body: s.body, Attributes: s.attrs, TraceHeader: s.traceHeader,
		GroupID: s.groupID, DedupID: s.dedupID}, c.seconds(delay))
	if err != nil {
		return sendResult{}, err
	}
	if !m.Deduplicated {
		c.metrics.Count("NumberOfMessagesSent", 1)
		c.broadcastLocked()
	}
	r := sendResult{id: m.ID, md5Body: md5Hex(s.body), md5Attrs: md5OfAttributes(s.attrs), sequence: m.Sequence}
	if s.traceHeader != "" {
		r.md5Sys = md5OfAttributes(map[string]sqstypes.MessageAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(s.traceHeader)},
		})
	}
	return r, nil
}

// SendMessage enqueues one message. DelaySeconds 0 means the queue's default.
func (c *Cloud) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	const op = "SendMessage"
	if in == nil || in.QueueUrl == nil || in.MessageBody == nil {
		return nil, opErr("SQS", op, required("SendMessageInput", "QueueUrl, MessageBody"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.SendMessageOutput, error) {
		r, err := c.sendLocked(q, sendSpec{body: *in.MessageBody, delay: in.DelaySeconds, attrs: in.MessageAttributes, sysAttrs: in.MessageSystemAttributes,
			groupID: deref(in.MessageGroupId), dedupID: deref(in.MessageDeduplicationId)})
		if err != nil {
			return nil, err
		}
		return &sqs.SendMessageOutput{MessageId: aws.String(r.id), MD5OfMessageBody: aws.String(r.md5Body), MD5OfMessageAttributes: optional(r.md5Attrs),
			MD5OfMessageSystemAttributes: optional(r.md5Sys), SequenceNumber: optional(r.sequence)}, nil
	})
}

// SendMessageBatch enqueues up to 10 messages, reporting each entry.
func (c *Cloud) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	const op = "SendMessageBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("SendMessageBatchInput", "QueueUrl, Entries"))
	}
	res, err := batch(c, op, in.QueueUrl, in.Entries, func(e sqstypes.SendMessageBatchRequestEntry) *string { return e.Id },
		func(q *sqsQueue, e sqstypes.SendMessageBatchRequestEntry) (sqstypes.SendMessageBatchResultEntry, error) {
			r, err := c.sendLocked(q, sendSpec{body: deref(e.MessageBody), delay: e.DelaySeconds, attrs: e.MessageAttributes, sysAttrs: e.MessageSystemAttributes,
				groupID: deref(e.MessageGroupId), dedupID: deref(e.MessageDeduplicationId)})
			return sqstypes.SendMessageBatchResultEntry{
				Id: e.Id, MessageId: aws.String(r.id), MD5OfMessageBody: aws.String(r.md5Body),
				MD5OfMessageAttributes: optional(r.md5Attrs), MD5OfMessageSystemAttributes: optional(r.md5Sys), SequenceNumber: optional(r.sequence),
			}, err
		})
	if err != nil {
		return nil, err
	}
	return &sqs.SendMessageBatchOutput{Successful: res.ok, Failed: res.failed}, nil
}

// ReceiveMessage returns up to MaxNumberOfMessages (1..10) visible messages
// and hides them for the visibility timeout. WaitTimeSeconds (or the
// queue's ReceiveMessageWaitTimeSeconds) long-polls, returning as soon as a
// message is available or when the wait ends; when ctx ends first the error
// wraps ctx.Err(), as the SDK's does. A message
// whose receive count already reached the redrive policy's maxReceiveCount
// is moved to the dead-letter queue instead of being returned.
func (c *Cloud) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	const op = "ReceiveMessage"
	if in == nil || in.QueueUrl == nil {
		return nil, opErr("SQS", op, required("ReceiveMessageInput", "QueueUrl"))
	}
	max := int(in.MaxNumberOfMessages)
	if max == 0 {
		max = 1
	}
	if max < 1 || max > maxBatch {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", in.MaxNumberOfMessages))
	}
	if in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > maxWait {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", in.WaitTimeSeconds))
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > maxVisibility {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", in.VisibilityTimeout))
	}
	var deadline time.Time
	for {
		// One look at the queue; a wait between looks when nothing came.
		var next time.Duration
		var changed chan struct{}
		out, err := onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.ReceiveMessageOutput, error) {
			if deadline.IsZero() {
				wait := int(in.WaitTimeSeconds)
				if wait == 0 {
					wait = q.intAttr("ReceiveMessageWaitTimeSeconds", 0)
				}
				deadline = time.Now().Add(c.seconds(wait))
			}
			vt := int(in.VisibilityTimeout)
			if vt == 0 {
				vt = q.intAttr("VisibilityTimeout", defaultVisibility)
			}
			r, err := c.sqs.Receive(q.name, max, c.seconds(vt))
			if err != nil {
				return nil, err
			}
			if r.DeadLettered > 0 {
				c.metrics.Count("NumberOfMessagesDeadLettered", float64(r.DeadLettered))
				c.broadcastLocked()
			}
			c.metrics.Count("NumberOfMessagesReceived", float64(len(r.Messages)))
			out := &sqs.ReceiveMessageOutput{}
			for _, m := range r.Messages {
				out.Messages = append(out.Messages, c.render(m, in))
			}
			next, changed = r.Next, c.changed
			return out, nil
		})
		if err != nil {
			return nil, err
		}
		left := time.Until(deadline)
		if len(out.Messages) > 0 || left <= 0 {
			return out, nil
		}
		// Sleep until something is sent, the next hidden message may
		// reappear, or the wait ends; re-check at least every 50 ms so an
		// injected clock that jumps forward is noticed.
		d := min(left, 50*time.Millisecond)
		if next > 0 {
			d = min(d, next)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, opErr("SQS", op, fmt.Errorf("long poll: %w", ctx.Err()))
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

func errHandleInvalid(h string) error {
	return &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + h + "\" is not a valid receipt handle.")}
}

// deleteLocked applies AWS's documented rules: a handle from the most recent
// receive deletes the message; a message already gone is a success; an old
// handle (the message was received again since) succeeds without deleting.
func (c *Cloud) deleteLocked(q *sqsQueue, h string) error {
	deleted, err := c.sqs.Delete(q.name, h)
	if errors.Is(err, queue.ErrInvalidHandle) {
		return errHandleInvalid(h)
	}
	if deleted {
		c.metrics.Count("NumberOfMessagesDeleted", 1)
	}
	return err
}

// DeleteMessage deletes a received message by receipt handle.
func (c *Cloud) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	const op = "DeleteMessage"
	if in == nil || in.QueueUrl == nil || in.ReceiptHandle == nil {
		return nil, opErr("SQS", op, required("DeleteMessageInput", "QueueUrl, ReceiptHandle"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.DeleteMessageOutput, error) {
		return &sqs.DeleteMessageOutput{}, c.deleteLocked(q, *in.ReceiptHandle)
	})
}

// DeleteMessageBatch deletes up to 10 messages, reporting each entry.
func (c *Cloud) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	const op = "DeleteMessageBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("DeleteMessageBatchInput", "QueueUrl, Entries"))
	}
	res, err := batch(c, op, in.QueueUrl, in.Entries, func(e sqstypes.DeleteMessageBatchRequestEntry) *string { return e.Id },
		func(q *sqsQueue, e sqstypes.DeleteMessageBatchRequestEntry) (sqstypes.DeleteMessageBatchResultEntry, error) {
			return sqstypes.DeleteMessageBatchResultEntry{Id: e.Id}, c.deleteLocked(q, deref(e.ReceiptHandle))
		})
	if err != nil {
		return nil, err
	}
	return &sqs.DeleteMessageBatchOutput{Successful: res.ok, Failed: res.failed}, nil
}

// changeVisibilityLocked resets the visibility timeout of an in-flight
// message, counted from now; 0 makes it visible at once.
func (c *Cloud) changeVisibilityLocked(q *sqsQueue, h string, vt int32) error {
	if vt < 0 || vt > maxVisibility {
		return apiErr("InvalidParameterValue", "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", vt)
	}
	switch err := c.sqs.ChangeVisibility(q.name, h, c.seconds(int(vt))); {
	case errors.Is(err, queue.ErrInvalidHandle):
		return errHandleInvalid(h)
	case errors.Is(err, queue.ErrStaleHandle):
		return apiErr("InvalidParameterValue", "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", h)
	case errors.Is(err, queue.ErrNotInFlight):
		return &sqstypes.MessageNotInflight{Message: aws.String("The message referred to isn't in flight."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.MessageNotInflight")}
	case err != nil:
		return err
	}
	if vt == 0 {
		c.broadcastLocked()
	}
	return nil
}

// ChangeMessageVisibility changes one in-flight message's visibility timeout.
func (c *Cloud) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	const op = "ChangeMessageVisibility"
	if in == nil || in.QueueUrl == nil || in.ReceiptHandle == nil {
		return nil, opErr("SQS", op, required("ChangeMessageVisibilityInput", "QueueUrl, ReceiptHandle"))
	}
	return onQueue(c, op, in.QueueUrl, func(q *sqsQueue) (*sqs.ChangeMessageVisibilityOutput, error) {
		return &sqs.ChangeMessageVisibilityOutput{}, c.changeVisibilityLocked(q, *in.ReceiptHandle, in.VisibilityTimeout)
	})
}

// ChangeMessageVisibilityBatch changes up to 10 visibility timeouts.
func (c *Cloud) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	const op = "ChangeMessageVisibilityBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("ChangeMessageVisibilityBatchInput", "QueueUrl, Entries"))
	}
	res, err := batch(c, op, in.QueueUrl, in.Entries, func(e sqstypes.ChangeMessageVisibilityBatchRequestEntry) *string { return e.Id },
		func(q *sqsQueue, e sqstypes.ChangeMessageVisibilityBatchRequestEntry) (sqstypes.ChangeMessageVisibilityBatchResultEntry, error) {
			return sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id}, c.changeVisibilityLocked(q, deref(e.ReceiptHandle), e.VisibilityTimeout)
		})
	if err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{Successful: res.ok, Failed: res.failed}, nil
}

func errNoSuchResource(param string) error {
	return &sqstypes.ResourceNotFoundException{Message: aws.String("The resource that you specified for the " + param + " parameter doesn't exist.")}
}

// StartMessageMoveTask redrives a dead-letter queue: every message moves to
// DestinationArn, or, without it, back to the queue it was dead-lettered
// from, with its receive count reset. The move completes before the call
// returns (AWS runs it asynchronously; callers poll ListMessageMoveTasks,
// which reports COMPLETED at once here). Messages with no source queue and
// no DestinationArn stay put and the task reports FAILED.
func (c *Cloud) StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	const op = "StartMessageMoveTask"
	if in == nil || in.SourceArn == nil {
		return nil, opErr("SQS", op, required("StartMessageMoveTaskInput", "SourceArn"))
	}
	return locked(c, "SQS", op, func() (*sqs.StartMessageMoveTaskOutput, error) {
		src := c.queueByArn(*in.SourceArn)
		if src == nil {
			return nil, errNoSuchResource("SourceArn")
		}
		if !c.isDLQ(src) {
			return nil, &sqstypes.UnsupportedOperation{Message: aws.String("Source queue must be configured as a Dead Letter Queue."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.UnsupportedOperation")}
		}
		dst := ""
		if in.DestinationArn != nil {
			q := c.queueByArn(*in.DestinationArn)
			if q == nil {
				return nil, errNoSuchResource("DestinationArn")
			}
			dst = q.name
		}
		moved, stuck, err := c.sqs.Move(src.name, dst)
		if err != nil {
			return nil, err
		}
		entry := sqstypes.ListMessageMoveTasksResultEntry{
			TaskHandle:                        aws.String(base64.RawURLEncoding.EncodeToString([]byte(`{"taskId":"` + uuid.NewString() + `","sourceArn":"` + src.arn + `"}`))),
			SourceArn:                         aws.String(src.arn),
			DestinationArn:                    in.DestinationArn,
			MaxNumberOfMessagesPerSecond:      in.MaxNumberOfMessagesPerSecond,
			StartedTimestamp:                  c.now().UnixMilli(),
			ApproximateNumberOfMessagesToMove: aws.Int64(int64(moved + stuck)),
			ApproximateNumberOfMessagesMoved:  int64(moved),
			Status:                            aws.String("COMPLETED"),
		}
		if stuck > 0 {
			entry.Status = aws.String("FAILED")
			entry.FailureReason = aws.String(fmt.Sprintf("%d messages have no source queue to return to; set DestinationArn", stuck))
		}
		c.moveTasks = append(c.moveTasks, entry)
		c.broadcastLocked()
		return &sqs.StartMessageMoveTaskOutput{TaskHandle: entry.TaskHandle}, nil
	})
}

// ListMessageMoveTasks lists a source queue's move tasks, newest first
// (MaxResults defaults to 1 and is at most 10, as on AWS).
func (c *Cloud) ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, _ ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	const op = "ListMessageMoveTasks"
	if in == nil || in.SourceArn == nil {
		return nil, opErr("SQS", op, required("ListMessageMoveTasksInput", "SourceArn"))
	}
	n := int(aws.ToInt32(in.MaxResults))
	if in.MaxResults == nil {
		n = 1
	}
	if n < 1 || n > 10 {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and 10.", n))
	}
	return locked(c, "SQS", op, func() (*sqs.ListMessageMoveTasksOutput, error) {
		if c.queueByArn(*in.SourceArn) == nil {
			return nil, errNoSuchResource("SourceArn")
		}
		out := &sqs.ListMessageMoveTasksOutput{Results: []sqstypes.ListMessageMoveTasksResultEntry{}}
		for i := len(c.moveTasks) - 1; i >= 0 && len(out.Results) < n; i-- {
			if deref(c.moveTasks[i].SourceArn) == *in.SourceArn {
				out.Results = append(out.Results, c.moveTasks[i])
			}
		}
		return out, nil
	})
}
