package template

//lint:file-ignore ST1005 error messages start with the template path (Resources.X…), which is capitalised

import (
	"fmt"
	"strings"
)

// kind says how the local cloud names one resource type and what Ref and
// Fn::GetAtt return for it.
type kind struct {
	service  string // ARN service
	nameProp string // property holding an explicit physical name
	ref      func(e *evaluator, r *resource, name string) (string, error)
	attrs    map[string]func(e *evaluator, r *resource, name string) (string, error)
}

func refName(_ *evaluator, _ *resource, name string) (string, error) { return name, nil }

func (e *evaluator) arn(service, rest string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", e.cfg.partition, service, e.cfg.region, e.cfg.account, rest)
}

func (e *evaluator) queueURL(name string) string {
	if e.cfg.queueURL != nil {
		return e.cfg.queueURL(name)
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", e.cfg.region, e.cfg.urlSuffix, e.cfg.account, name)
}

func queueARN(e *evaluator, _ *resource, name string) (string, error) { return e.arn("sqs", name), nil }
func queueURL(e *evaluator, _ *resource, name string) (string, error) { return e.queueURL(name), nil }
func topicARN(e *evaluator, _ *resource, name string) (string, error) { return e.arn("sns", name), nil }
func busARN(e *evaluator, _ *resource, name string) (string, error) {
	return e.arn("events", "event-bus/"+name), nil
}
func tableARN(e *evaluator, _ *resource, name string) (string, error) {
	return e.arn("dynamodb", "table/"+name), nil
}
func functionARN(e *evaluator, _ *resource, name string) (string, error) {
	return e.arn("lambda", "function:"+name), nil
}
func alarmARN(e *evaluator, _ *resource, name string) (string, error) {
	return e.arn("cloudwatch", "alarm:"+name), nil
}
func roleARN(e *evaluator, _ *resource, name string) (string, error) {
	return fmt.Sprintf("arn:%s:iam::%s:role/%s", e.cfg.partition, e.cfg.account, name), nil
}

// ruleARN includes the bus for rules on a custom bus, as EventBridge does.
func ruleARN(e *evaluator, r *resource, name string) (string, error) {
	bus, err := e.ruleBus(r)
	if err != nil {
		return "", err
	}
	if bus == "default" {
		return e.arn("events", "rule/"+name), nil
	}
	return e.arn("events", "rule/"+bus+"/"+name), nil
}

// apiID is the id of an API (REST or HTTP): its logical id in lower case.
func apiID(_ *evaluator, r *resource, _ string) (string, error) { return strings.ToLower(r.id), nil }

// kinds is filled by init: its functions evaluate templates, which consult kinds.
var kinds map[string]kind

func init() {
	kinds = map[string]kind{
		"AWS::SQS::Queue": {service: "sqs", nameProp: "QueueName", ref: queueURL, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": queueARN, "QueueName": refName, "QueueUrl": queueURL,
		}},
		"AWS::SNS::Topic": {service: "sns", nameProp: "TopicName", ref: topicARN, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"TopicArn": topicARN, "TopicName": refName,
		}},
		"AWS::Events::EventBus": {service: "events", nameProp: "Name", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": busARN, "Name": refName,
		}},
		"AWS::Events::Rule": {service: "events", nameProp: "Name", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": ruleARN,
		}},
		"AWS::Events::Archive": {service: "events", nameProp: "ArchiveName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": func(e *evaluator, _ *resource, name string) (string, error) {
				return e.arn("events", "archive/"+name), nil
			},
		}},
		"AWS::DynamoDB::Table": {service: "dynamodb", nameProp: "TableName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": tableARN,
			"StreamArn": func(e *evaluator, _ *resource, name string) (string, error) {
				return e.arn("dynamodb", "table/"+name+"/stream/1970-01-01T00:00:00.000"), nil
			},
		}},
		"AWS::Serverless::SimpleTable": {service: "dynamodb", nameProp: "TableName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": tableARN,
		}},
		"AWS::Serverless::Function": {service: "lambda", nameProp: "FunctionName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": functionARN,
		}},
		"AWS::Lambda::Function": {service: "lambda", nameProp: "FunctionName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": functionARN,
		}},
		"AWS::Serverless::Api": {service: "apigateway", ref: apiID, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"RootResourceId": func(*evaluator, *resource, string) (string, error) { return "root", nil },
		}},
		"AWS::ApiGateway::RestApi": {service: "apigateway", ref: apiID, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"RootResourceId": func(*evaluator, *resource, string) (string, error) { return "root", nil },
		}},
		"AWS::Serverless::HttpApi": {service: "apigateway", ref: apiID, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"ApiEndpoint": func(e *evaluator, r *resource, _ string) (string, error) {
				return "https://" + strings.ToLower(r.id) + ".execute-api." + e.cfg.region + "." + e.cfg.urlSuffix, nil
			},
		}},
		"AWS::ApiGatewayV2::Api": {service: "apigateway", ref: apiID},
		"AWS::CloudWatch::Alarm": {service: "cloudwatch", nameProp: "AlarmName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": alarmARN,
		}},
		"AWS::CloudWatch::Dashboard": {service: "cloudwatch", nameProp: "DashboardName", ref: refName},
		"AWS::IAM::Role": {service: "iam", nameProp: "RoleName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": roleARN,
		}},
		"AWS::Logs::LogGroup": {service: "logs", nameProp: "LogGroupName", ref: refName, attrs: map[string]func(*evaluator, *resource, string) (string, error){
			"Arn": func(e *evaluator, _ *resource, name string) (string, error) {
				return e.arn("logs", "log-group:"+name+":*"), nil
			},
		}},
		// Ref of a secret is its ARN (with Secrets Manager's random suffix,
		// which the local cloud leaves out).
		"AWS::SecretsManager::Secret": {service: "secretsmanager", nameProp: "Name", ref: func(e *evaluator, _ *resource, name string) (string, error) {
			return e.arn("secretsmanager", "secret:"+name), nil
		}},
	}
}

