package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Topology is what the local cloud creates from template.yaml: every list is
// sorted by logical id, every value is resolved (no intrinsics remain), and
// references between resources are logical ids of this template.
type Topology struct {
	// StackName, Region and AccountID are the pseudo parameters used.
	StackName, Region, AccountID string
	// Parameters holds the effective value of every parameter that has one
	// (list parameters joined by ",").
	Parameters map[string]string
	// Queues, Buses, Rules, Functions, Topics, Tables and Alarms are the
	// resources of those types whose condition holds.
	Queues    []Queue
	Buses     []Bus
	Rules     []Rule
	Functions []Function
	Topics    []Topic
	Tables    []Table
	Alarms    []Alarm
	// APIs are the template's API Gateway APIs (SAM's Api and HttpApi).
	APIs []API
	// Subscriptions are the AWS::SNS::Subscription resources that deliver a
	// topic of this template to a queue of this template, or to an email
	// address.
	Subscriptions []Subscription
	// Outputs holds the resolved value of every output whose condition holds.
	Outputs map[string]string
}

// Queue is an AWS::SQS::Queue.
type Queue struct {
	// LogicalID is the resource's key in the template.
	LogicalID string
	// Name, URL and ARN follow the package's naming scheme.
	Name, URL, ARN string
	// VisibilityTimeout defaults to 30 s, as in SQS.
	VisibilityTimeout time.Duration
	DelaySeconds      int
	// MessageRetention defaults to 4 days, as in SQS.
	MessageRetention time.Duration
	// RedriveTarget is the logical id of the dead-letter queue ("" for none);
	// a message received MaxReceiveCount times moves there.
	RedriveTarget   string
	MaxReceiveCount int
	// SSE is true with SQS managed encryption or a KMS key.
	SSE bool
	// FIFO is FifoQueue (the name then ends in ".fifo"). ContentBasedDedup,
	// DeduplicationScope ("queue" or "messageGroup") and FifoThroughputLimit
	// ("perQueue" or "perMessageGroupId") are its FIFO settings, "" and false
	// when unset (SQS's defaults: queue and perQueue).
	FIFO                bool
	ContentBasedDedup   bool
	DeduplicationScope  string
	FifoThroughputLimit string
}

// Bus is an AWS::Events::EventBus.
type Bus struct {
	// LogicalID, Name and ARN follow the package's naming scheme.
	LogicalID, Name, ARN string
	// Archive is true when an AWS::Events::Archive records this bus;
	// ArchiveRetentionDays is its retention (0: indefinitely).
	Archive              bool
	ArchiveRetentionDays int
}

// API is an AWS::Serverless::Api (Kind "rest") or AWS::Serverless::HttpApi
// (Kind "http").
type API struct {
	LogicalID, Kind string
	// DetailedMetrics is per-method (REST MethodSettings MetricsEnabled) or
	// per-route (HTTP DefaultRouteSettings DetailedMetricsEnabled) metrics.
	DetailedMetrics bool
	// AccessLogFormat is the stage's access log format ("" for none).
	AccessLogFormat string
}

// Rule is an AWS::Events::Rule.
type Rule struct {
	// LogicalID and Name follow the package's naming scheme.
	LogicalID, Name string
	// Bus is the name of the bus the rule is on ("default" when unset);
	// BusLogicalID is its logical id when the bus is in this template.
	Bus, BusLogicalID string
	// Pattern is the resolved event pattern as JSON (nil for a schedule rule).
	Pattern json.RawMessage
	// State defaults to ENABLED.
	State   string
	Targets []Target
}

// Target is one target of a rule; exactly one of QueueLogicalID,
// TopicLogicalID and FunctionLogicalID is set. Input transformation
// (Input, InputPath, InputTransformer) is not modelled.
type Target struct {
	// ID is the target's Id within its rule.
	ID string
	// QueueLogicalID, TopicLogicalID or FunctionLogicalID names the target.
	QueueLogicalID, TopicLogicalID, FunctionLogicalID string
	// MaxRetryAttempts and MaxEventAge default to EventBridge's 185 and 24 h.
	MaxRetryAttempts int
	MaxEventAge      time.Duration
	// DLQLogicalID is the queue that receives events the target could not
	// take ("" for none).
	DLQLogicalID string
	// MessageGroupID is SqsParameters.MessageGroupId: the message group of
	// every event sent to a FIFO queue target.
	MessageGroupID string
}

