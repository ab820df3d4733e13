package doctor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/stack"
)

// fakeQueues answers GetQueueAttributes for the queues it knows: their
// ARN, redrive policy and depth.
type fakeQueues map[string]fakeQueue // by URL

type fakeQueue struct{ arn, redrive, depth string }

func (f fakeQueues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q, ok := f[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, errors.New("AWS.SimpleQueueService.NonExistentQueue")
	}
	attrs := map[string]string{"QueueArn": q.arn, "ApproximateNumberOfMessages": q.depth}
	if q.redrive != "" {
		attrs["RedrivePolicy"] = q.redrive
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// fakeRules answers ListTargetsByRule: the targets of each "bus|rule".
type fakeRules map[string][]ebtypes.Target

func (f fakeRules) ListTargetsByRule(_ context.Context, in *eventbridge.ListTargetsByRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error) {
	return &eventbridge.ListTargetsByRuleOutput{Targets: f[aws.ToString(in.EventBusName)+"|"+aws.ToString(in.Rule)]}, nil
}

type alarmList []cwtypes.MetricAlarm

func (a alarmList) DescribeAlarms(_ context.Context, in *cloudwatch.DescribeAlarmsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.DescribeAlarmsOutput, error) {
	var out []cwtypes.MetricAlarm
	for _, x := range a {
		if strings.HasPrefix(aws.ToString(x.AlarmName), aws.ToString(in.AlarmNamePrefix)) {
			out = append(out, x)
		}
	}
	return &cloudwatch.DescribeAlarmsOutput{MetricAlarms: out}, nil
}

type subList []snstypes.Subscription

func (s subList) ListSubscriptionsByTopic(context.Context, *sns.ListSubscriptionsByTopicInput, ...func(*sns.Options)) (*sns.ListSubscriptionsByTopicOutput, error) {
	return &sns.ListSubscriptionsByTopicOutput{Subscriptions: s}, nil
}

const secret = "the-deployed-channel-secret"

// stack is a deployed stack as doctor sees it: LINE (the mock), the webhook
// (verifying with secret), and the AWS side (fakes).
func stackTarget(t *testing.T, dlqDepth, configuredSecret string, subs subList) (Stack, *linemock.Server) {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signature.Verify(body, r.Header.Get(signature.Header), []byte(secret)) {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(hook.Close)
	line := linemock.New(linemock.WithWebhookTester(func(ctx context.Context, ep string) (int, string) {
		st, err := postSigned(ctx, http.DefaultClient, ep, secret, linemock.DefaultBotInfo.UserID)
		if err != nil {
			return 0, err.Error()
		}
		return st, http.StatusText(st)
	}))
	line.SetChannel(linemock.Channel{Endpoint: hook.URL + "/prod/webhook", Active: true})
	api := httptest.NewServer(line)
	t.Cleanup(api.Close)
	info := &stack.Stack{Name: "linegate", Outputs: map[string]string{
		"WebhookUrl":         hook.URL + "/prod/webhook",
		"OpsTopicArn":        "arn:aws:sns:ap-northeast-1:1:linegate-OpsTopic-X",
		"EscalationTopicArn": "arn:aws:sns:ap-northeast-1:1:linegate-EscalationTopic-X",
	}, Resources: map[string]stack.Resource{
		"InteractiveQueue": {Type: "AWS::SQS::Queue", PhysicalID: "https://sqs/1/linegate-InteractiveQueue-ABC"},
		"InteractiveDLQ":   {Type: "AWS::SQS::Queue", PhysicalID: "https://sqs/1/linegate-InteractiveDLQ-ABC"},
		"BackgroundDLQ":    {Type: "AWS::SQS::Queue", PhysicalID: "https://sqs/1/linegate-BackgroundDLQ-DEF"},
		"BackgroundRule":   {Type: "AWS::Events::Rule", PhysicalID: "linegate-bus|background"},
	}}
	return Stack{
		Info: info, LINE: lineapi.New("t", lineapi.WithBaseURL(api.URL), lineapi.WithMaxAttempts(1), lineapi.WithLogger(quietLogger())),
		Secret: func(context.Context) (string, error) { return configuredSecret, nil },
		SQS: fakeQueues{
			"https://sqs/1/linegate-InteractiveQueue-ABC": {arn: "arn:aws:sqs:x:1:linegate-InteractiveQueue-ABC",
				redrive: `{"deadLetterTargetArn":"arn:aws:sqs:x:1:linegate-InteractiveDLQ-ABC","maxReceiveCount":5}`},
			"https://sqs/1/linegate-InteractiveDLQ-ABC": {arn: "arn:aws:sqs:x:1:linegate-InteractiveDLQ-ABC", depth: dlqDepth},
			"https://sqs/1/linegate-BackgroundDLQ-DEF":  {arn: "arn:aws:sqs:x:1:linegate-BackgroundDLQ-DEF", depth: "0"},
		},
		Events: fakeRules{"linegate-bus|background": {{Id: aws.String("q"), Arn: aws.String("arn:aws:sqs:x:1:q"),
			DeadLetterConfig: &ebtypes.DeadLetterConfig{Arn: aws.String("arn:aws:sqs:x:1:linegate-BackgroundDLQ-DEF")}}}},
		Alarmsrc: alarmList{
			{AlarmName: aws.String("linegate-interactive-dlq"), StateValue: "OK", ActionsEnabled: aws.Bool(false)},
			{AlarmName: aws.String("other-stack-alarm"), StateValue: "ALARM", ActionsEnabled: aws.Bool(true)},
		},
		SNS: subs,
	}, line
}

func byCheck(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Check] = r
	}
	return m
}

func TestStackChecks(t *testing.T) {
	notifier := snstypes.Subscription{Protocol: aws.String("lambda"), Endpoint: aws.String("arn:aws:lambda:x:1:function:linegate-NotifierFunction"), SubscriptionArn: aws.String("arn:sub")}
	email := snstypes.Subscription{Protocol: aws.String("email"), Endpoint: aws.String("ops@example.com"), SubscriptionArn: aws.String("PendingConfirmation")}
	opsQueue := snstypes.Subscription{Protocol: aws.String("sqs"), Endpoint: aws.String("arn:aws:sqs:x:1:linegate-OpsQueue-ABC"), SubscriptionArn: aws.String("arn:sub2")}
	otherQueue := snstypes.Subscription{Protocol: aws.String("sqs"), Endpoint: aws.String("arn:aws:sqs:x:1:audit"), SubscriptionArn: aws.String("arn:sub3")}

	t.Run("healthy through the OpsQueue", func(t *testing.T) {
		s, _ := stackTarget(t, "0", secret, subList{opsQueue})
		if rs := Run(context.Background(), s); byCheck(rs)["ops topic"].Status != Pass {
			t.Fatalf("ops topic delivering to the OpsQueue: %+v", byCheck(rs)["ops topic"])
		}
	})

	t.Run("healthy", func(t *testing.T) {
		s, _ := stackTarget(t, "0", secret, subList{notifier})
		rs := Run(context.Background(), s)
		if Failed(rs) {
			t.Fatalf("a healthy stack failed: %+v", rs)
		}
		m := byCheck(rs)
		if m["webhook redelivery"].Status != Skip || !strings.Contains(m["webhook redelivery"].Fix, "in the LINE Developers console") {
			t.Errorf("redelivery: %+v (LINE's API cannot read it)", m["webhook redelivery"])
		}
		if !strings.Contains(m["alarms"].Detail, "silenced: linegate-interactive-dlq") || strings.Contains(m["alarms"].Detail, "other-stack") {
			t.Errorf("alarms: %+v", m["alarms"])
		}
	})

	tests := []struct {
		name    string
		depth   string
		secret  string
		subs    subList
		breakIt func(*linemock.Server)
		check   string
		wantFix string
	}{
		{"a DLQ holds messages", "3", secret, subList{notifier}, nil, "dead-letter queues", "linegate redrive --stack linegate --queue InteractiveDLQ"},
		{"wrong secret in SSM", "0", "another-secret", subList{notifier}, nil, "channel secret", "store the channel secret"},
		{"email not confirmed", "0", secret, subList{notifier, email}, nil, "ops topic", "confirm"},
		{"no notifier", "0", secret, subList{email}, nil, "ops topic", "redeploy"},
		{"only another queue", "0", secret, subList{otherQueue}, nil, "ops topic", "redeploy"},
		{"webhook unused", "0", secret, subList{notifier}, func(l *linemock.Server) {
			c := l.ChannelSettings()
			c.Active = false
			l.SetChannel(c)
		}, "webhook endpoint", "turn \"Use webhook\" on"},
		{"quota spent", "0", secret, subList{notifier}, func(l *linemock.Server) { l.SetQuota(linemock.Quota{Limit: 5, Used: 5}) }, "push quota", "resend-held"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, line := stackTarget(t, tt.depth, tt.secret, tt.subs)
			if tt.breakIt != nil {
				tt.breakIt(line)
			}
			rs := Run(context.Background(), s)
			r := byCheck(rs)[tt.check]
			if !Failed(rs) || r.Status != Fail || !strings.Contains(r.Fix, tt.wantFix) {
				t.Fatalf("%s: %+v, want FAIL with a fix naming %q", tt.check, r, tt.wantFix)
			}
			var out strings.Builder
			Print(&out, s.Describe(), rs)
			if !strings.Contains(out.String(), "FAIL  "+tt.check) || !strings.Contains(out.String(), "fix: ") {
				t.Fatalf("report:\n%s", out.String())
			}
		})
	}
}

