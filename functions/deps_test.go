// Package functions_test holds what is true of every Lambda binary at once:
// each links only what it runs.
package functions_test

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/linegate/linegate/"

// Each function is listed with the packages its binary must never link. The
// laptop world (internal/...) and the example bot's own framework pieces are
// denied everywhere; the webhook, which LINE waits on, links no DynamoDB, SNS
// or LINE Messaging API client and none of the worker's or notifier's code.
// The webhook and the worker link SQS (docs/adr/0001-per-chat-order.md): the
// webhook sends chat events to the FIFO chat queue, the worker dead-letters,
// delays and hands off records on its own queues.
var denied = map[string][]string{
	"webhook": {
		ssmClient,
		module + "internal/",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		"github.com/line/line-bot-sdk-go/",
		module + "pkg/lineapi",
		module + "pkg/worker",
		module + "pkg/bot",
		module + "pkg/alert",
		module + "pkg/crash",
		module + "pkg/idempotency",
		module + "pkg/app",
		module + "pkg/compose/workerfn",
		module + "pkg/compose/notifierfn",
		module + "pkg/compose/quotafn",
		module + "pkg/chatops",
		module + "pkg/held",
		module + "pkg/linetoken",
		module + "pkg/quota",
	},
	// The worker links SQS since issue 14 (DESIGN: alerts carry buttons that
	// act for operators; the worker holds results in the HeldQueue, resends
	// them and redrives DLQs from an operator's tap).
	"worker": {
		ssmClient,
		module + "internal/",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge",
		module + "pkg/ingress",
		module + "pkg/eventbus",
		module + "pkg/chatqueue",
		module + "pkg/signature",
		module + "pkg/alert",
		module + "pkg/compose/webhookfn",
		module + "pkg/compose/notifierfn",
		module + "pkg/compose/quotafn",
		module + "pkg/quota",
	},
	// The notifier pushes alert cards: none of the other functions' cores.
	"notifier": append(pagerDenied(),
		"github.com/aws/aws-sdk-go-v2/service/sqs",
		module+"pkg/compose/quotafn",
		module+"pkg/held",
	),
	// The quota governor reads LINE's quota and the HeldQueue's depth and
	// pushes cards as the notifier does: no DynamoDB, SNS or EventBridge,
	// and none of the actions of the operator's buttons.
	"quota": append(pagerDenied(),
		"github.com/aws/aws-sdk-go-v2/service/cloudwatch",
		"github.com/aws/aws-sdk-go-v2/service/scheduler",
	),
}

// pagerDenied is what neither function that pages the operators (the
// notifier, the quota governor) may link.
func pagerDenied() []string {
	return []string{
		ssmClient,
		module + "internal/",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		module + "pkg/ingress",
		module + "pkg/eventbus",
		module + "pkg/chatqueue",
		module + "pkg/worker",
		module + "pkg/bot",
		module + "pkg/idempotency",
		module + "pkg/app",
		module + "pkg/chatops",
		module + "pkg/compose/webhookfn",
		module + "pkg/compose/workerfn",
	}
}

// ssmClient is denied to every function: each reads its secrets once at
// start with pkg/secrets' own SSM call, since the SDK's SSM package builds
// the whole SSM API's schemas at process start (issue 16: about 1.3 ms of
// every INIT).
const ssmClient = "github.com/aws/aws-sdk-go-v2/service/ssm"

// depsCache keeps each function's `go list -deps` answer for the tests of
// this package (function name -> []string).
var depsCache sync.Map

// deps lists what `go list -deps` says the function's Lambda build links,
// with the same GOOS, GOARCH and tags as the Makefile.
func deps(t *testing.T, fn string) []string {
	t.Helper()
	if d, ok := depsCache.Load(fn); ok {
		return d.([]string)
	}
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "./"+fn)
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v\n%s", fn, err, out)
	}
	d := strings.Fields(string(out))
	depsCache.Store(fn, d)
	return d
}

func TestEachFunctionLinksOnlyWhatItRuns(t *testing.T) {
	for fn, deny := range denied {
		t.Run(fn, func(t *testing.T) {
			all := deps(t, fn)
			if len(all) < 50 || !contains(all, module+"functions/"+fn) {
				t.Fatalf("go list gave %d packages, not the function's dependency list: %v", len(all), all)
			}
			for _, d := range all {
				for _, bad := range deny {
					if d == bad || strings.HasPrefix(d, strings.TrimSuffix(bad, "/")+"/") || (strings.HasSuffix(bad, "/") && strings.HasPrefix(d, bad)) {
						t.Errorf("%s links %s (denied: %s)", fn, d, bad)
					}
				}
			}
		})
	}
}

// The deny-list check itself must be able to fail: the worker does link
// DynamoDB, and the webhook links EventBridge.
func TestDependencyListsAreReal(t *testing.T) {
	if !contains(deps(t, "worker"), "github.com/aws/aws-sdk-go-v2/service/dynamodb") {
		t.Error("worker's dependency list has no DynamoDB client: the check above would pass vacuously")
	}
	if !contains(deps(t, "webhook"), "github.com/aws/aws-sdk-go-v2/service/eventbridge") {
		t.Error("webhook's dependency list has no EventBridge client: the check above would pass vacuously")
	}
	for _, fn := range []string{"webhook", "worker"} {
		if !contains(deps(t, fn), "github.com/aws/aws-sdk-go-v2/service/sqs") {
			t.Errorf("%s links no SQS client: it cannot feed or settle the chat queue", fn)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