// Function is an AWS::Serverless::Function with SAM's Globals applied.
type Function struct {
	// LogicalID is the template key; Name the physical function name.
	LogicalID, Name string
	// CodeURI is the local code path ("" for an S3 location); Handler and
	// Runtime are as deployed.
	CodeURI string
	Handler string
	Runtime string
	// Timeout defaults to 3 s and MemorySize to 128 MB, as in Lambda.
	Timeout    time.Duration
	MemorySize int
	// Env holds the resolved environment: values that reference resources are
	// their local physical names, URLs or ARNs.
	Env            map[string]string
	SQSEvents      []SQSMapping
	SNSEvents      []SNSMapping
	APIEvents      []APIEvent
	ScheduleEvents []ScheduleEvent
	// OnFailureQueue is the logical id of the queue of the on-failure
	// destination for asynchronous invocations ("" for none).
	OnFailureQueue string
	// ReservedConcurrency is ReservedConcurrentExecutions (0: none
	// reserved).
	ReservedConcurrency int
	// Tracing is the X-Ray mode (Active, PassThrough; "" when unset).
	Tracing string
	// MaxAsyncRetries is EventInvokeConfig.MaximumRetryAttempts (Lambda's
	// default: 2).
	MaxAsyncRetries int
}

// SQSMapping is an SQS event source of a function. Disabled mappings are
// left out.
type SQSMapping struct {
	// Name is the event's key in the function's Events.
	Name string
	// Queue is the logical id of the queue.
	Queue string
	// BatchSize defaults to 10.
	BatchSize      int
	BatchingWindow time.Duration
	// ReportBatchItemFailures is true when FunctionResponseTypes has it.
	ReportBatchItemFailures bool
	// MaxConcurrency is ScalingConfig.MaximumConcurrency (0: unlimited).
	MaxConcurrency int
}

// ScheduleEvent is a Schedule (EventBridge rule) or ScheduleV2 (EventBridge
// Scheduler) event of a function. Disabled schedules are left out.
type ScheduleEvent struct {
	// Name is the event's key in the function's Events.
	Name string
	// Expression is "rate(N unit)" or "cron(...)".
	Expression string
	// Every is the period of a rate expression (0 for cron).
	Every time.Duration
}

// SNSMapping is an SNS subscription of a function.
type SNSMapping struct {
	// Name is the event's key in the function's Events.
	Name string
	// Topic is the logical id of the topic.
	Topic string
}

// APIEvent is an API Gateway route to a function.
type APIEvent struct {
	// Name is the event's key in the function's Events.
	Name string
	// API is the logical id of the API (RestApiId/ApiId), "" for SAM's
	// implicit API.
	API string
	// Path and Method (upper case) select the route.
	Path   string
	Method string
}

// Topic is an AWS::SNS::Topic.
type Topic struct {
	// LogicalID, Name and ARN follow the package's naming scheme.
	LogicalID, Name, ARN string
}

// Subscription is an AWS::SNS::Subscription of a topic to a queue of this
// template (protocol sqs) or to an email address (protocol email: `linegate
// local` records what it would send); subscriptions of other protocols or
// to resources outside the template are not modelled and make Load fail.
type Subscription struct {
	// LogicalID is the resource's key in the template.
	LogicalID string
	// Protocol is "sqs" or "email".
	Protocol string
	// Topic and Queue are logical ids of this template (Queue "" for email).
	Topic, Queue string
	// Endpoint is the email address of an email subscription.
	Endpoint string
	// FilterPolicy is the subscription's filter policy as JSON (nil: every
	// message is delivered).
	FilterPolicy json.RawMessage
	// RawMessageDelivery is true when SNS delivers the bare message instead
	// of its JSON envelope.
	RawMessageDelivery bool
}

