package samcli_test

// TestSAMCLIRunsEverySample runs the real AWS SAM CLI. Without sam on PATH,
// or without a Docker daemon, it is skipped loudly on a developer machine and
// fails in CI (CI=true), where .ci/run installs both.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/samcli"
	"github.com/linegate/linegate/pkg/bot"
)

// repoRoot is the project sam runs in, relative to this package.
const repoRoot = "../.."

// requireSAM returns the sam on PATH (with a clean environment) and the
// Docker daemon it will use, or skips loudly (fails in CI) without them.
func requireSAM(t *testing.T) (*samcli.CLI, *samcli.Docker) {
	t.Helper()
	missing := func(err error) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("the real SAM CLI and Docker are required in CI (.ci/run installs them): %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: %v; this test runs sam validate, sam build and sam local invoke of every sample in events/ in CI (docs/testing.md says how to run it here)", err)
	}
	c, err := samcli.Find(snapshot(t, repoRoot))
	if err != nil {
		missing(err)
	}
	d, err := samcli.NewDocker("")
	if err != nil {
		missing(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Ping(ctx); err != nil {
		missing(err)
	}
	c.Env = samcli.CleanEnv(os.Environ())
	return c, d
}

// snapshot copies the repository's files (tracked, and untracked ones git
// does not ignore) into a temporary directory, where sam builds and invokes:
// the other packages' tests run at the same time and may create and delete
// files in the tree, and sam build hashes the whole CodeUri (the
// repository's root), failing with FileNotFoundError when a file it listed
// is gone before it is read.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	dst := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// outcome is what a sample is documented to produce (events/expected.json,
// the table events/samples_test.go checks through the cores).
type outcome struct {
	Status    int      `json:"status"`    // webhook: the proxy response's statusCode
	Published int      `json:"published"` // webhook: events handed to the pipeline
	Failures  []string `json:"failures"`  // worker/notifier: batchItemFailures' itemIdentifiers
	Messages  int      `json:"messages"`  // worker/notifier: messages LINE accepted
	Cards     int      `json:"cards"`     // notifier: cards in the push (0: not checked)
	Count     int      `json:"count"`     // notifier: the coalesced count on the card (0: not checked)
}

// functionOf is the template's function a sample is for, by its prefix.
var functionOf = map[string]string{"webhook": "WebhookFunction", "worker": "WorkerFunction", "notifier": "NotifierFunction"}

// expectations reads events/expected.json and checks it and the samples in
// events/ name the same files.
func expectations(t *testing.T) map[string]outcome {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "events", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]outcome
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("events/expected.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "env.json" || name == "expected.json" || strings.HasPrefix(name, "env.") {
			continue
		}
		seen[name] = true
		prefix, _, _ := strings.Cut(name, "-")
		if functionOf[prefix] == "" {
			t.Errorf("events/%s: a sample's name starts with webhook-, worker- or notifier-", name)
		}
		if _, ok := want[name]; !ok {
			t.Errorf("events/%s has no outcome in events/expected.json", name)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("events/expected.json names %s, which is not in events/", name)
		}
	}
	return want
}

// envPort is the port events/env.json points every function at: each URL in
// it is http://host.docker.internal:PORT, the same PORT.
func envPort(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "events", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("events/env.json: %v", err)
	}
	port := ""
	for fn, vars := range all {
		for k, v := range vars {
			if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") || strings.HasSuffix(k, "_QUEUE_URL") {
				continue // queue URLs name the queue; linegate local serves them on its own address
			}
			u, err := url.Parse(v)
			if err != nil || u.Scheme != "http" || u.Hostname() != "host.docker.internal" || u.Port() == "" {
				t.Fatalf("events/env.json %s.%s = %q: want http://host.docker.internal:PORT (linegate local through samconfig.toml's host mapping)", fn, k, v)
			}
			if port != "" && u.Port() != port {
				t.Fatalf("events/env.json names two ports, %s and %s", port, u.Port())
			}
			port = u.Port()
		}
	}
	if port == "" {
		t.Fatal("events/env.json points no function at linegate local")
	}
	var n int
	fmt.Sscan(port, &n)
	return n
}

