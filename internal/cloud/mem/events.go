package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/linegate/linegate/internal/cloud/pattern"
)

// EventBridge limits: entries per PutEvents call, the total entry size of a
// call (computed as the user guide's "Calculating PutEvents event entry
// size" describes; the API reference gives 1 MB), and targets per rule.
const (
	maxPutEntries    = 10
	maxPutEventsSize = 1 << 20
	maxTargets       = 5
)

type bus struct {
	name, arn string
	rules     map[string]*rule
	order     []string // rule names in creation order, for deterministic delivery
}

type rule struct {
	name, arn, bus string
	description    string
	eventPattern   string
	schedule       string
	compiled       *pattern.Pattern
	state          ebtypes.RuleState
	targets        []ebtypes.Target
}

// busName accepts a bus name or ARN; empty means "default".
func busName(s *string) string {
	n := deref(s)
	if n == "" {
		return "default"
	}
	if i := strings.LastIndex(n, ":event-bus/"); strings.HasPrefix(n, "arn:") && i >= 0 {
		return n[i+len(":event-bus/"):]
	}
	return n
}

func errBusNotFound(name string) error {
	return &ebtypes.ResourceNotFoundException{Message: aws.String("Event bus " + name + " does not exist.")}
}

// CreateEventBus creates a custom bus; an existing name fails with
// ResourceAlreadyExistsException.
func (c *Cloud) CreateEventBus(ctx context.Context, in *eventbridge.CreateEventBusInput, _ ...func(*eventbridge.Options)) (*eventbridge.CreateEventBusOutput, error) {
	const op = "CreateEventBus"
	if in == nil || in.Name == nil {
		return nil, opErr("EventBridge", op, required("CreateEventBusInput", "Name"))
	}
	name := *in.Name
	return locked(c, "EventBridge", op, func() (*eventbridge.CreateEventBusOutput, error) {
		if name == "" || name == "default" || strings.Contains(name, "/") || len(name) > 256 {
			return nil, apiErr("ValidationException", "Event bus name %q is not valid.", name)
		}
		if _, ok := c.buses[name]; ok {
			return nil, &ebtypes.ResourceAlreadyExistsException{Message: aws.String("Event bus " + name + " already exists.")}
		}
		b := &bus{name: name, arn: c.busArn(name), rules: map[string]*rule{}}
		c.buses[name] = b
		return &eventbridge.CreateEventBusOutput{EventBusArn: aws.String(b.arn), Description: in.Description, DeadLetterConfig: in.DeadLetterConfig}, nil
	})
}

func (c *Cloud) ruleArn(b *bus, name string) string {
	if b.name == "default" {
		return fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", c.region, c.account, name)
	}
	return fmt.Sprintf("arn:aws:events:%s:%s:rule/%s/%s", c.region, c.account, b.name, name)
}

// PutRule creates or updates a rule. The pattern is compiled with
// cloud/pattern; an invalid one fails with InvalidEventPatternException.
// A ScheduleExpression is stored but never fires.
func (c *Cloud) PutRule(ctx context.Context, in *eventbridge.PutRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error) {
	const op = "PutRule"
	if in == nil || in.Name == nil {
		return nil, opErr("EventBridge", op, required("PutRuleInput", "Name"))
	}
	if in.EventPattern == nil && in.ScheduleExpression == nil {
		return nil, opErr("EventBridge", op, apiErr("ValidationException", "Parameter(s) EventPattern or ScheduleExpression must be specified."))
	}
	var compiled *pattern.Pattern
	if in.EventPattern != nil {
		p, err := pattern.Compile([]byte(*in.EventPattern))
		if err != nil {
			return nil, opErr("EventBridge", op, &ebtypes.InvalidEventPatternException{Message: aws.String("Event pattern is not valid. Reason: " + err.Error())})
		}
		compiled = p
	}
	state := in.State
	switch state {
	case "":
		state = ebtypes.RuleStateEnabled
	case ebtypes.RuleStateEnabled, ebtypes.RuleStateDisabled:
	default:
		return nil, opErr("EventBridge", op, apiErr("ValidationException", "State %q is not valid: use ENABLED or DISABLED.", state))
	}
	return locked(c, "EventBridge", op, func() (*eventbridge.PutRuleOutput, error) {
		bn := busName(in.EventBusName)
		b, ok := c.buses[bn]
		if !ok {
			return nil, errBusNotFound(bn)
		}
		r, ok := b.rules[*in.Name]
		if !ok {
			r = &rule{name: *in.Name, arn: c.ruleArn(b, *in.Name), bus: b.name}
			b.rules[r.name] = r
			b.order = append(b.order, r.name)
		}
		r.description, r.eventPattern, r.schedule = deref(in.Description), deref(in.EventPattern), deref(in.ScheduleExpression)
		r.compiled, r.state = compiled, state
		return &eventbridge.PutRuleOutput{RuleArn: aws.String(r.arn)}, nil
	})
}