// Table is an AWS::DynamoDB::Table or AWS::Serverless::SimpleTable.
type Table struct {
	// LogicalID and Name follow the package's naming scheme.
	LogicalID, Name string
	// HashKey is the partition key attribute; TTLAttribute the TTL attribute
	// when TTL is enabled.
	HashKey, TTLAttribute string
	// KMS is true when the table is encrypted with a KMS key
	// (SSESpecification.SSEEnabled), false for DynamoDB's own key.
	KMS bool
}

// Alarm is an AWS::CloudWatch::Alarm on a single metric.
type Alarm struct {
	// LogicalID and Name follow the package's naming scheme.
	LogicalID, Name string
	// Namespace, MetricName, Dimensions (resolved) and Statistic (or
	// ExtendedStatistic) select the metric.
	Namespace, MetricName string
	Dimensions            map[string]string
	Statistic             string
	// Period is the length of one evaluation period.
	Period            time.Duration
	EvaluationPeriods int
	// DatapointsToAlarm defaults to EvaluationPeriods.
	DatapointsToAlarm int
	// Threshold, ComparisonOperator and TreatMissingData (default "missing")
	// are as in CloudWatch.
	Threshold          float64
	ComparisonOperator string
	TreatMissingData   string
	// AlarmActions and OKActions are logical ids of topics of this template;
	// actions on anything else are kept, as ARNs, in ExternalActions.
	AlarmActions, OKActions []string
	ExternalActions         []string
}

// reader reads typed values out of resolved properties, keeping the first
// error together with the path of the value.
type reader struct {
	path string
	m    map[string]any
	err  *error
}

func newReader(path string, m map[string]any) reader {
	var err error
	return reader{path: path, m: m, err: &err}
}

func (r reader) fail(key, format string, a ...any) {
	if *r.err == nil {
		*r.err = fmt.Errorf("%s.%s: %w: %s", r.path, key, ErrSyntax, fmt.Sprintf(format, a...))
	}
}

func (r reader) has(key string) bool { _, ok := r.m[key]; return ok }

func (r reader) str(key string) string {
	v, ok := r.m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := scalarString(v)
	if !ok {
		r.fail(key, "want a string, got %s", describe(v))
	}
	return s
}

func (r reader) num(key string, def float64) float64 {
	v, ok := r.m[key]
	if !ok || v == nil {
		return def
	}
	s, _ := scalarString(v)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		r.fail(key, "want a number, got %s", describe(v))
		return def
	}
	return f
}

func (r reader) int(key string, def int) int {
	f := r.num(key, float64(def))
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		r.fail(key, "want an integer, got %v", f)
		return def
	}
	return int(f)
}

func (r reader) seconds(key string, def int) time.Duration {
	return time.Duration(r.int(key, def)) * time.Second
}

func (r reader) bool(key string) bool {
	v, ok := r.m[key]
	if !ok || v == nil {
		return false
	}
	s, _ := scalarString(v)
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	}
	r.fail(key, "want a boolean, got %s", describe(v))
	return false
}

// sub reads a nested map; a JSON object given as a string (as CloudFormation
// allows for RedrivePolicy and EventPattern) is decoded.
func (r reader) sub(key string) reader {
	out := reader{path: r.path + "." + key, m: map[string]any{}, err: r.err}
	v, ok := r.m[key]
	if !ok || v == nil {
		return out
	}
	switch x := v.(type) {
	case map[string]any:
		out.m = x
	case string:
		if err := json.Unmarshal([]byte(x), &out.m); err != nil {
			r.fail(key, "want a JSON object: %v", err)
		}
	default:
		r.fail(key, "want a mapping, got %s", describe(v))
	}
	return out
}

func (r reader) list(key string) []any {
	v, ok := r.m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		r.fail(key, "want a list, got %s", describe(v))
	}
	return l
}