// physicalName returns the name the local cloud gives a resource: its name
// property when the template sets one, else "<stack>-<LogicalId>" (plus
// ".fifo" for a FIFO queue, which SQS requires).
func (e *evaluator) physicalName(r *resource) (string, error) {
	if r.named {
		return r.name, nil
	}
	if r.naming {
		return "", fmt.Errorf("Resources.%s: %w: its name depends on itself", r.id, ErrSyntax)
	}
	r.naming = true
	defer func() { r.naming = false }()
	name := e.cfg.stack + "-" + r.id
	if k, ok := kinds[r.typ]; ok && k.nameProp != "" {
		if raw, ok := r.props[k.nameProp]; ok {
			v, err := e.eval("Resources."+r.id+".Properties."+k.nameProp, raw)
			if err != nil {
				return "", err
			}
			if v != noValue {
				s, ok := scalarString(v)
				if !ok || s == "" {
					return "", fmt.Errorf("Resources.%s.Properties.%s: %w: want a non-empty name", r.id, k.nameProp, ErrSyntax)
				}
				name = s
			}
		}
	}
	if r.typ == "AWS::SQS::Queue" && !strings.HasSuffix(name, ".fifo") {
		if fifo, ok := r.props["FifoQueue"]; ok {
			v, err := e.eval("Resources."+r.id+".Properties.FifoQueue", fifo)
			if err != nil {
				return "", err
			}
			if s, _ := scalarString(v); s == "true" {
				name += ".fifo"
			}
		}
	}
	r.name, r.named = name, true
	return name, nil
}

// ruleBus returns the name of the bus a rule is on ("default" when unset).
func (e *evaluator) ruleBus(r *resource) (string, error) {
	raw, ok := r.props["EventBusName"]
	if !ok {
		return "default", nil
	}
	if r.busing {
		return "", fmt.Errorf("Resources.%s.Properties.EventBusName: %w: depends on itself", r.id, ErrSyntax)
	}
	r.busing = true
	defer func() { r.busing = false }()
	v, err := e.eval("Resources."+r.id+".Properties.EventBusName", raw)
	if err != nil {
		return "", err
	}
	s, ok := scalarString(v)
	if !ok || s == "" {
		return "default", nil
	}
	if _, after, found := strings.Cut(s, ":event-bus/"); found {
		return after, nil
	}
	return s, nil
}