// onRule runs fn on the named rule of the bus as operation op (see
// locked); an unknown bus or rule fails with ResourceNotFoundException.
func onRule[O any](c *Cloud, op string, busRef, name *string, fn func(r *rule) (*O, error)) (*O, error) {
	return locked(c, "EventBridge", op, func() (*O, error) {
		bn := busName(busRef)
		b, ok := c.buses[bn]
		if !ok {
			return nil, errBusNotFound(bn)
		}
		r, ok := b.rules[deref(name)]
		if !ok {
			return nil, &ebtypes.ResourceNotFoundException{Message: aws.String("Rule " + deref(name) + " does not exist on EventBus " + bn + ".")}
		}
		return fn(r)
	})
}

// DescribeRule reports a rule as PutRule stored it.
func (c *Cloud) DescribeRule(ctx context.Context, in *eventbridge.DescribeRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error) {
	const op = "DescribeRule"
	if in == nil || in.Name == nil {
		return nil, opErr("EventBridge", op, required("DescribeRuleInput", "Name"))
	}
	return onRule(c, op, in.EventBusName, in.Name, func(r *rule) (*eventbridge.DescribeRuleOutput, error) {
		return &eventbridge.DescribeRuleOutput{
			Arn: aws.String(r.arn), Name: aws.String(r.name), EventBusName: aws.String(r.bus), State: r.state,
			Description: optional(r.description), EventPattern: optional(r.eventPattern), ScheduleExpression: optional(r.schedule),
			CreatedBy: aws.String(c.account),
		}, nil
	})
}

// PutTargets adds or replaces (by Id) a rule's targets: SQS queue or SNS
// topic ARNs, with optional Input or InputPath ("$" or "$.a.b"), RetryPolicy
// and DeadLetterConfig. A rule holds at most 5 targets. InputTransformer is
// not supported and is reported as a failed entry.
func (c *Cloud) PutTargets(ctx context.Context, in *eventbridge.PutTargetsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error) {
	const op = "PutTargets"
	if in == nil || in.Rule == nil || len(in.Targets) == 0 {
		return nil, opErr("EventBridge", op, required("PutTargetsInput", "Rule, Targets"))
	}
	return onRule(c, op, in.EventBusName, in.Rule, func(r *rule) (*eventbridge.PutTargetsOutput, error) {
		out := &eventbridge.PutTargetsOutput{FailedEntries: []ebtypes.PutTargetsResultEntry{}}
		for _, t := range in.Targets {
			if msg := checkTarget(t); msg != "" {
				out.FailedEntries = append(out.FailedEntries, ebtypes.PutTargetsResultEntry{TargetId: t.Id, ErrorCode: aws.String("ValidationException"), ErrorMessage: aws.String(msg)})
				continue
			}
			replaced := false
			for i := range r.targets {
				if deref(r.targets[i].Id) == *t.Id {
					r.targets[i], replaced = t, true
				}
			}
			if !replaced {
				if len(r.targets) >= maxTargets {
					return nil, &ebtypes.LimitExceededException{Message: aws.String("The requested resource exceeds the maximum number allowed.")}
				}
				r.targets = append(r.targets, t)
			}
		}
		out.FailedEntryCount = int32(len(out.FailedEntries))
		return out, nil
	})
}

// checkTarget returns why PutTargets refuses t (its ValidationException
// message), or "".
func checkTarget(t ebtypes.Target) string {
	switch {
	case deref(t.Id) == "" || deref(t.Arn) == "":
		return "Targets need an Id and an Arn."
	case t.InputTransformer != nil:
		return "mem: InputTransformer is not supported."
	case t.Input != nil && !json.Valid([]byte(*t.Input)):
		return "Input is not valid JSON."
	case t.InputPath != nil && !validInputPath(*t.InputPath):
		return "mem: InputPath supports only \"$\" and \"$.key.key\" paths."
	}
	return ""
}

func validInputPath(p string) bool {
	return p == "$" || (strings.HasPrefix(p, "$.") && !strings.ContainsAny(p, "[]*") && !strings.Contains(p, ".."))
}