// mappings reads a list of mappings, one reader each (sharing r's error);
// an item that is not a mapping fails r and is skipped.
func (r reader) mappings(key string) []reader {
	var out []reader
	for i, v := range r.list(key) {
		m, ok := v.(map[string]any)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", key, i), "want a mapping")
			continue
		}
		out = append(out, reader{path: fmt.Sprintf("%s.%s[%d]", r.path, key, i), m: m, err: r.err})
	}
	return out
}

func (r reader) strings(key string) []string {
	var out []string
	for i, v := range r.list(key) {
		s, ok := scalarString(v)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", key, i), "want a string, got %s", describe(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

// index maps ARNs (and names) of this template's resources to logical ids.
type index struct {
	queues, topics, functions, buses map[string]string
}

func (e *evaluator) buildIndex() (index, error) {
	ix := index{queues: map[string]string{}, topics: map[string]string{}, functions: map[string]string{}, buses: map[string]string{}}
	for _, r := range e.enabledResources() {
		id := r.id
		var m map[string]string
		attr := "Arn"
		switch r.typ {
		case "AWS::SQS::Queue":
			m = ix.queues
		case "AWS::SNS::Topic":
			m, attr = ix.topics, "TopicArn"
		case "AWS::Serverless::Function", "AWS::Lambda::Function":
			m = ix.functions
		case "AWS::Events::EventBus":
			m = ix.buses
		default:
			continue
		}
		name, err := e.physicalName(r)
		if err != nil {
			return ix, err
		}
		arn, err := kinds[r.typ].attrs[attr](e, r, name)
		if err != nil {
			return ix, err
		}
		m[arn] = id
		m[name] = id
	}
	return ix, nil
}

func (e *evaluator) topology(doc map[string]any) (*Topology, error) {
	t := &Topology{
		StackName:  e.cfg.stack,
		Region:     e.cfg.region,
		AccountID:  e.cfg.account,
		Parameters: map[string]string{},
		Outputs:    map[string]string{},
	}
	for name, v := range e.params {
		switch x := v.(type) {
		case string:
			t.Parameters[name] = x
		case []any:
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i], _ = scalarString(p)
			}
			t.Parameters[name] = strings.Join(parts, ",")
		}
	}
	// Evaluate everything first, so any bad reference is reported.
	for _, r := range e.enabledResources() {
		if _, err := e.props(r); err != nil {
			return nil, err
		}
	}
	if err := e.outputs(doc, t); err != nil {
		return nil, err
	}
	ix, err := e.buildIndex()
	if err != nil {
		return nil, err
	}
	archived := map[string]int{} // bus ARN -> retention days + 1
	for _, r := range e.enabledResources() {
		if r.typ == "AWS::Events::Archive" {
			ap := newReader("Resources."+r.id+".Properties", r.resolved)
			archived[ap.str("SourceArn")] = ap.int("RetentionDays", 0) + 1
		}
	}
	for _, r := range e.enabledResources() {
		id := r.id
		name, err := e.physicalName(r)
		if err != nil {
			return nil, err
		}
		p := newReader("Resources."+id+".Properties", r.resolved)
		switch r.typ {
		case "AWS::SQS::Queue":
			t.Queues = append(t.Queues, e.queue(r, name, p, ix))
		case "AWS::Events::EventBus":
			arn, _ := busARN(e, r, name)
			t.Buses = append(t.Buses, Bus{LogicalID: id, Name: name, ARN: arn, Archive: archived[arn] > 0, ArchiveRetentionDays: max(archived[arn]-1, 0)})
		case "AWS::Serverless::HttpApi":
			t.APIs = append(t.APIs, API{LogicalID: id, Kind: "http", DetailedMetrics: p.sub("DefaultRouteSettings").bool("DetailedMetricsEnabled"),
				AccessLogFormat: p.sub("AccessLogSettings").str("Format")})
		case "AWS::Serverless::Api":
			api := API{LogicalID: id, Kind: "rest", AccessLogFormat: p.sub("AccessLogSetting").str("Format")}
			for _, ms := range p.mappings("MethodSettings") {
				api.DetailedMetrics = api.DetailedMetrics || ms.bool("MetricsEnabled")
			}
			t.APIs = append(t.APIs, api)
		case "AWS::Events::Rule":
			rule, err := e.rule(r, name, p, ix)
			if err != nil {
				return nil, err
			}
			t.Rules = append(t.Rules, rule)
		case "AWS::Serverless::Function":
			fn, err := e.function(r, name, p, ix)
			if err != nil {
				return nil, err
			}
			t.Functions = append(t.Functions, fn)
		case "AWS::SNS::Topic":
			arn, _ := topicARN(e, r, name)
			t.Topics = append(t.Topics, Topic{LogicalID: id, Name: name, ARN: arn})
		case "AWS::DynamoDB::Table":
			t.Tables = append(t.Tables, table(r, name, p))
		case "AWS::Serverless::SimpleTable":
			key := p.sub("PrimaryKey").str("Name")
			if key == "" {
				key = "id"
			}
			t.Tables = append(t.Tables, Table{LogicalID: id, Name: name, HashKey: key})
		case "AWS::CloudWatch::Alarm":
			t.Alarms = append(t.Alarms, alarm(r, name, p, ix))
		case "AWS::SNS::Subscription":
			t.Subscriptions = append(t.Subscriptions, subscription(r, p, ix))
		}
		if *p.err != nil {
			return nil, *p.err
		}
	}
	if err := checkFIFO(t); err != nil {
		return nil, err
	}
	return t, nil
}

