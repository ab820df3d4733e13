package mem

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
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

type queue struct {
	name, url, arn string
	attrs          map[string]string // as set by the caller (canonical values)
	created        time.Time
	modified       time.Time
	lastPurge      time.Time
	msgs           []*message // in send order
	byID           map[string]*message
}

type message struct {
	id          string
	body        string
	attrs       map[string]sqstypes.MessageAttributeValue
	traceHeader string
	sent        time.Time
	visibleAt   time.Time // when it may next be received (delay or visibility)
	inFlight    bool
	receives    int
	firstRecv   time.Time
	seq         int    // receive sequence; the newest receipt handle carries it
	origin      string // ARN of the queue it was dead-lettered from
}

type redrive struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     int    `json:"maxReceiveCount"`
}

type moveTask struct {
	entry sqstypes.ListMessageMoveTasksResultEntry
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
	now := c.now()
	c.expireLocked(q, now)
	var s QueueStats
	for _, m := range q.msgs {
		switch {
		case m.inFlight && now.Before(m.visibleAt):
			s.InFlight++
		case !m.inFlight && now.Before(m.visibleAt):
			s.Delayed++
		default:
			s.Visible++
		}
		if age := time.Duration(float64(now.Sub(m.sent)) * c.scale); age > s.OldestAge {
			s.OldestAge = age
		}
	}
	return s
}

// Queues lists every queue, sorted by name.
func (c *Cloud) Queues() []QueueInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	dlqs := map[string]bool{}
	for _, q := range c.queues {
		if rp, ok := q.redrive(); ok {
			dlqs[rp.DeadLetterTargetArn] = true
		}
	}
	out := make([]QueueInfo, 0, len(c.queues))
	for _, name := range sortedKeys(c.queues) {
		q := c.queues[name]
		out = append(out, QueueInfo{Name: q.name, URL: q.url, ARN: q.arn, DLQ: dlqs[q.arn]})
	}
	return out
}

func (q *queue) redrive() (redrive, bool) {
	s, ok := q.attrs["RedrivePolicy"]
	if !ok || s == "" {
		return redrive{}, false
	}
	rp, err := parseRedrive(s)
	return rp, err == nil
}

func (q *queue) intAttr(name string, def int) int {
	if v, ok := q.attrs[name]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func (c *Cloud) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", c.region, c.account, name)
}

func (c *Cloud) queueArn(name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.region, c.account, name)
}

func (c *Cloud) queueByURL(url string) *queue {
	for _, q := range c.queues {
		if q.url == url {
			return q
		}
	}
	return nil
}