// ListTargetsByRule lists a rule's targets (no paging: at most 5 exist).
func (c *Cloud) ListTargetsByRule(ctx context.Context, in *eventbridge.ListTargetsByRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error) {
	const op = "ListTargetsByRule"
	if in == nil || in.Rule == nil {
		return nil, opErr("EventBridge", op, required("ListTargetsByRuleInput", "Rule"))
	}
	return onRule(c, op, in.EventBusName, in.Rule, func(r *rule) (*eventbridge.ListTargetsByRuleOutput, error) {
		return &eventbridge.ListTargetsByRuleOutput{Targets: append([]ebtypes.Target{}, r.targets...)}, nil
	})
}

// entrySize is the user guide's PutEvents entry-size formula.
func entrySize(e ebtypes.PutEventsRequestEntry) int {
	n := 0
	if e.Time != nil {
		n += 14
	}
	n += len(deref(e.Source)) + len(deref(e.DetailType)) + len(deref(e.Detail))
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// PutEvents validates each entry, builds the EventBridge event, and delivers
// it to the targets of every enabled rule on the entry's bus whose pattern
// matches. Per-entry problems are reported in the result entries (AWS's
// codes: InvalidArgument for a missing Source/DetailType/Detail,
// MalformedDetail for a Detail that is not a JSON object,
// NotAuthorizedForSourceException for an "aws." source, and — a mem choice,
// AWS has accepted and dropped such events — ResourceNotFoundException for
// an unknown bus). More than 10 entries, or more than 1 MB in total, fail
// the whole call with ValidationException.
//
// A target whose queue or topic does not exist gets no retry (AWS does not
// retry missing resources): the event goes to the target's dead-letter
// queue, with the ERROR_CODE, ERROR_MESSAGE, RULE_ARN and TARGET_ARN message
// attributes AWS sets, or is dropped and logged when there is none.
func (c *Cloud) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	const op = "PutEvents"
	if in == nil || in.Entries == nil {
		return nil, opErr("EventBridge", op, required("PutEventsInput", "Entries"))
	}
	if len(in.Entries) < 1 || len(in.Entries) > maxPutEntries {
		return nil, opErr("EventBridge", op, apiErr("ValidationException", "1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxPutEntries))
	}
	total := 0
	for _, e := range in.Entries {
		total += entrySize(e)
	}
	if total > maxPutEventsSize {
		return nil, opErr("EventBridge", op, apiErr("ValidationException", "Total size of the entries in the request is over the limit."))
	}
	return locked(c, "EventBridge", op, func() (*eventbridge.PutEventsOutput, error) {
		out := &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}
		for i, e := range in.Entries {
			code, msg := c.checkEntry(e)
			if code == "" && c.failPut != nil {
				if fc, fail := c.failPut(e); fail {
					code, msg = fc, "injected failure"
				}
			}
			if code != "" {
				out.Entries[i] = ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String(msg)}
				out.FailedEntryCount++
				continue
			}
			id := uuid.NewString()
			out.Entries[i] = ebtypes.PutEventsResultEntry{EventId: aws.String(id)}
			c.deliverLocked(ctx, c.buses[busName(e.EventBusName)], id, e)
		}
		c.metrics.Count("PutEventsEntries", float64(len(in.Entries)))
		c.metrics.Count("PutEventsFailedEntries", float64(out.FailedEntryCount))
		return out, nil
	})
}

// checkEntry returns AWS's per-entry error code and message, or "".
func (c *Cloud) checkEntry(e ebtypes.PutEventsRequestEntry) (string, string) {
	for _, f := range []struct {
		name string
		v    *string
	}{{"Source", e.Source}, {"DetailType", e.DetailType}, {"Detail", e.Detail}} {
		if deref(f.v) == "" {
			return "InvalidArgument", fmt.Sprintf("Parameter %s is not valid. Reason: %s is a required argument.", f.name, f.name)
		}
	}
	var obj map[string]json.RawMessage
	if !utf8.ValidString(*e.Detail) || json.Unmarshal([]byte(*e.Detail), &obj) != nil || obj == nil {
		return "MalformedDetail", "Detail is malformed."
	}
	if strings.HasPrefix(*e.Source, "aws.") {
		return "NotAuthorizedForSourceException", "Not authorized for the source."
	}
	if bn := busName(e.EventBusName); c.buses[bn] == nil {
		return "ResourceNotFoundException", "Event bus " + bn + " does not exist."
	}
	return "", ""
}