// checkFIFO applies the rules AWS enforces between a FIFO queue and what
// uses it: a FIFO queue's dead-letter queue is FIFO; Lambda takes at most
// 10 messages and no batching window from one; an EventBridge target on one
// names a message group, and the queue deduplicates by content.
func checkFIFO(t *Topology) error {
	queues := map[string]Queue{}
	for _, q := range t.Queues {
		queues[q.LogicalID] = q
	}
	for _, q := range t.Queues {
		if dlq, ok := queues[q.RedriveTarget]; ok && dlq.FIFO != q.FIFO {
			return fmt.Errorf("Resources.%s.Properties.RedrivePolicy: %w: the dead-letter queue %s must be of the same type (FIFO or standard)", q.LogicalID, ErrSyntax, dlq.LogicalID)
		}
	}
	for _, f := range t.Functions {
		for _, m := range f.SQSEvents {
			if !queues[m.Queue].FIFO {
				continue
			}
			if m.BatchingWindow > 0 || m.BatchSize > 10 {
				return fmt.Errorf("Resources.%s.Properties.Events.%s: %w: Lambda takes at most 10 messages and no batching window from a FIFO queue", f.LogicalID, m.Name, ErrSyntax)
			}
		}
	}
	for _, r := range t.Rules {
		for _, tg := range r.Targets {
			q, ok := queues[tg.QueueLogicalID]
			if !ok || !q.FIFO {
				continue
			}
			if tg.MessageGroupID == "" || !q.ContentBasedDedup {
				return fmt.Errorf("Resources.%s.Properties.Targets: %w: target %s is a FIFO queue: it needs SqsParameters.MessageGroupId, and the queue ContentBasedDeduplication", r.LogicalID, ErrSyntax, tg.ID)
			}
		}
	}
	return nil
}

func (e *evaluator) outputs(doc map[string]any, t *Topology) error {
	outs, err := section(doc, "Outputs")
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(outs) {
		path := "Outputs." + name
		o, ok := outs[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %w: want a mapping", path, ErrSyntax)
		}
		if c, ok := o["Condition"].(string); ok {
			hold, err := e.condition(path+".Condition", c)
			if err != nil {
				return err
			}
			if !hold {
				continue
			}
		}
		v, err := e.eval(path+".Value", o["Value"])
		if err != nil {
			return err
		}
		s, ok := scalarString(v)
		if !ok {
			return fmt.Errorf("%s.Value: %w: want a string, got %s", path, ErrSyntax, describe(v))
		}
		t.Outputs[name] = s
	}
	return nil
}

