package bench

// A stand-in for the Lambda sandbox that runs the real function binaries
// (the Makefile's build, as SAM deploys them) against Lambda's Runtime API,
// served here (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html):
// the function's stdout is exactly what Lambda would hand CloudWatch Logs,
// each invocation carries a request id and an active-tracing trace header as
// in Lambda, and the time from handing an invocation over to its answer is
// Lambda's Duration. Optionally the process runs in a cgroup whose CPU
// bandwidth is the share Lambda gives a memory size (memory / 1,769 MB of a
// vCPU), for the memory benchmark.

import (
	"bufio"
	"bytes"
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
	"os/exec"
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

const runtimePath = "/2018-06-01/runtime/"

// invocation is one event handed to the function.
type invocation struct {
	id, trace string
	event     []byte
	handed    chan time.Time // when the function took it (buffered)
}

// answer is what the function posted for an invocation.
type answer struct {
	id    string
	body  []byte
	error bool
	at    time.Time
}

// runtimeAPI serves Lambda's Runtime API to one function process.
type runtimeAPI struct {
	srv       *httptest.Server
	next      chan invocation
	answers   chan answer
	firstNext chan time.Time // the function's first /next: its INIT is over
	once      sync.Once
	stop      chan struct{}
}

func newRuntimeAPI(t testing.TB) *runtimeAPI {
	a := &runtimeAPI{next: make(chan invocation), answers: make(chan answer, 1), firstNext: make(chan time.Time, 1), stop: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(func() { close(a.stop); a.srv.Close() })
	return a
}

func (a *runtimeAPI) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, runtimePath)
	switch {
	case r.Method == http.MethodGet && path == "invocation/next":
		a.once.Do(func() { a.firstNext <- time.Now() })
		select {
		case inv := <-a.next:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:ap-northeast-1:123456789012:function:linegate-bench")
			h.Set("Lambda-Runtime-Trace-Id", inv.trace)
			inv.handed <- time.Now()
			_, _ = w.Write(inv.event)
		case <-a.stop:
		case <-r.Context().Done():
		}
	case r.Method == http.MethodPost && strings.HasPrefix(path, "invocation/"):
		b, _ := io.ReadAll(r.Body)
		rest := strings.TrimPrefix(path, "invocation/")
		id, kind, _ := strings.Cut(rest, "/")
		w.WriteHeader(http.StatusAccepted)
		a.answers <- answer{id: id, body: b, error: kind == "error", at: time.Now()}
	case r.Method == http.MethodPost && path == "init/error":
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		a.answers <- answer{id: "init", body: b, error: true, at: time.Now()}
	default:
		http.NotFound(w, r)
	}
}

// sandbox is one function process under a runtimeAPI. Its stdout is a
// file: what the function wrote before it answered an invocation is in the
// file when the answer arrives (a write to a file is visible once write(2)
// returns; a pipe would still hold it).
type sandbox struct {
	api     *runtimeAPI
	cmd     *exec.Cmd
	started time.Time
	out     *os.File
	read    int64 // how far invoke has read out
	stderr  *os.File
	seq     int
	exited  chan struct{}
}

// lines returns the complete lines written to out after offset, and the
// offset after the last of them.
func (s *sandbox) lines(offset int64) ([][]byte, int64, error) {
	b, err := os.ReadFile(s.out.Name())
	if err != nil {
		return nil, offset, err
	}
	b = b[offset:]
	end := bytes.LastIndexByte(b, '\n') + 1
	var out [][]byte
	for _, l := range bytes.Split(b[:end], []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out, offset + int64(end), nil
}

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

// startSandbox starts bootstrap with env under a new runtime API, in g when
// g is not nil.
func startSandbox(t testing.TB, bootstrap string, env map[string]string, g *cpuGroup) *sandbox {
	t.Helper()
	api := newRuntimeAPI(t)
	out, err := os.CreateTemp(t.TempDir(), "stdout-")
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := os.CreateTemp(t.TempDir(), "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{api: api, out: out, stderr: errOut, exited: make(chan struct{})}
	if g == nil {
		s.cmd = exec.Command(bootstrap)
	} else {
		s.cmd = exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && echo $$ > "$2/cgroup.procs" && exec "$3"`, "sh", g.cpu, g.acct, bootstrap)
	}
	s.cmd.Dir = filepath.Dir(bootstrap)
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(api.srv.URL, "http://")}
	for k, v := range env {
		s.cmd.Env = append(s.cmd.Env, k+"="+v)
	}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.stderr
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bootstrap, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// initDuration waits for the function's first /next call and returns the
// time since the process started: Lambda's INIT.
func (s *sandbox) initDuration(ctx context.Context) (time.Duration, error) {
	select {
	case at := <-s.api.firstNext:
		s.api.firstNext <- at // keep it for the next caller
		return at.Sub(s.started), nil
	case <-s.exited:
		return 0, fmt.Errorf("the function exited during INIT: %s", s.stderrText())
	case <-ctx.Done():
		return 0, fmt.Errorf("no INIT within the deadline: %w", ctx.Err())
	}
}

// invoke hands event to the function under an active-tracing trace header
// and waits for its answer: the body, Lambda's Duration of the invocation
// (from the hand-over to the answer), and the lines the function wrote
// meanwhile.
func (s *sandbox) invoke(ctx context.Context, event []byte) ([]byte, time.Duration, [][]byte, error) {
	s.seq++
	inv := invocation{id: fmt.Sprintf("c6af9ac6-7b61-11e6-9a41-%012d", s.seq), event: event, handed: make(chan time.Time, 1),
		trace: fmt.Sprintf("Root=1-6749f1a2-%024x;Parent=53995c3f42cd8ad8;Sampled=1", s.seq)}
	select {
	case s.api.next <- inv:
	case <-s.exited:
		return nil, 0, nil, fmt.Errorf("the function exited: %s", s.stderrText())
	case <-ctx.Done():
		return nil, 0, nil, fmt.Errorf("the function did not ask for the invocation: %w", ctx.Err())
	}
	handed := <-inv.handed
	select {
	case a := <-s.api.answers:
		if a.error || a.id != inv.id {
			return a.body, 0, nil, fmt.Errorf("invocation %s answered %s with an error (%v): %s", inv.id, a.id, a.error, a.body)
		}
		lines, next, err := s.lines(s.read)
		s.read = next
		return a.body, a.at.Sub(handed), lines, err
	case <-s.exited:
		return nil, 0, nil, fmt.Errorf("the function exited: %s", s.stderrText())
	case <-ctx.Done():
		return nil, 0, nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// stderrText is what the function wrote to stderr, and the end of its
// stdout (a function that fails its INIT says why there).
func (s *sandbox) stderrText() string {
	b, _ := os.ReadFile(s.stderr.Name())
	out, _ := os.ReadFile(s.out.Name())
	return string(b) + "\nstdout: " + string(out[max(0, len(out)-2000):])
}

// maxRSS is the process's peak resident memory (VmHWM), 0 if unknown.
func (s *sandbox) maxRSS() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
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
	bins map[string]string
}{bins: map[string]string{}}

// bootstrap builds functions/<fn> for this machine with the Makefile's
// recipe, once per test binary.
func bootstrap(t testing.TB, fn string) string {
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
	builds.bins[fn] = b.Path
	return b.Path
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