// deliverLocked routes one accepted entry; c.mu must be held.
func (c *Cloud) deliverLocked(ctx context.Context, b *bus, id string, e ebtypes.PutEventsRequestEntry) {
	t := c.now()
	if e.Time != nil {
		t = *e.Time
	}
	res := e.Resources
	if res == nil {
		res = []string{}
	}
	body, err := marshal(events.EventBridgeEvent{
		Version: "0", ID: id, DetailType: *e.DetailType, Source: *e.Source, AccountID: c.account,
		Time: t.UTC().Truncate(time.Second), Region: c.region, Resources: res, Detail: json.RawMessage(*e.Detail),
	})
	if err != nil { // Detail was checked to be a JSON object; cannot happen.
		c.log.Error("eventbridge: marshal event", "event_id", id, "err", err)
		return
	}
	for _, name := range b.order {
		r := b.rules[name]
		if r.state != ebtypes.RuleStateEnabled || r.compiled == nil || !r.compiled.Match(body) {
			continue
		}
		for _, tg := range r.targets {
			c.deliverTargetLocked(ctx, r, tg, body, deref(e.TraceHeader))
		}
	}
}

func (c *Cloud) deliverTargetLocked(ctx context.Context, r *rule, tg ebtypes.Target, event []byte, trace string) {
	payload, err := targetInput(tg, event)
	if err == nil {
		var group string
		if tg.SqsParameters != nil {
			group = deref(tg.SqsParameters.MessageGroupId)
		}
		err = c.sendToArnLocked(ctx, deref(tg.Arn), payload, trace, group, nil)
	}
	if err == nil {
		c.metrics.Count("Invocations", 1)
		return
	}
	log := c.log.With("rule_arn", r.arn, "target_arn", deref(tg.Arn), "err", err)
	if tg.DeadLetterConfig != nil && tg.DeadLetterConfig.Arn != nil {
		attrs := map[string]sqstypes.MessageAttributeValue{
			"RULE_ARN":      strAttr(r.arn),
			"TARGET_ARN":    strAttr(deref(tg.Arn)),
			"ERROR_CODE":    strAttr("RESOURCE_NOT_FOUND"),
			"ERROR_MESSAGE": strAttr(err.Error()),
		}
		if dq := c.queueByArn(*tg.DeadLetterConfig.Arn); dq != nil {
			if _, err := c.sendLocked(dq, sendSpec{body: string(event), attrs: attrs}); err == nil {
				log.Warn("eventbridge: target failed; event sent to its dead-letter queue")
				c.metrics.Count("InvocationsSentToDlq", 1)
				return
			}
		}
	}
	log.Warn("eventbridge: target failed; event dropped")
	c.metrics.Count("FailedInvocations", 1)
}

func strAttr(s string) sqstypes.MessageAttributeValue {
	return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// targetInput applies a target's Input or InputPath to the event.
func targetInput(tg ebtypes.Target, event []byte) ([]byte, error) {
	if tg.Input != nil {
		return []byte(*tg.Input), nil
	}
	if tg.InputPath == nil || *tg.InputPath == "$" {
		return event, nil
	}
	var v any
	if err := json.Unmarshal(event, &v); err != nil {
		return nil, fmt.Errorf("input path: %w", err)
	}
	for _, k := range strings.Split(strings.TrimPrefix(*tg.InputPath, "$."), ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("input path %s does not resolve", *tg.InputPath)
		}
		v = obj[k]
	}
	return json.Marshal(v)
}

// sendToArnLocked delivers a payload to an SQS queue (in message group
// group, for a FIFO queue: its deduplication must be by content, as
// EventBridge requires) or SNS topic by ARN; c.mu must be held.
func (c *Cloud) sendToArnLocked(ctx context.Context, arn string, payload []byte, trace, group string, attrs map[string]sqstypes.MessageAttributeValue) error {
	switch {
	case strings.HasPrefix(arn, "arn:aws:sqs:"):
		q := c.queueByArn(arn)
		if q == nil {
			return fmt.Errorf("queue %s does not exist", arn)
		}
		if _, err := c.sendLocked(q, sendSpec{body: string(payload), attrs: attrs, traceHeader: trace, groupID: group}); err != nil {
			return fmt.Errorf("send to %s: %w", arn, err)
		}
		return nil
	case strings.HasPrefix(arn, "arn:aws:sns:"):
		t := c.topics[arn]
		if t == nil {
			return fmt.Errorf("topic %s does not exist", arn)
		}
		c.publishLocked(ctx, t, publication{message: string(payload)})
		return nil
	}
	return fmt.Errorf("mem: target %s is neither an SQS queue nor an SNS topic", arn)
}