// doctor warns when no email hears the escalation topic (AlertEmail is
// strongly advised), passes with a confirmed one and fails while it waits
// for its confirmation; a warning never fails the report.
func TestAlertEmail(t *testing.T) {
	notifier := snstypes.Subscription{Protocol: aws.String("sqs"), Endpoint: aws.String("arn:aws:sqs:x:1:linegate-OpsQueue-ABC"), SubscriptionArn: aws.String("arn:sub")}
	confirmed := snstypes.Subscription{Protocol: aws.String("email"), Endpoint: aws.String("ops@example.com"), SubscriptionArn: aws.String("arn:sub:email")}
	pending := snstypes.Subscription{Protocol: aws.String("email"), Endpoint: aws.String("ops@example.com"), SubscriptionArn: aws.String("PendingConfirmation")}
	tests := []struct {
		name   string
		subs   subList
		want   Status
		failed bool
	}{
		{"no AlertEmail", subList{notifier}, Warn, false},
		{"a confirmed AlertEmail", subList{notifier, confirmed}, Pass, false},
		{"an unconfirmed AlertEmail", subList{notifier, pending}, Fail, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := stackTarget(t, "0", secret, tt.subs)
			rs := Run(context.Background(), s)
			r := byCheck(rs)["alert email"]
			if r.Status != tt.want || Failed(rs) != tt.failed {
				t.Fatalf("alert email: %+v (report failed: %v), want %s", r, Failed(rs), tt.want)
			}
			if tt.want == Warn {
				var out strings.Builder
				Print(&out, s.Describe(), rs)
				if !strings.Contains(out.String(), "WARN  alert email") || !strings.Contains(out.String(), "strongly advised: deploy with AlertEmail=") {
					t.Fatalf("report:\n%s", out.String())
				}
			}
		})
	}
}
