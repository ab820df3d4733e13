package bench

// The real function binaries (the Makefile's build, as SAM deploys them) run
// under the real Lambda Runtime Interface Emulator (aws-lambda-rie, through
// internal/coldstart): the function's own output for an invocation, between
// the emulator's START and END lines, is what Lambda would hand CloudWatch
// Logs, and the emulator's REPORT Duration is Lambda's Duration. Optionally
// the emulator and so the function it forks run in a cgroup whose CPU
// bandwidth is the share Lambda gives a memory size (memory / 1,769 MB of a
// vCPU), for the memory benchmark.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/coldstart"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/pkg/bot"
)

// cpuGroup is a cgroup (v1: cpu and cpuacct) with Lambda's CPU share of a
// memory size, over a CFS period.
type cpuGroup struct{ cpu, acct string }

// lambdaVCPUMB is the memory at which a function has one vCPU
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
const lambdaVCPUMB = 1769

// newCPUGroup makes the cgroup, or says why it cannot.
func newCPUGroup(t testing.TB, name string, memoryMB int, period time.Duration) (*cpuGroup, error) {
	root := "/sys/fs/cgroup"
	g := &cpuGroup{cpu: filepath.Join(root, "cpu", name), acct: filepath.Join(root, "cpuacct", name)}
	for _, d := range []string{g.cpu, g.acct} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cgroup v1 cpu and cpuacct controllers not writable (%w): run as root on a cgroup v1 host", err)
		}
	}
	t.Cleanup(func() { _ = os.Remove(g.cpu); _ = os.Remove(g.acct) })
	us := period.Microseconds()
	quota := us * int64(memoryMB) / lambdaVCPUMB
	if err := os.WriteFile(filepath.Join(g.cpu, "cpu.cfs_period_us"), []byte(strconv.FormatInt(us, 10)), 0); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(g.cpu, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0); err != nil {
		return nil, err
	}
	return g, nil
}