// pseudo holds the pseudo parameters; ok is false for an unknown name.
func (e *evaluator) pseudo(name string) (any, bool) {
	switch name {
	case "AWS::Region":
		return e.cfg.region, true
	case "AWS::AccountId":
		return e.cfg.account, true
	case "AWS::Partition":
		return e.cfg.partition, true
	case "AWS::StackName":
		return e.cfg.stack, true
	case "AWS::StackId":
		return fmt.Sprintf("arn:%s:cloudformation:%s:%s:stack/%s/00000000-0000-0000-0000-000000000000",
			e.cfg.partition, e.cfg.region, e.cfg.account, e.cfg.stack), true
	case "AWS::URLSuffix":
		return e.cfg.urlSuffix, true
	case "AWS::NotificationARNs":
		return []any{}, true
	case "AWS::NoValue":
		return noValue, true
	}
	return nil, false
}

// ref resolves Ref to a parameter, pseudo parameter or resource.
func (e *evaluator) ref(path, name string) (any, error) {
	if v, ok := e.pseudo(name); ok {
		return v, nil
	}
	if v, ok := e.params[name]; ok {
		if m, missing := v.(missingParam); missing {
			return nil, fmt.Errorf("%s: %w: parameter %q has no Default and no override", path, ErrParameter, m.name)
		}
		return v, nil
	}
	r, err := e.lookup(path, name)
	if err != nil {
		return nil, err
	}
	if r == nil { // SAM-generated resource
		return e.cfg.stack + "-" + name, nil
	}
	name, err = e.physicalName(r)
	if err != nil {
		return nil, err
	}
	if k, ok := kinds[r.typ]; ok {
		return k.ref(e, r, name)
	}
	return name, nil
}

// getAtt resolves Fn::GetAtt.
func (e *evaluator) getAtt(path, id, attr string) (any, error) {
	r, err := e.lookup(path, id)
	if err != nil {
		return nil, err
	}
	typ := e.implicit[id]
	if r != nil {
		typ = r.typ
	}
	if r == nil { // SAM-generated resource: only the role is known
		if attr == "Arn" && typ == "AWS::IAM::Role" {
			return roleARN(e, nil, e.cfg.stack+"-"+id)
		}
		return nil, fmt.Errorf("%s: %w attribute %s.%s of SAM-generated %s", path, ErrUnsupported, id, attr, typ)
	}
	name, err := e.physicalName(r)
	if err != nil {
		return nil, err
	}
	if k, ok := kinds[r.typ]; ok {
		if f, ok := k.attrs[attr]; ok {
			return f(e, r, name)
		}
	}
	return nil, fmt.Errorf("%s: %w attribute %s.%s of %s", path, ErrUnsupported, id, attr, r.typ)
}

// lookup finds a resource that is deployed under the current parameters. A
// SAM-generated resource returns (nil, nil).
func (e *evaluator) lookup(path, id string) (*resource, error) {
	r, ok := e.resources[id]
	if !ok {
		if _, ok := e.implicit[id]; ok {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w %q", path, ErrUnknownRef, id)
	}
	if !r.enabled {
		return nil, fmt.Errorf("%s: %w %q: its condition %q is false", path, ErrUnknownRef, id, r.condition)
	}
	return r, nil
}

// props evaluates a resource's properties once.
func (e *evaluator) props(r *resource) (map[string]any, error) {
	if r.resolved != nil {
		return r.resolved, nil
	}
	if r.resolving {
		return nil, fmt.Errorf("Resources.%s: %w: properties depend on themselves", r.id, ErrSyntax)
	}
	r.resolving = true
	defer func() { r.resolving = false }()
	v, err := e.eval("Resources."+r.id+".Properties", r.props)
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	r.resolved = m
	return m, nil
}