func (c *Cloud) queueByArn(arn string) *queue {
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

// lookup finds the queue for an operation; c.mu must be held.
func (c *Cloud) lookup(url *string) (*queue, error) {
	if c.closed {
		return nil, ErrClosed
	}
	q := c.queueByURL(deref(url))
	if q == nil {
		return nil, errQueueDoesNotExist()
	}
	return q, nil
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

func (c *Cloud) validateQueueAttrs(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for _, k := range sortedKeys(in) {
		if k == "FifoQueue" || k == "ContentBasedDeduplication" || k == "DeduplicationScope" || k == "FifoThroughputLimit" {
			return nil, apiErr("UnsupportedOperation", "mem: FIFO queues are not supported")
		}
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
	return out, nil
}

// CreateQueue creates a standard queue, or returns the URL of an existing
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, opErr("SQS", op, ErrClosed)
	}
	attrs, err := c.validateQueueAttrs(in.Attributes)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	if q, ok := c.queues[name]; ok {
		for k, v := range attrs {
			if cur, ok := q.attrs[k]; (ok && cur != v) || (!ok && v != "") {
				return nil, opErr("SQS", op, &sqstypes.QueueNameExists{
					Message:           aws.String("A queue already exists with the same name and a different value for attribute " + k),
					ErrorCodeOverride: aws.String("QueueAlreadyExists"),
				})
			}
		}
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	}
	now := c.now()
	q := &queue{name: name, url: c.queueURL(name), arn: c.queueArn(name), attrs: attrs, created: now, modified: now, byID: map[string]*message{}}
	c.queues[name] = q
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
}

func validQueueName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for _, r := range n {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// GetQueueUrl returns the URL CreateQueue returned for the name.
func (c *Cloud) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	const op = "GetQueueUrl"
	if in == nil || in.QueueName == nil {
		return nil, opErr("SQS", op, required("GetQueueUrlInput", "QueueName"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, opErr("SQS", op, ErrClosed)
	}
	q, ok := c.queues[*in.QueueName]
	if !ok {
		return nil, opErr("SQS", op, errQueueDoesNotExist())
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
}

// SetQueueAttributes changes attributes with the same validation as CreateQueue.
func (c *Cloud) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	const op = "SetQueueAttributes"
	if in == nil || in.QueueUrl == nil || in.Attributes == nil {
		return nil, opErr("SQS", op, required("SetQueueAttributesInput", "QueueUrl, Attributes"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	attrs, err := c.validateQueueAttrs(in.Attributes)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	for k, v := range attrs {
		if v == "" {
			delete(q.attrs, k)
			continue
		}
		q.attrs[k] = v
	}
	q.modified = c.now()
	return &sqs.SetQueueAttributesOutput{}, nil
}

// GetQueueAttributes reports the requested attributes ("All" for every one),
// including the approximate counts.
func (c *Cloud) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	const op = "GetQueueAttributes"
	if in == nil || in.QueueUrl == nil {
		return nil, opErr("SQS", op, required("GetQueueAttributesInput", "QueueUrl"))
	}
	c.mu.Lock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		c.mu.Unlock()
		return nil, opErr("SQS", op, err)
	}
	all := map[string]string{
		"QueueArn":                      q.arn,
		"CreatedTimestamp":              strconv.FormatInt(q.created.Unix(), 10),
		"LastModifiedTimestamp":         strconv.FormatInt(q.modified.Unix(), 10),
		"VisibilityTimeout":             strconv.Itoa(q.intAttr("VisibilityTimeout", defaultVisibility)),
		"DelaySeconds":                  strconv.Itoa(q.intAttr("DelaySeconds", 0)),
		"MaximumMessageSize":            strconv.Itoa(q.intAttr("MaximumMessageSize", defaultMaxMessageSize)),
		"MessageRetentionPeriod":        strconv.Itoa(q.intAttr("MessageRetentionPeriod", defaultRetention)),
		"ReceiveMessageWaitTimeSeconds": strconv.Itoa(q.intAttr("ReceiveMessageWaitTimeSeconds", 0)),
		"SqsManagedSseEnabled":          "true",
	}
	for _, k := range []string{"RedrivePolicy", "RedriveAllowPolicy", "Policy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"} {
		if v, ok := q.attrs[k]; ok {
			all[k] = v
		}
	}
	c.mu.Unlock()
	st := c.QueueStats(*in.QueueUrl)
	all["ApproximateNumberOfMessages"] = strconv.Itoa(st.Visible)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(st.InFlight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(st.Delayed)

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
			return nil, opErr("SQS", op, &sqstypes.InvalidAttributeName{Message: aws.String("Unknown Attribute " + string(n) + ".")})
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// PurgeQueue deletes every message. As on AWS, a second purge within 60 s
// (cloud time) fails with PurgeQueueInProgress.
func (c *Cloud) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, _ ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	const op = "PurgeQueue"
	if in == nil || in.QueueUrl == nil {
		return nil, opErr("SQS", op, required("PurgeQueueInput", "QueueUrl"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	now := c.now()
	if !q.lastPurge.IsZero() && now.Before(q.lastPurge.Add(c.scaled(purgeCooldown))) {
		return nil, opErr("SQS", op, &sqstypes.PurgeQueueInProgress{
			Message:           aws.String("Only one PurgeQueue operation on " + q.name + " is allowed every 60 seconds."),
			ErrorCodeOverride: aws.String("AWS.SimpleQueueService.PurgeQueueInProgress"),
		})
	}
	q.lastPurge = now
	q.msgs, q.byID = nil, map[string]*message{}
	return &sqs.PurgeQueueOutput{}, nil
}

// sendSpec is one message to enqueue, from SendMessage, a batch entry, an
// EventBridge target or an SNS subscription.
type sendSpec struct {
	body        string
	delay       int32 // seconds; 0 = queue default
	attrs       map[string]sqstypes.MessageAttributeValue
	sysAttrs    map[string]sqstypes.MessageSystemAttributeValue
	traceHeader string
}

type sendResult struct {
	id, md5Body, md5Attrs, md5Sys string
}

// validateSend checks a message the way SQS does before accepting it.
func (q *queue) validateSend(s *sendSpec) error {
	if s.body == "" {
		return apiErr("InvalidParameterValue", "The request must contain the parameter MessageBody.")
	}
	if !validBody(s.body) {
		return &sqstypes.InvalidMessageContents{Message: aws.String("Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")}
	}
	if s.delay < 0 || s.delay > maxDelay {
		return apiErr("InvalidParameterValue", "Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and %d, if provided.", s.delay, maxDelay)
	}
	if len(s.attrs) > maxMessageAttributes {
		return apiErr("InvalidParameterValue", "Number of message attributes [%d] exceeds the allowed maximum [%d].", len(s.attrs), maxMessageAttributes)
	}
	size := len(s.body)
	for name, a := range s.attrs {
		t := deref(a.DataType)
		switch {
		case strings.HasPrefix(t, "String") || strings.HasPrefix(t, "Number"):
			if a.StringValue == nil {
				return apiErr("InvalidParameterValue", "Message (user) attribute '%s' must contain a non-empty value of type '%s'.", name, t)
			}
		case strings.HasPrefix(t, "Binary"):
			if len(a.BinaryValue) == 0 {
				return apiErr("InvalidParameterValue", "Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", name)
			}
		default:
			return apiErr("InvalidParameterValue", "The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
		}
		if strings.HasPrefix(t, "Number") {
			if _, err := strconv.ParseFloat(*a.StringValue, 64); err != nil {
				return apiErr("InvalidParameterValue", "Can't cast the value of message (user) attribute '%s' to a number.", name)
			}
		}
		size += len(name) + len(t) + len(deref(a.StringValue)) + len(a.BinaryValue)
	}
	for name, a := range s.sysAttrs {
		if name != "AWSTraceHeader" || deref(a.DataType) != "String" || a.StringValue == nil {
			return apiErr("InvalidParameterValue", "Message system attribute '%s' is not supported: only AWSTraceHeader of type String is.", name)
		}
		s.traceHeader = *a.StringValue
	}
	if max := q.intAttr("MaximumMessageSize", defaultMaxMessageSize); size > max {
		return apiErr("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	return nil
}

// validBody reports whether every character is one SQS accepts.
func validBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// enqueueLocked adds a validated message; c.mu must be held.
func (c *Cloud) enqueueLocked(q *queue, s sendSpec) sendResult {
	now := c.now()
	delay := int(s.delay)
	if delay == 0 {
		delay = q.intAttr("DelaySeconds", 0)
	}
	m := &message{
		id:          uuid.NewString(),
		body:        s.body,
		attrs:       s.attrs,
		traceHeader: s.traceHeader,
		sent:        now,
		visibleAt:   now.Add(c.scaled(time.Duration(delay) * time.Second)),
	}
	q.msgs = append(q.msgs, m)
	q.byID[m.id] = m
	c.metrics.Count("NumberOfMessagesSent", 1)
	c.broadcastLocked()
	r := sendResult{id: m.id, md5Body: md5Hex(s.body), md5Attrs: md5OfAttributes(s.attrs)}
	if s.traceHeader != "" {
		r.md5Sys = md5OfAttributes(map[string]sqstypes.MessageAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(s.traceHeader)},
		})
	}
	return r
}

// SendMessage enqueues one message. DelaySeconds 0 means the queue's default.
func (c *Cloud) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	const op = "SendMessage"
	if in == nil || in.QueueUrl == nil || in.MessageBody == nil {
		return nil, opErr("SQS", op, required("SendMessageInput", "QueueUrl, MessageBody"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	s := sendSpec{body: *in.MessageBody, delay: in.DelaySeconds, attrs: in.MessageAttributes, sysAttrs: in.MessageSystemAttributes}
	if err := q.validateSend(&s); err != nil {
		return nil, opErr("SQS", op, err)
	}
	r := c.enqueueLocked(q, s)
	return &sqs.SendMessageOutput{MessageId: aws.String(r.id), MD5OfMessageBody: aws.String(r.md5Body), MD5OfMessageAttributes: optional(r.md5Attrs), MD5OfMessageSystemAttributes: optional(r.md5Sys)}, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkBatch applies SQS's batch rules: 1..10 entries, distinct valid ids.
func checkBatch(ids []*string) error {
	if len(ids) == 0 {
		return &sqstypes.EmptyBatchRequest{Message: aws.String("There should be at least one entry in the request."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.EmptyBatchRequest")}
	}
	if len(ids) > maxBatch {
		return &sqstypes.TooManyEntriesInBatchRequest{Message: aws.String(fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", maxBatch, len(ids))), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.TooManyEntriesInBatchRequest")}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		s := deref(id)
		if s == "" || len(s) > 80 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
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

// SendMessageBatch enqueues up to 10 messages, reporting each entry.
func (c *Cloud) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	const op = "SendMessageBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("SendMessageBatchInput", "QueueUrl, Entries"))
	}
	ids := make([]*string, len(in.Entries))
	for i := range in.Entries {
		ids[i] = in.Entries[i].Id
	}
	if err := checkBatch(ids); err != nil {
		return nil, opErr("SQS", op, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	out := &sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{}, Failed: []sqstypes.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		s := sendSpec{body: deref(e.MessageBody), delay: e.DelaySeconds, attrs: e.MessageAttributes, sysAttrs: e.MessageSystemAttributes}
		if err := q.validateSend(&s); err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		r := c.enqueueLocked(q, s)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{
			Id: e.Id, MessageId: aws.String(r.id), MD5OfMessageBody: aws.String(r.md5Body),
			MD5OfMessageAttributes: optional(r.md5Attrs), MD5OfMessageSystemAttributes: optional(r.md5Sys),
		})
	}
	return out, nil
}

// expireLocked drops messages older than the retention period.
func (c *Cloud) expireLocked(q *queue, now time.Time) {
	ret := c.scaled(time.Duration(q.intAttr("MessageRetentionPeriod", defaultRetention)) * time.Second)
	keep := q.msgs[:0]
	for _, m := range q.msgs {
		if now.Sub(m.sent) >= ret {
			delete(q.byID, m.id)
			continue
		}
		keep = append(keep, m)
	}
	for i := len(keep); i < len(q.msgs); i++ {
		q.msgs[i] = nil
	}
	q.msgs = keep
}

func (q *queue) remove(m *message) {
	delete(q.byID, m.id)
	for i, x := range q.msgs {
		if x == m {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			return
		}
	}
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
	c.mu.Lock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		c.mu.Unlock()
		return nil, opErr("SQS", op, err)
	}
	wait := int(in.WaitTimeSeconds)
	if wait == 0 {
		wait = q.intAttr("ReceiveMessageWaitTimeSeconds", 0)
	}
	c.mu.Unlock()
	deadline := time.Now().Add(c.scaled(time.Duration(wait) * time.Second))
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, opErr("SQS", op, ErrClosed)
		}
		q = c.queueByURL(*in.QueueUrl)
		if q == nil {
			c.mu.Unlock()
			return nil, opErr("SQS", op, errQueueDoesNotExist())
		}
		msgs, next := c.takeLocked(q, in, max)
		changed := c.changed
		c.mu.Unlock()
		left := time.Until(deadline)
		if len(msgs) > 0 || left <= 0 {
			return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
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

// takeLocked hides and returns up to max visible messages, redriving the
// ones past maxReceiveCount. next is how long until the earliest hidden
// message reappears (0 when none).
func (c *Cloud) takeLocked(q *queue, in *sqs.ReceiveMessageInput, max int) ([]sqstypes.Message, time.Duration) {
	now := c.now()
	c.expireLocked(q, now)
	vt := int(in.VisibilityTimeout)
	if vt == 0 {
		vt = q.intAttr("VisibilityTimeout", defaultVisibility)
	}
	rp, hasRedrive := q.redrive()
	var dlq *queue
	if hasRedrive {
		dlq = c.queueByArn(rp.DeadLetterTargetArn)
	}
	var out []sqstypes.Message
	var next time.Duration
	for _, m := range append([]*message(nil), q.msgs...) {
		if now.Before(m.visibleAt) {
			if d := m.visibleAt.Sub(now); next == 0 || d < next {
				next = d
			}
			continue
		}
		if len(out) == max {
			break
		}
		if dlq != nil && m.receives >= rp.MaxReceiveCount {
			q.remove(m)
			m.inFlight, m.visibleAt, m.origin = false, now, q.arn
			dlq.msgs = append(dlq.msgs, m)
			dlq.byID[m.id] = m
			c.metrics.Count("NumberOfMessagesDeadLettered", 1)
			c.broadcastLocked()
			continue
		}
		m.receives++
		m.seq++
		if m.firstRecv.IsZero() {
			m.firstRecv = now
		}
		m.inFlight = true
		m.visibleAt = now.Add(c.scaled(time.Duration(vt) * time.Second))
		out = append(out, c.render(q, m, in))
	}
	c.metrics.Count("NumberOfMessagesReceived", float64(len(out)))
	return out, next
}

// render builds the SDK message with the attributes the receiver asked for.
func (c *Cloud) render(q *queue, m *message, in *sqs.ReceiveMessageInput) sqstypes.Message {
	sys := map[string]string{
		"SenderId":                         c.account,
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receives),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstRecv.UnixMilli(), 10),
	}
	if m.traceHeader != "" {
		sys["AWSTraceHeader"] = m.traceHeader
	}
	want := map[string]bool{}
	//lint:ignore SA1019 callers still send the deprecated field and SQS still honours it
	for _, n := range in.AttributeNames {
		want[string(n)] = true
	}
	for _, n := range in.MessageSystemAttributeNames {
		want[string(n)] = true
	}
	attrs := map[string]string{}
	for k, v := range sys {
		if want["All"] || want[k] {
			attrs[k] = v
		}
	}
	ma := map[string]sqstypes.MessageAttributeValue{}
	for name, v := range m.attrs {
		for _, sel := range in.MessageAttributeNames {
			if sel == "All" || sel == ".*" || sel == name || (strings.HasSuffix(sel, ".*") && strings.HasPrefix(name, strings.TrimSuffix(sel, "*"))) {
				ma[name] = v
				break
			}
		}
	}
	out := sqstypes.Message{
		MessageId:     aws.String(m.id),
		ReceiptHandle: aws.String(encodeHandle(q.name, m.id, m.seq)),
		Body:          aws.String(m.body),
		MD5OfBody:     aws.String(md5Hex(m.body)),
	}
	if len(attrs) > 0 {
		out.Attributes = attrs
	}
	if len(ma) > 0 {
		out.MessageAttributes = ma
		out.MD5OfMessageAttributes = aws.String(md5OfAttributes(ma))
	}
	return out
}

// Receipt handles are opaque to callers; inside they name the queue, the
// message and which receive produced them.
func encodeHandle(queue, id string, seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(queue + "\x00" + id + "\x00" + strconv.Itoa(seq)))
}

func decodeHandle(h string) (queue, id string, seq int, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", "", 0, false
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 {
		return "", "", 0, false
	}
	seq, err = strconv.Atoi(parts[2])
	if err != nil {
		return "", "", 0, false
	}
	return parts[0], parts[1], seq, true
}

func errHandleInvalid(h string) error {
	return &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + h + "\" is not a valid receipt handle.")}
}

// deleteLocked applies AWS's documented rules: a handle from the most recent
// receive deletes the message; a message already gone is a success; an old
// handle (the message was received again since) succeeds without deleting.
func (c *Cloud) deleteLocked(q *queue, h string) error {
	qn, id, seq, ok := decodeHandle(h)
	if !ok || qn != q.name {
		return errHandleInvalid(h)
	}
	m := q.byID[id]
	if m == nil || seq != m.seq {
		return nil
	}
	q.remove(m)
	c.metrics.Count("NumberOfMessagesDeleted", 1)
	return nil
}

// DeleteMessage deletes a received message by receipt handle.
func (c *Cloud) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	const op = "DeleteMessage"
	if in == nil || in.QueueUrl == nil || in.ReceiptHandle == nil {
		return nil, opErr("SQS", op, required("DeleteMessageInput", "QueueUrl, ReceiptHandle"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	if err := c.deleteLocked(q, *in.ReceiptHandle); err != nil {
		return nil, opErr("SQS", op, err)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// DeleteMessageBatch deletes up to 10 messages, reporting each entry.
func (c *Cloud) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	const op = "DeleteMessageBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("DeleteMessageBatchInput", "QueueUrl, Entries"))
	}
	ids := make([]*string, len(in.Entries))
	for i := range in.Entries {
		ids[i] = in.Entries[i].Id
	}
	if err := checkBatch(ids); err != nil {
		return nil, opErr("SQS", op, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	out := &sqs.DeleteMessageBatchOutput{Successful: []sqstypes.DeleteMessageBatchResultEntry{}, Failed: []sqstypes.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		if err := c.deleteLocked(q, deref(e.ReceiptHandle)); err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// changeVisibilityLocked resets the visibility timeout of an in-flight
// message, counted from now; 0 makes it visible at once.
func (c *Cloud) changeVisibilityLocked(q *queue, h string, vt int32) error {
	if vt < 0 || vt > maxVisibility {
		return apiErr("InvalidParameterValue", "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", vt)
	}
	qn, id, seq, ok := decodeHandle(h)
	if !ok || qn != q.name {
		return errHandleInvalid(h)
	}
	m := q.byID[id]
	if m == nil || seq != m.seq {
		return apiErr("InvalidParameterValue", "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", h)
	}
	now := c.now()
	if !m.inFlight || !now.Before(m.visibleAt) {
		return &sqstypes.MessageNotInflight{Message: aws.String("The message referred to isn't in flight."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.MessageNotInflight")}
	}
	m.visibleAt = now.Add(c.scaled(time.Duration(vt) * time.Second))
	if vt == 0 {
		m.inFlight = false
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
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	if err := c.changeVisibilityLocked(q, *in.ReceiptHandle, in.VisibilityTimeout); err != nil {
		return nil, opErr("SQS", op, err)
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch changes up to 10 visibility timeouts.
func (c *Cloud) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	const op = "ChangeMessageVisibilityBatch"
	if in == nil || in.QueueUrl == nil || in.Entries == nil {
		return nil, opErr("SQS", op, required("ChangeMessageVisibilityBatchInput", "QueueUrl, Entries"))
	}
	ids := make([]*string, len(in.Entries))
	for i := range in.Entries {
		ids[i] = in.Entries[i].Id
	}
	if err := checkBatch(ids); err != nil {
		return nil, opErr("SQS", op, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, err := c.lookup(in.QueueUrl)
	if err != nil {
		return nil, opErr("SQS", op, err)
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{Successful: []sqstypes.ChangeMessageVisibilityBatchResultEntry{}, Failed: []sqstypes.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		if err := c.changeVisibilityLocked(q, deref(e.ReceiptHandle), e.VisibilityTimeout); err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, opErr("SQS", op, ErrClosed)
	}
	src := c.queueByArn(*in.SourceArn)
	if src == nil {
		return nil, opErr("SQS", op, &sqstypes.ResourceNotFoundException{Message: aws.String("The resource that you specified for the SourceArn parameter doesn't exist.")})
	}
	isDLQ := false
	for _, q := range c.queues {
		if rp, ok := q.redrive(); ok && rp.DeadLetterTargetArn == src.arn {
			isDLQ = true
		}
	}
	if !isDLQ {
		return nil, opErr("SQS", op, &sqstypes.UnsupportedOperation{Message: aws.String("Source queue must be configured as a Dead Letter Queue."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.UnsupportedOperation")})
	}
	var dst *queue
	if in.DestinationArn != nil {
		if dst = c.queueByArn(*in.DestinationArn); dst == nil {
			return nil, opErr("SQS", op, &sqstypes.ResourceNotFoundException{Message: aws.String("The resource that you specified for the DestinationArn parameter doesn't exist.")})
		}
	}
	now := c.now()
	entry := sqstypes.ListMessageMoveTasksResultEntry{
		TaskHandle:                        aws.String(base64.RawURLEncoding.EncodeToString([]byte(`{"taskId":"` + uuid.NewString() + `","sourceArn":"` + src.arn + `"}`))),
		SourceArn:                         aws.String(src.arn),
		DestinationArn:                    in.DestinationArn,
		MaxNumberOfMessagesPerSecond:      in.MaxNumberOfMessagesPerSecond,
		StartedTimestamp:                  now.UnixMilli(),
		ApproximateNumberOfMessagesToMove: aws.Int64(int64(len(src.msgs))),
		Status:                            aws.String("COMPLETED"),
	}
	var left []*message
	for _, m := range src.msgs {
		to := dst
		if to == nil {
			to = c.queueByArn(m.origin)
		}
		if to == nil {
			left = append(left, m)
			continue
		}
		delete(src.byID, m.id)
		*m = message{id: m.id, body: m.body, attrs: m.attrs, traceHeader: m.traceHeader, sent: m.sent, visibleAt: now}
		to.msgs = append(to.msgs, m)
		to.byID[m.id] = m
		entry.ApproximateNumberOfMessagesMoved++
	}
	src.msgs = left
	if len(left) > 0 {
		entry.Status = aws.String("FAILED")
		entry.FailureReason = aws.String(fmt.Sprintf("%d messages have no source queue to return to; set DestinationArn", len(left)))
	}
	c.moveTasks = append(c.moveTasks, &moveTask{entry: entry})
	c.broadcastLocked()
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: entry.TaskHandle}, nil
}

// ListMessageMoveTasks lists a source queue's move tasks, newest first
// (MaxResults defaults to 1 and is at most 10, as on AWS).
func (c *Cloud) ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, _ ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	const op = "ListMessageMoveTasks"
	if in == nil || in.SourceArn == nil {
		return nil, opErr("SQS", op, required("ListMessageMoveTasksInput", "SourceArn"))
	}
	n := 1
	if in.MaxResults != nil {
		n = int(*in.MaxResults)
	}
	if n < 1 || n > 10 {
		return nil, opErr("SQS", op, apiErr("InvalidParameterValue", "Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and 10.", n))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queueByArn(*in.SourceArn) == nil {
		return nil, opErr("SQS", op, &sqstypes.ResourceNotFoundException{Message: aws.String("The resource that you specified for the SourceArn parameter doesn't exist.")})
	}
	out := &sqs.ListMessageMoveTasksOutput{Results: []sqstypes.ListMessageMoveTasksResultEntry{}}
	for i := len(c.moveTasks) - 1; i >= 0 && len(out.Results) < n; i-- {
		if deref(c.moveTasks[i].entry.SourceArn) == *in.SourceArn {
			out.Results = append(out.Results, c.moveTasks[i].entry)
		}
	}
	return out, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is SQS's MD5OfMessageAttributes: for each attribute in
// name order, the length-prefixed name, the length-prefixed data type, a
// transport byte (1 string, 2 binary) and the length-prefixed value.
func md5OfAttributes(attrs map[string]sqstypes.MessageAttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := md5.New()
	put := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range names {
		a := attrs[name]
		put([]byte(name))
		put([]byte(deref(a.DataType)))
		if a.StringValue != nil {
			h.Write([]byte{1})
			put([]byte(*a.StringValue))
		} else {
			h.Write([]byte{2})
			put(a.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