// usage is the CPU time the group's processes used so far.
func (g *cpuGroup) usage() time.Duration {
	b, err := os.ReadFile(filepath.Join(g.acct, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(n)
}

// startFunction starts bin with env under aws-lambda-rie, each event with an
// active-tracing trace header of its own as in Lambda (the template turns
// active tracing on), with the emulator (and so the function it forks at the
// first invoke) in g when g is not nil.
// Without the emulator it skips loudly, and fails under CI (which installs
// it: .ci/run).
func startFunction(t testing.TB, bin coldstart.Binary, env map[string]string, g *cpuGroup) *coldstart.Invoker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := coldstart.FindEmulator(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("aws-lambda-rie is required in CI: %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: %v; the functions run under it in CI", err)
	}
	opts := []coldstart.Option{coldstart.WithEmulator(emu), coldstart.WithStartTimeout(30 * time.Second), coldstart.WithActiveTracing()}
	if g != nil {
		opts = append(opts, coldstart.WithCgroups(g.cpu, g.acct))
	}
	iv, err := coldstart.Start(ctx, bin, env, opts...)
	if err != nil {
		t.Fatalf("start %s: %v", bin.Path, err)
	}
	t.Cleanup(iv.Stop)
	return iv
}

// functionRSS is the peak resident memory (VmHWM) of the process in g that
// runs bin: the function, not the emulator beside it; 0 if unknown.
func functionRSS(g *cpuGroup, bin coldstart.Binary) int64 {
	procs, err := os.ReadFile(filepath.Join(g.cpu, "cgroup.procs"))
	if err != nil {
		return 0
	}
	for _, pid := range strings.Fields(string(procs)) {
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != bin.Path {
			continue
		}
		f, err := os.Open("/proc/" + pid + "/status")
		if err != nil {
			return 0
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// benchCloud is linegate local serving the AWS endpoints and LINE's
// Messaging API to functions run outside it, optionally behind a proxy that
// adds the capacity model's round trips (DefaultCapacityLatencies) to each
// call, as the real services would.
type benchCloud struct {
	rt  *local.Runtime
	url string
}

func startBenchCloud(t testing.TB, latencies bool) *benchCloud {
	t.Helper()
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", Logs: io.Discard,
		Getenv: func(string) string { return "" }, Bot: func(config.Worker) *bot.Router { return testbot.New() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c := &benchCloud{rt: rt, url: rt.URL()}
	if latencies {
		target, _ := url.Parse(rt.URL())
		rp := httputil.NewSingleHostReverseProxy(target)
		lat := DefaultCapacityLatencies
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var d time.Duration
			target := r.Header.Get("X-Amz-Target")
			switch {
			case strings.HasPrefix(r.URL.Path, "/v2/bot/"):
				d = lat.LINE
			case strings.HasPrefix(target, "DynamoDB"):
				d = lat.DynamoDB
			case strings.HasSuffix(target, ".PutEvents"):
				d = lat.PutEvents
			case strings.HasSuffix(target, ".SendMessageBatch"):
				d = lat.SendMessageBatch
			}
			time.Sleep(d) // the modelled round trip: the answer is the positive signal, not this wait
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(proxy.Close)
		c.url = proxy.URL
	}
	return c
}

// functionEnv is the environment Lambda gives fn at the template's defaults
// (JSON logs at INFO, active tracing with the X-Ray SDK, a CloudFormation-
// shaped function name), with the AWS and LINE endpoints pointed at c.
func functionEnv(t testing.TB, fn string, memoryMB int, c *benchCloud) map[string]string {
	t.Helper()
	env := coldstart.OfflineEnv(fn)
	sample, err := coldstart.SampleEnv("../..", fn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sample {
		env[k] = v
	}
	daemon, err := net.ListenPacket("udp", "127.0.0.1:0") // the X-Ray daemon: segments are sent and dropped
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, _, err := daemon.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	delete(env, "AWS_XRAY_SDK_DISABLED")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": c.url, "LINE_API_BASE_URL": c.url, "AWS_REGION": "ap-northeast-1",
		"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "INFO", "LOG_LEVEL": "INFO", "METRICS_NAMESPACE": "linegate",
		// CloudFormation names a function <stack>-<logical id>-<12 characters>.
		"AWS_LAMBDA_FUNCTION_NAME": "linegate-" + coldstart.LogicalID(fn) + "-Hk3f8sAbCdEf", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(memoryMB), "AWS_XRAY_DAEMON_ADDRESS": daemon.LocalAddr().String(),
		"AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR", "TRACING": "xray",
		// As `sam local` sets it: the secrets are the sample's plain values
		// (events/env.json) instead of SSM parameters; it changes nothing
		// else a function does (internal/config).
		"AWS_SAM_LOCAL": "true",
	} {
		env[k] = v
	}
	return env
}

// builds caches host builds of the functions for the test binary.
var builds = struct {
	sync.Mutex
	dir  string
	bins map[string]coldstart.Binary
}{bins: map[string]coldstart.Binary{}}

// bootstrap builds functions/<fn> for this machine with the Makefile's
// recipe, once per test binary.
func bootstrap(t testing.TB, fn string) coldstart.Binary {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("SKIPPED LOUDLY: the Makefile builds the functions for linux, this is %s", runtime.GOOS)
	}
	builds.Lock()
	defer builds.Unlock()
	if p, ok := builds.bins[fn]; ok {
		return p
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "bench-functions-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = d
	}
	b, err := coldstart.Build(context.Background(), "../..", fn, runtime.GOARCH, filepath.Join(builds.dir, fn))
	if err != nil {
		t.Fatal(err)
	}
	builds.bins[fn] = b
	return b
}

// workerEvent is events/worker-text-message.json as the n-th event of its
// chat: a webhookEventId and a reply token of its own, the token issued by
// the local LINE just now, and the event timestamped now.
func workerEvent(t testing.TB, c *benchCloud, n int) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../events/worker-text-message.json")
	if err != nil {
		t.Fatal(err)
	}
	tok := fmt.Sprintf("tok%027d", n)
	c.rt.LINE().IssueReplyToken(tok, time.Now())
	s := strings.NewReplacer("01JDSAMPLETEXT0000000000001", fmt.Sprintf("01JDSAMPLETEXT%013d", n),
		"nHuyWiB7yP5Zw52FIkcQobQuGDXCTA", tok, "1462629479859", strconv.FormatInt(time.Now().UnixMilli(), 10)).Replace(string(raw))
	return []byte(s)
}

// webhookEvent is events/webhook-text-message.json: API Gateway's proxy
// event for one signed text message.
func webhookEvent(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../events/webhook-text-message.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
