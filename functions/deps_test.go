// Package functions_test holds what is true of every Lambda binary at once:
// each links only what it runs.
package functions_test

import (
	"os"
	"os/exec"
	"slices"
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
// delays and hands off records on its own queues. The worker links the
// bot-process protocol (internal/botproc): under `linegate local` its binary
// is the bot's own process, serving the router instead of starting Lambda's
// runtime.
var denied = map[string][]string{
	"webhook": {
		ssmClient,
		laptop,
		"github.com/aws/aws-sdk-go-v2/service/dynamodb",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		"github.com/line/line-bot-sdk-go/",
		module + "internal/lineapi",
		module + "internal/worker",
		module + "pkg/bot",
		module + "internal/botproc",
		module + "internal/alert",
		module + "internal/crash",
		module + "internal/idempotency",
		module + "internal/app",
		module + "internal/compose/workerfn",
		module + "internal/compose/notifierfn",
		module + "internal/compose/quotafn",
		module + "internal/chatops",
		module + "internal/held",
		module + "internal/linetoken",
		module + "internal/quota",
	},
	// The worker links SQS (DESIGN: alerts carry buttons that
	// act for operators; the worker holds results in the HeldQueue, resends
	// them and redrives DLQs from an operator's tap).
	"worker": {
		ssmClient,
		laptop,
		"github.com/aws/aws-sdk-go-v2/service/eventbridge",
		module + "internal/ingress",
		module + "internal/eventbus",
		module + "internal/chatqueue",
		module + "internal/signature",
		module + "internal/alert",
		module + "internal/compose/webhookfn",
		module + "internal/compose/notifierfn",
		module + "internal/compose/quotafn",
		module + "internal/quota",
	},
	// The notifier pushes alert cards: none of the other functions' cores.
	// It links DynamoDB (its paging ledger, a versioned item of the
	// idempotency table) and SQS (its sweep reads the DLQs' depths), for
	// every failure to reach the operator once across invocations,
	// restarts and redeploys (docs/adr/0005-every-failure-pages.md).
	"notifier": slices.DeleteFunc(append(pagerDenied(),
		module+"internal/compose/quotafn",
		module+"internal/held",
	), func(p string) bool {
		return p == "github.com/aws/aws-sdk-go-v2/service/dynamodb" || p == module+"internal/idempotency"
	}),
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
		laptop,
		"github.com/aws/aws-sdk-go-v2/service/dynamodb",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		module + "internal/ingress",
		module + "internal/eventbus",
		module + "internal/chatqueue",
		module + "internal/worker",
		module + "pkg/bot",
		module + "internal/botproc",
		module + "internal/idempotency",
		module + "internal/app",
		module + "internal/chatops",
		module + "internal/compose/webhookfn",
		module + "internal/compose/workerfn",
	}
}

// laptop stands for every package of the laptop world (laptopWorld):
// denied to every function.
const laptop = "<laptop world>"

// laptopWorld lists the packages under internal/ that belong to the laptop
// world (the local cloud, the CLI's pieces, the test helpers). Every other
// package under internal/ is the Lambda world's; TestEveryInternalPackageHasAWorld
// fails for a new package on neither side.
var laptopWorld = []string{
	"awswire", "bench", "busredrive", "cloud", "cmd", "coldstart", "console", "cputime", "doctor",
	"golden", "linemock", "lineplatform", "local", "localstate", "motoserver", "replay", "ring", "samcli", "scaffold", "stack",
	"template", "testbot", "testclock", "testio", "testmem", "testmessenger", "testmetrics", "testsns",
	"testsummary", "tracetest", "watch", "xraycollector",
}

// expand turns a deny list into import-path prefixes (laptop into each of
// laptopWorld's packages).
func expand(deny []string) []string {
	var out []string
	for _, d := range deny {
		if d != laptop {
			out = append(out, d)
			continue
		}
		for _, p := range laptopWorld {
			out = append(out, module+"internal/"+p)
		}
	}
	return out
}

// ssmClient is denied to every function: each reads its secrets once at
// start with internal/secrets' own SSM call, since the SDK's SSM package builds
// the whole SSM API's schemas at process start (about 1.3 ms of every
// INIT).
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
				for _, bad := range expand(deny) {
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

// tracingSDKs are the tracing SDKs: only the seam's backends
// (internal/telemetry/xraytrace, internal/telemetry/otelxray) import them,
// and only the composition root (internal/compose) picks a backend.
var tracingSDKs = []string{"github.com/aws/aws-xray-sdk-go/", "go.opentelemetry.io/"}

// The cores and the packages that merely log link no tracing SDK: they
// trace through internal/telemetry's verbs, and importing them runs none of
// an SDK's package initialisation (the X-Ray SDK's reads its environment,
// may panic on a bad AWS_XRAY_DAEMON_ADDRESS and, in Lambda, writes a file).
// Every function links both backends, since TRACING picks one at start.
func TestTracingSDKsStayBehindTheSeam(t *testing.T) {
	cores := []string{"internal/telemetry", "internal/ingress", "internal/eventbus", "internal/chatqueue", "internal/worker",
		"internal/alert", "internal/crash", "internal/lineapi", "internal/chatops", "internal/held", "internal/quota",
		"internal/idempotency", "internal/config", "pkg/bot"}
	args := append([]string{"list", "-tags", "lambda.norpc", "-deps"}, prefixed(cores)...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	all := strings.Fields(string(out))
	if !contains(all, module+"internal/telemetry") || len(all) < 50 {
		t.Fatalf("go list gave %d packages, not the cores' dependency list", len(all))
	}
	for _, d := range all {
		for _, sdk := range tracingSDKs {
			if strings.HasPrefix(d, sdk) {
				t.Errorf("a core links %s: cores trace through internal/telemetry only", d)
			}
		}
	}
	for fn := range denied {
		for _, backend := range []string{"internal/telemetry/xraytrace", "internal/telemetry/otelxray"} {
			if !contains(deps(t, fn), module+backend) {
				t.Errorf("%s does not link %s: TRACING could not choose it", fn, backend)
			}
		}
	}
}

// prefixed turns module-relative package paths into import paths.
func prefixed(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = module + p
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Every package under internal/ is either the laptop world's (laptopWorld)
// or linked by a function: a new package is put on one side on purpose, so
// the deny lists above keep meaning what they say.
func TestEveryInternalPackageHasAWorld(t *testing.T) {
	linked := map[string]bool{}
	for fn := range denied {
		for _, d := range deps(t, fn) {
			linked[d] = true
		}
	}
	entries, err := os.ReadDir("../internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ip := module + "internal/" + e.Name()
		if !slices.Contains(laptopWorld, e.Name()) && !linked[ip] {
			t.Errorf("internal/%s is neither in laptopWorld nor linked by a function", e.Name())
		}
		if slices.Contains(laptopWorld, e.Name()) && linked[ip] {
			t.Errorf("internal/%s is in laptopWorld but a function links it", e.Name())
		}
	}
}