func (e *evaluator) queue(r *resource, name string, p reader, ix index) Queue {
	arn, _ := queueARN(e, r, name)
	q := Queue{
		LogicalID:           r.id,
		Name:                name,
		URL:                 e.queueURL(name),
		ARN:                 arn,
		VisibilityTimeout:   p.seconds("VisibilityTimeout", 30),
		DelaySeconds:        p.int("DelaySeconds", 0),
		MessageRetention:    p.seconds("MessageRetentionPeriod", 345600),
		SSE:                 p.bool("SqsManagedSseEnabled") || p.str("KmsMasterKeyId") != "",
		FIFO:                p.bool("FifoQueue"),
		ContentBasedDedup:   p.bool("ContentBasedDeduplication"),
		DeduplicationScope:  p.str("DeduplicationScope"),
		FifoThroughputLimit: p.str("FifoThroughputLimit"),
	}
	if !q.FIFO && (q.ContentBasedDedup || q.DeduplicationScope != "" || q.FifoThroughputLimit != "") {
		p.fail("FifoQueue", "ContentBasedDeduplication, DeduplicationScope and FifoThroughputLimit need FifoQueue: true")
	}
	if p.has("RedrivePolicy") {
		rp := p.sub("RedrivePolicy")
		target := rp.str("deadLetterTargetArn")
		q.RedriveTarget = ix.queues[target]
		if q.RedriveTarget == "" {
			rp.fail("deadLetterTargetArn", "%q is not a queue of this template", target)
		}
		q.MaxReceiveCount = rp.int("maxReceiveCount", 0)
		if q.MaxReceiveCount < 1 {
			rp.fail("maxReceiveCount", "want at least 1")
		}
	}
	return q
}

