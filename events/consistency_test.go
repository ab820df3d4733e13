package events_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/cloud/pattern"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/template"
)

// topology is template.yaml as linegate local evaluates it.
func topology(t *testing.T) *template.Topology {
	t.Helper()
	top, err := template.Load(filepath.Join("..", "template.yaml"), local.TemplateParams(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// queueOf is the logical id of the queue whose name is the last part of an
// SQS ARN, allowing CloudFormation's random suffix
// (linegate-InteractiveQueue-8XKQ2M1ZP0A4).
func queueOf(top *template.Topology, arn string) string {
	name := arn[strings.LastIndex(arn, ":")+1:]
	for _, q := range top.Queues {
		if name == q.Name || strings.HasPrefix(name, q.Name+"-") {
			return q.LogicalID
		}
	}
	return ""
}

// TestSQSSamplesAgreeWithTheTemplate checks what SQS and EventBridge would
// really hand the worker: md5OfBody is the body's MD5 (so no two samples
// share one), and the queue a record came from is the one the template's
// rules route its event to.
func TestSQSSamplesAgreeWithTheTemplate(t *testing.T) {
	top := topology(t)
	files, _ := filepath.Glob("worker-*.json")
	seen := map[string]string{}
	for _, f := range files {
		var ev events.SQSEvent
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, r := range ev.Records {
			sum := md5.Sum([]byte(r.Body))
			if want := hex.EncodeToString(sum[:]); r.Md5OfBody != want {
				t.Errorf("%s record %d: md5OfBody %s, the body's MD5 is %s", f, i, r.Md5OfBody, want)
			}
			if other, dup := seen[r.Md5OfBody]; dup {
				t.Errorf("%s record %d has the same body as %s", f, i, other)
			}
			seen[r.Md5OfBody] = f
			if slices.Contains(expected[f].Failures, r.MessageId) {
				continue // a poison record: sent by hand, no rule would route it
			}
			from := queueOf(top, r.EventSourceARN)
			if from == "" {
				t.Errorf("%s record %d: eventSourceARN %s is no queue of the template", f, i, r.EventSourceARN)
				continue
			}
			var routed []string
			for _, rule := range top.Rules {
				p, err := pattern.Compile(rule.Pattern)
				if err != nil {
					t.Fatalf("rule %s: %v", rule.LogicalID, err)
				}
				if p.Match([]byte(r.Body)) {
					for _, tg := range rule.Targets {
						routed = append(routed, tg.QueueLogicalID)
					}
				}
			}
			if len(routed) != 1 || routed[0] != from {
				t.Errorf("%s record %d comes from %s, but the rules route its event to %v", f, i, from, routed)
			}
		}
	}
}

// TestSNSSamplesAgreeWithTheTemplate checks the notifier's samples: the alarm
// is one of the template's (name, threshold, comparison), and a crash report
// has the subject the worker publishes it with.
func TestSNSSamplesAgreeWithTheTemplate(t *testing.T) {
	top := topology(t)
	read := func(name string) map[string]any {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Records []struct {
				Sns map[string]any `json:"Sns"`
			}
		}
		if err := json.Unmarshal(b, &ev); err != nil || len(ev.Records) != 1 {
			t.Fatalf("%s: %v (%d records)", name, err, len(ev.Records))
		}
		return ev.Records[0].Sns
	}
	// The worker publishes a crash report with the subject "linegate crash:
	// <event type>" (pkg/worker); SNS hands a Lambda subscriber that subject,
	// or null for a message published without one, never "".
	crash := read("notifier-crash-report.json")
	var report struct{ EventType string }
	if err := json.Unmarshal([]byte(crash["Message"].(string)), &report); err != nil {
		t.Fatal(err)
	}
	if s, want := crash["Subject"], "linegate crash: "+report.EventType; s != want {
		t.Errorf("crash report Subject = %#v, want %q as the worker publishes it", s, want)
	}
	alarm := read("notifier-alarm.json")
	var msg struct {
		AlarmName string
		Trigger   struct {
			ComparisonOperator string
			Threshold          float64
			MetricName         string
		}
	}
	if err := json.Unmarshal([]byte(alarm["Message"].(string)), &msg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range top.Alarms {
		if a.Name != msg.AlarmName {
			continue
		}
		found = true
		if a.Threshold != msg.Trigger.Threshold || a.ComparisonOperator != msg.Trigger.ComparisonOperator || a.MetricName != msg.Trigger.MetricName {
			t.Errorf("alarm %s: sample says %s %s %v, the template %s %s %v", a.Name,
				msg.Trigger.MetricName, msg.Trigger.ComparisonOperator, msg.Trigger.Threshold, a.MetricName, a.ComparisonOperator, a.Threshold)
		}
	}
	if !found {
		t.Errorf("the sample's alarm %q is not in the template", msg.AlarmName)
	}
	if subj, _ := alarm["Subject"].(string); !strings.Contains(subj, `"`+msg.AlarmName+`"`) {
		t.Errorf("alarm Subject %q does not name %s", subj, msg.AlarmName)
	}
}