// startLocal starts a fresh linegate local on a free loopback port with the
// example bot, as `linegate local` runs it.
func startLocal(t *testing.T) *local.Runtime {
	t.Helper()
	rt, err := local.Start(context.Background(), local.Config{
		Template: filepath.Join(repoRoot, "template.yaml"), Addr: "127.0.0.1:0",
		Getenv: func(string) string { return "" },
		Bot:    func(c config.Worker) *bot.Router { return app.NewWith(app.Config{Probes: c.Probes}) },
	})
	if err != nil {
		t.Fatalf("linegate local: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// inspect reads one of linegate local's /_local endpoints into v.
func inspect(t *testing.T, rt *local.Runtime, path string, v any) {
	t.Helper()
	resp, err := http.Get(rt.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// The views of linegate local's inspect endpoints this test reads.
type (
	eventView struct {
		WebhookEventID, Type, Outcome, Error string
	}
	queueView struct {
		LogicalID         string
		Visible, InFlight int
	}
	sendView struct {
		To, Via, RetryKey string
		Messages          []json.RawMessage
	}
)

// TestSAMCLIRunsEverySample is what a developer does with docs/deploy.md's
// recipe, with the real AWS SAM CLI: `sam validate --lint`, `sam build`
// (once, into a temporary directory), then `sam local invoke` of every sample
// in events/ from the repository's root, with samconfig.toml (events/env.json,
// the host.docker.internal mapping) as it is. Each sample runs against a
// fresh linegate local on loopback, which the container reaches through a
// relay on the address host.docker.internal names (the Docker bridge's
// gateway on Linux). Each must give its outcome in events/expected.json,
// judged by the function's response and by what linegate local recorded
// (/_local/events, /_local/queues, /_local/line/messages), never by sam's
// exit status, which is 0 even when the function fails at INIT.
func TestSAMCLIRunsEverySample(t *testing.T) {
	sam, docker := requireSAM(t)
	ctx := context.Background()
	began := time.Now()
	if v, err := sam.Version(ctx); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s at %s", v, sam.Path)
	}
	want := expectations(t)
	port := envPort(t)
	if t.Failed() {
		t.FailNow()
	}

	t.Run("validate --lint", func(t *testing.T) {
		out, err := sam.Validate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "is a valid SAM Template") {
			t.Fatalf("sam validate --lint did not say the template is valid:\n%s", out)
		}
	})

	tmp := t.TempDir()
	buildStart := time.Now()
	built, err := sam.Build(ctx, filepath.Join(tmp, "build"), filepath.Join(tmp, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sam build: %.1f s", time.Since(buildStart).Seconds())

	addr, err := samcli.RelayAddress(ctx, docker, runtime.GOOS, port)
	if err != nil {
		t.Fatalf("where the functions' host.docker.internal:%d lands: %v", port, err)
	}
	relay, err := samcli.Listen(addr, "127.0.0.1:1", samcli.WithDialErrors(func(err error) { t.Logf("%v", err) }))
	if err != nil {
		t.Fatalf("%v: the functions reach linegate local there (events/env.json's port %d); is a relay or linegate local of your own on it? Stop it while this test runs", err, port)
	}
	defer relay.Close()

	invokes, ran := time.Now(), 0
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Run(name, func(t *testing.T) {
			ran++
			rt := startLocal(t)
			relay.SetTarget(strings.TrimPrefix(rt.URL(), "http://"))
			w := want[name]
			prefix, _, _ := strings.Cut(name, "-")
			inv := invoke(t, sam, built, functionOf[prefix], name)
			switch prefix {
			case "webhook":
				checkWebhook(t, rt, inv, w)
			case "worker":
				checkFailures(t, inv, w.Failures)
				var sends []sendView
				inspect(t, rt, "/_local/line/messages", &sends)
				if len(sends) != w.Messages {
					t.Errorf("%d messages sent to linegate local's LINE API, want %d: %+v", len(sends), w.Messages, sends)
				}
			case "notifier":
				checkNotifier(t, rt, inv, w)
				if name == redelivered {
					// The same batch again, in a new container (an SQS
					// redelivery, a cold start): the retry key is derived
					// from the SNS MessageIds, so LINE takes no second push.
					checkNotifier(t, rt, invoke(t, sam, built, functionOf[prefix], name), w)
				}
			}
		})
	}
	t.Logf("%d of %d samples invoked in %.1f s; validate, build and invokes %.1f s in all", ran, len(want), time.Since(invokes).Seconds(), time.Since(began).Seconds())
}

// redelivered is the notifier sample invoked twice against the same
// linegate local. One is enough to show the retry key holds across processes;
// each invocation costs a container start under QEMU.
const redelivered = "notifier-crash-burst.json"

// invoke runs `sam local invoke fn --event events/sample` as a developer
// does from the repository's root, and fails the test unless the function
// answered (an INIT failure, a crash, a timeout or a handler error fail it,
// with the log).
func invoke(t *testing.T, sam *samcli.CLI, built samcli.Built, fn, sample string) samcli.Invocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// No registry here: the images are local (Docker still pulls a missing
	// base image when it builds SAM's runtime image).
	inv, err := sam.Invoke(ctx, built, fn, filepath.Join("events", sample), "--skip-pull-image")
	if err != nil {
		t.Fatalf("sam local invoke %s -e events/%s: %v\n%s", fn, sample, err, inv.Log)
	}
	if testing.Verbose() {
		t.Logf("sam local invoke %s -e events/%s:\n%s\n%s", fn, sample, inv.Log, inv.Response)
	}
	return inv
}

// checkWebhook checks the webhook's answer and what reached linegate local.
// The webhook hands events over (SQS SendMessage, EventBridge PutEvents on
// linegate local) before it answers, and linegate local queues them before it
// answers those calls; its worker logs an event in /_local/events when it
// receives it, before deleting it. So once the function has answered, an
// event it published is in a queue or in the event log: with nothing in
// either, it published nothing.
func checkWebhook(t *testing.T, rt *local.Runtime, inv samcli.Invocation, w outcome) {
	t.Helper()
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(inv.Response, &resp); err != nil {
		t.Fatalf("not a proxy response: %v: %s", err, inv.Response)
	}
	if resp.StatusCode != w.Status {
		t.Fatalf("statusCode %d, want %d (body %s)", resp.StatusCode, w.Status, resp.Body)
	}
	if w.Published == 0 {
		var evs []eventView
		inspect(t, rt, "/_local/events", &evs)
		var qs []queueView
		inspect(t, rt, "/_local/queues", &qs)
		for _, q := range qs {
			if q.Visible+q.InFlight > 0 {
				t.Errorf("queue %s holds %d messages; the sample should publish nothing", q.LogicalID, q.Visible+q.InFlight)
			}
		}
		if len(evs) > 0 {
			t.Errorf("/_local/events has %+v; the sample should publish nothing", evs)
		}
		return
	}
	// The pipeline handles each event: wait for every one to be done.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var evs []eventView
		inspect(t, rt, "/_local/events", &evs)
		done := len(evs) == w.Published
		for _, e := range evs {
			done = done && e.Outcome == "ok"
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/_local/events: want %d events handled (outcome ok) within 2 minutes, last saw %+v", w.Published, evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkNotifier checks the notifier's answer and the cards linegate local's
// LINE API took: pushes to the operator (events/env.json's
// OPERATOR_LINE_IDS, linegate local's default operator).
func checkNotifier(t *testing.T, rt *local.Runtime, inv samcli.Invocation, w outcome) {
	t.Helper()
	checkFailures(t, inv, w.Failures)
	var sends []sendView
	inspect(t, rt, "/_local/line/messages", &sends)
	var pushes []sendView
	for _, s := range sends {
		if s.Via == string(linemock.ViaPush) && s.To == local.DefaultOperator && s.RetryKey != "" {
			pushes = append(pushes, s)
		}
	}
	if len(pushes) != w.Messages || len(pushes) != len(sends) || len(pushes) == 0 {
		t.Fatalf("%d pushes with a retry key to the operator among %d sends, want %d: %+v", len(pushes), len(sends), w.Messages, sends)
	}
	if w.Cards > 0 && len(pushes[0].Messages) != w.Cards {
		t.Errorf("%d cards in the push, want %d", len(pushes[0].Messages), w.Cards)
	}
	if w.Count > 0 && !strings.Contains(string(pushes[0].Messages[0]), fmt.Sprintf("×%d", w.Count)) {
		t.Errorf("the card lacks the count ×%d: %s", w.Count, pushes[0].Messages[0])
	}
}

// checkFailures reads an SQS-triggered function's response and compares its
// batch item failures with want.
func checkFailures(t *testing.T, inv samcli.Invocation, want []string) {
	t.Helper()
	var resp events.SQSEventResponse
	if err := json.Unmarshal(inv.Response, &resp); err != nil {
		t.Fatalf("not an SQSEventResponse: %v: %s", err, inv.Response)
	}
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	if w := slices.Sorted(slices.Values(want)); !slices.Equal(failed, w) {
		t.Errorf("batchItemFailures %v, want %v", failed, w)
	}
}