func (e *evaluator) rule(r *resource, name string, p reader, ix index) (Rule, error) {
	bus, err := e.ruleBus(r)
	if err != nil {
		return Rule{}, err
	}
	rule := Rule{LogicalID: r.id, Name: name, Bus: bus, BusLogicalID: ix.buses[bus], State: p.str("State")}
	if rule.State == "" {
		rule.State = "ENABLED"
	}
	if p.has("EventPattern") {
		pat := p.sub("EventPattern")
		raw, err := json.Marshal(pat.m)
		if err != nil {
			return Rule{}, fmt.Errorf("%s: %w: %v", pat.path, ErrSyntax, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return Rule{}, fmt.Errorf("%s: %w: %v", pat.path, ErrSyntax, err)
		}
		rule.Pattern = buf.Bytes()
	}
	for _, tp := range p.mappings("Targets") {
		arn := tp.str("Arn")
		tgt := Target{
			ID:                tp.str("Id"),
			QueueLogicalID:    ix.queues[arn],
			TopicLogicalID:    ix.topics[arn],
			FunctionLogicalID: ix.functions[arn],
		}
		if tgt.QueueLogicalID == "" && tgt.TopicLogicalID == "" && tgt.FunctionLogicalID == "" {
			tp.fail("Arn", "%q is not a queue, topic or function of this template", arn)
		}
		tgt.MessageGroupID = tp.sub("SqsParameters").str("MessageGroupId")
		retry := tp.sub("RetryPolicy")
		tgt.MaxRetryAttempts = retry.int("MaximumRetryAttempts", 185)
		tgt.MaxEventAge = retry.seconds("MaximumEventAgeInSeconds", 86400)
		if tp.has("DeadLetterConfig") {
			dlq := tp.sub("DeadLetterConfig")
			darn := dlq.str("Arn")
			if tgt.DLQLogicalID = ix.queues[darn]; tgt.DLQLogicalID == "" {
				dlq.fail("Arn", "%q is not a queue of this template", darn)
			}
		}
		rule.Targets = append(rule.Targets, tgt)
	}
	sort.Slice(rule.Targets, func(i, j int) bool { return rule.Targets[i].ID < rule.Targets[j].ID })
	return rule, *p.err
}

func (e *evaluator) function(r *resource, name string, p reader, ix index) (Function, error) {
	fn := Function{
		LogicalID:           r.id,
		Name:                name,
		Handler:             p.str("Handler"),
		Runtime:             p.str("Runtime"),
		Timeout:             p.seconds("Timeout", 3),
		MemorySize:          p.int("MemorySize", 128),
		ReservedConcurrency: p.int("ReservedConcurrentExecutions", 0),
		Tracing:             p.str("Tracing"),
		Env:                 map[string]string{},
		MaxAsyncRetries:     2,
	}
	if _, isMap := r.resolved["CodeUri"].(map[string]any); !isMap { // a map is an S3 location: nothing to build locally
		fn.CodeURI = p.str("CodeUri")
	}
	vars := p.sub("Environment").sub("Variables")
	for _, k := range sortedKeys(vars.m) {
		fn.Env[k] = vars.str(k)
	}
	if p.has("EventInvokeConfig") {
		eic := p.sub("EventInvokeConfig")
		fn.MaxAsyncRetries = eic.int("MaximumRetryAttempts", 2)
		onFailure := eic.sub("DestinationConfig").sub("OnFailure")
		if onFailure.str("Type") == "SQS" {
			dest := onFailure.str("Destination")
			if fn.OnFailureQueue = ix.queues[dest]; fn.OnFailureQueue == "" {
				onFailure.fail("Destination", "%q is not a queue of this template", dest)
			}
		}
	}
	events := p.sub("Events")
	for _, evName := range sortedKeys(events.m) {
		ev := events.sub(evName)
		props := ev.sub("Properties")
		switch typ := ev.str("Type"); typ {
		case "SQS":
			if props.has("Enabled") && !props.bool("Enabled") {
				continue
			}
			queue := props.str("Queue")
			m := SQSMapping{
				Name:           evName,
				Queue:          ix.queues[queue],
				BatchSize:      props.int("BatchSize", 10),
				BatchingWindow: props.seconds("MaximumBatchingWindowInSeconds", 0),
				MaxConcurrency: props.sub("ScalingConfig").int("MaximumConcurrency", 0),
			}
			if m.Queue == "" {
				props.fail("Queue", "%q is not a queue of this template", queue)
			}
			for _, rt := range props.strings("FunctionResponseTypes") {
				if rt == "ReportBatchItemFailures" {
					m.ReportBatchItemFailures = true
				}
			}
			fn.SQSEvents = append(fn.SQSEvents, m)
		case "SNS":
			topic := props.str("Topic")
			m := SNSMapping{Name: evName, Topic: ix.topics[topic]}
			if m.Topic == "" {
				props.fail("Topic", "%q is not a topic of this template", topic)
			}
			fn.SNSEvents = append(fn.SNSEvents, m)
		case "Schedule", "ScheduleV2":
			if props.has("Enabled") && !props.bool("Enabled") {
				continue
			}
			if st := props.str("State"); st == "DISABLED" {
				continue
			}
			expr := props.str("Schedule")
			if typ == "ScheduleV2" {
				expr = props.str("ScheduleExpression")
			}
			every, err := RateOf(expr)
			if err != nil {
				props.fail("Schedule", "%v", err)
			}
			fn.ScheduleEvents = append(fn.ScheduleEvents, ScheduleEvent{Name: evName, Expression: expr, Every: every})
		case "Api", "HttpApi":
			api := props.str("RestApiId")
			if typ == "HttpApi" {
				api = props.str("ApiId")
			}
			apiID := ""
			if api != "" {
				for _, id := range sortedKeys(e.resources) {
					if strings.ToLower(id) == api {
						apiID = id
					}
				}
				if apiID == "" {
					props.fail("RestApiId", "%q is not an API of this template", api)
				}
			}
			fn.APIEvents = append(fn.APIEvents, APIEvent{
				Name: evName, API: apiID, Path: props.str("Path"), Method: strings.ToUpper(props.str("Method")),
			})
		default:
			if *p.err == nil {
				*p.err = fmt.Errorf("%s.Type: %w event type %q", ev.path, ErrUnsupported, typ)
			}
		}
	}
	return fn, *p.err
}

func subscription(r *resource, p reader, ix index) Subscription {
	s := Subscription{LogicalID: r.id, RawMessageDelivery: p.bool("RawMessageDelivery"), Protocol: p.str("Protocol")}
	topic := p.str("TopicArn")
	if s.Topic = ix.topics[topic]; s.Topic == "" {
		p.fail("TopicArn", "%q is not a topic of this template", topic)
	}
	if p.has("FilterPolicy") {
		if b, err := json.Marshal(p.m["FilterPolicy"]); err == nil {
			s.FilterPolicy = b
		}
	}
	endpoint := p.str("Endpoint")
	switch s.Protocol {
	case "sqs":
		if s.Queue = ix.queues[endpoint]; s.Queue == "" {
			p.fail("Endpoint", "%q is not a queue of this template", endpoint)
		}
	case "email":
		if !strings.Contains(endpoint, "@") {
			p.fail("Endpoint", "%q is not an email address", endpoint)
		}
		s.Endpoint = endpoint
	default:
		*p.err = fmt.Errorf("%s.Protocol: %w protocol %q (only sqs and email subscriptions run locally)", p.path, ErrUnsupported, s.Protocol)
	}
	return s
}

func table(r *resource, name string, p reader) Table {
	t := Table{LogicalID: r.id, Name: name}
	for _, k := range p.mappings("KeySchema") {
		if k.str("KeyType") == "HASH" {
			t.HashKey = k.str("AttributeName")
		}
	}
	if ttl := p.sub("TimeToLiveSpecification"); ttl.bool("Enabled") {
		t.TTLAttribute = ttl.str("AttributeName")
	}
	t.KMS = p.sub("SSESpecification").bool("SSEEnabled")
	return t
}

func alarm(r *resource, name string, p reader, ix index) Alarm {
	a := Alarm{
		LogicalID:          r.id,
		Name:               name,
		Namespace:          p.str("Namespace"),
		MetricName:         p.str("MetricName"),
		Dimensions:         map[string]string{},
		Statistic:          p.str("Statistic"),
		Period:             p.seconds("Period", 0),
		EvaluationPeriods:  p.int("EvaluationPeriods", 1),
		Threshold:          p.num("Threshold", 0),
		ComparisonOperator: p.str("ComparisonOperator"),
		TreatMissingData:   p.str("TreatMissingData"),
	}
	if a.Statistic == "" {
		a.Statistic = p.str("ExtendedStatistic")
	}
	if a.TreatMissingData == "" {
		a.TreatMissingData = "missing"
	}
	a.DatapointsToAlarm = p.int("DatapointsToAlarm", a.EvaluationPeriods)
	for _, d := range p.mappings("Dimensions") {
		a.Dimensions[d.str("Name")] = d.str("Value")
	}
	actions := func(key string) []string {
		var out []string
		for _, arn := range p.strings(key) {
			if id, ok := ix.topics[arn]; ok {
				out = append(out, id)
			} else {
				a.ExternalActions = append(a.ExternalActions, arn)
			}
		}
		return out
	}
	a.AlarmActions = actions("AlarmActions")
	a.OKActions = actions("OKActions")
	return a
}

// RateOf returns the period of a schedule expression: "rate(15 minutes)"
// is 15 minutes; a cron(...) expression has no fixed period and gives 0.
func RateOf(expr string) (time.Duration, error) {
	if strings.HasPrefix(expr, "cron(") && strings.HasSuffix(expr, ")") {
		return 0, nil
	}
	inner, ok := strings.CutPrefix(expr, "rate(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return 0, fmt.Errorf("schedule %q is neither rate(...) nor cron(...)", expr)
	}
	n, unit, _ := strings.Cut(strings.TrimSuffix(inner, ")"), " ")
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("schedule %q: the rate must be a positive integer", expr)
	}
	per := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour,
		"day": 24 * time.Hour, "days": 24 * time.Hour}[unit]
	if per == 0 {
		return 0, fmt.Errorf("schedule %q: the unit must be minute(s), hour(s) or day(s)", expr)
	}
	return time.Duration(v) * per, nil
}
