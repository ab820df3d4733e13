package coldstart

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Errors Invoke returns; callers branch on them with errors.Is.
var (
	// ErrInitFailed means the function never became ready: its process
	// exited (or timed out) before asking for its first event, as Lambda's
	// Runtime.ExitError. The emulator's and the function's output (Logs)
	// say why.
	ErrInitFailed = errors.New("function init failed")
	// ErrInvoke means the emulator answered the invocation with a non-200
	// status: the runtime crashed or timed out mid-invocation.
	ErrInvoke = errors.New("invocation failed")
	// ErrStopped means the emulator is no longer running.
	ErrStopped = errors.New("emulator stopped")
	// ErrNoReport means the emulator answered an invocation Run made but
	// never printed its REPORT line, so its Duration and output are unknown.
	ErrNoReport = errors.New("no REPORT line for the invocation")
	// errExitedEarly means the emulator quit before it listened, usually
	// because another process took one of its ports; Start retries.
	errExitedEarly = errors.New("emulator exited before listening")
)

// invokePath is where the emulator accepts invocations, as Lambda's Invoke
// API (the function name is always "function").
const invokePath = "/2015-03-31/functions/function/invocations"

// maxLogs caps how much emulator and function output an Invoker keeps.
const maxLogs = 1 << 20

// Invoker is one function running under the Runtime Interface Emulator: a
// fresh execution environment, as `sam local invoke` creates per call. The
// emulator initialises the function lazily, on the first Invoke (that call is
// the cold start; later ones are warm). Invocations are serialised, as in
// one Lambda execution environment. Stop it when done.
type Invoker struct {
	cmd    *exec.Cmd
	tracer *tracer // WithActiveTracing's proxy, or nil
	url    string
	client *http.Client

	mu      sync.Mutex // serialises Invoke
	invoked bool

	exited   chan struct{} // closed when the emulator process has exited
	scanned  chan struct{} // closed when its output has been read to the end
	initSeen chan struct{} // closed at the first INIT REPORT line

	state      sync.Mutex
	initDur    time.Duration
	initStatus string
	logs       bytes.Buffer
	truncated  bool
	runs       map[string]*run // Run's invocations, by request id, until reported
	current    *run            // the invocation between its START and END lines

	stopOnce sync.Once
}

// Start launches aws-lambda-rie with bin as the bootstrap, listening on free
// loopback ports (both its invoke endpoint and the Runtime API, so several
// emulators run side by side), with exactly env as the function's
// environment plus PATH and AWS_SAM_LOCAL=true (as `sam local` sets it; env
// may override both). Nothing else of the caller's environment leaks in, so a
// developer's AWS profile is never used. The emulator adds the Lambda
// variables (AWS_LAMBDA_FUNCTION_NAME=test_function unless env sets it,
// AWS_LAMBDA_RUNTIME_API, ...). AWS_LAMBDA_FUNCTION_TIMEOUT (seconds, default
// 300) bounds each invocation.
//
// ctx bounds only the start; the emulator runs until Stop. Options:
// WithEmulator, WithStartTimeout. It returns an error wrapping ErrNoEmulator
// when aws-lambda-rie cannot be found.
func Start(ctx context.Context, bin Binary, env map[string]string, opts ...Option) (*Invoker, error) {
	o := newOptions(opts)
	emu := o.emulator
	if emu == "" {
		p, err := FindEmulator(ctx)
		if err != nil {
			return nil, err
		}
		emu = p
	}
	abs, err := filepath.Abs(bin.Path)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin.Path, err)
	}
	var last error
	for range 3 {
		iv, err := launch(ctx, emu, abs, env, o)
		if errors.Is(err, errExitedEarly) {
			last = err
			continue
		}
		return iv, err
	}
	return nil, last
}

func launch(ctx context.Context, emu, bootstrap string, env map[string]string, o options) (*Invoker, error) {
	timeout := o.startTimeout
	invokeAddr, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bootstrap, err)
	}
	runtimeAddr, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bootstrap, err)
	}
	// --log-level is explicit so a LOG_LEVEL meant for the function cannot
	// silence the INIT REPORT line.
	args := []string{emu, "--log-level", "info",
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr}
	var tr *tracer
	if o.tracing {
		if tr, err = startTracer(runtimeAddr); err != nil {
			return nil, fmt.Errorf("start %s: %w", bootstrap, err)
		}
		c, err := tr.command(bootstrap)
		if err != nil {
			tr.close()
			return nil, fmt.Errorf("start %s: %w", bootstrap, err)
		}
		args = append(args, c...)
	} else {
		args = append(args, bootstrap)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = environ(env)
	ownProcessGroup(cmd)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bootstrap, err)
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if tr != nil {
			tr.close()
		}
		return nil, fmt.Errorf("start %s under %s: %w", bootstrap, emu, err)
	}
	pw.Close() // the child holds its own copy
	// The emulator forks the bootstrap at the first Invoke, which cannot come
	// before launch returns: the function inherits the groups.
	if err := joinCgroups(cmd.Process.Pid, o.cgroups); err != nil {
		signalGroup(cmd, true)
		_ = cmd.Wait()
		pr.Close()
		if tr != nil {
			tr.close()
		}
		return nil, fmt.Errorf("start %s: %w", bootstrap, err)
	}
	iv := &Invoker{
		cmd:      cmd,
		tracer:   tr,
		url:      "http://" + invokeAddr + invokePath,
		client:   &http.Client{Transport: &http.Transport{Proxy: nil}},
		exited:   make(chan struct{}),
		scanned:  make(chan struct{}),
		initSeen: make(chan struct{}),
		runs:     map[string]*run{},
	}
	go func() {
		_ = cmd.Wait()
		close(iv.exited)
	}()
	go iv.read(pr)

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("tcp", invokeAddr, time.Second); err == nil {
			c.Close()
			return iv, nil
		}
		select {
		case <-iv.exited:
			<-iv.scanned
			if tr != nil {
				tr.close()
			}
			return nil, fmt.Errorf("start %s: %w: %s", bootstrap, errExitedEarly, lastLines(iv.Logs(), 5))
		case <-ctx.Done():
			iv.Stop()
			return nil, fmt.Errorf("start %s: %w", bootstrap, ctx.Err())
		case <-deadline.C:
			iv.Stop()
			return nil, fmt.Errorf("start %s: emulator not listening on %s after %v: %s", bootstrap, invokeAddr, timeout, lastLines(iv.Logs(), 5))
		case <-tick.C:
		}
	}
}

// environ is the emulator's (and so the function's) environment: PATH and
// AWS_SAM_LOCAL, overridden by env, in a stable order.
func environ(env map[string]string) []string {
	all := map[string]string{"PATH": os.Getenv("PATH"), "AWS_SAM_LOCAL": "true"}
	maps.Copy(all, env)
	out := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// read consumes the emulator's output: it keeps it for Logs and records the
// first INIT's duration and status.
func (iv *Invoker) read(r io.ReadCloser) {
	defer close(iv.scanned)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			iv.record(line)
		}
		if err != nil {
			return
		}
	}
}

func (iv *Invoker) record(line string) {
	iv.state.Lock()
	defer iv.state.Unlock()
	if iv.logs.Len()+len(line) <= maxLogs {
		iv.logs.WriteString(line)
	} else if !iv.truncated {
		iv.truncated = true
		iv.logs.WriteString("[coldstart: output truncated]\n")
	}
	text := trimEOL(line)
	switch l := parseLine(text); l.kind {
	case lineStart:
		iv.current = iv.runs[l.request]
	case lineEnd:
		iv.current = nil
	case lineInvokeDone:
		if iv.current != nil && !iv.current.runtimeDone {
			iv.current.duration, iv.current.runtimeDone = l.duration, true
		}
	case lineReport:
		if r := iv.runs[l.request]; r != nil {
			if !r.runtimeDone {
				r.duration = l.duration
			}
			delete(iv.runs, l.request)
			close(r.reported)
		}
	case lineOther:
		if iv.current != nil && !emulatorLine(text) {
			iv.current.output = append(iv.current.output, text)
		}
	case lineInitDone:
		if iv.initStatus == "" {
			iv.initStatus = l.status
		}
	case lineInitReport:
		select {
		case <-iv.initSeen:
		default:
			iv.initDur = l.duration
			close(iv.initSeen)
		}
	}
}

func trimEOL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// Invoke sends event to the function and returns its response payload (the
// handler's result as JSON). A handler that returned an error yields the
// runtime's error document and a *FunctionError. The first call performs the
// cold start; when it returns, Init reports its duration. Errors wrap
// ErrInitFailed when the function never started, ErrInvoke when the emulator
// answered non-200, and ErrStopped after Stop.
func (iv *Invoker) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return iv.invoke(ctx, event, "")
}

// invoke is Invoke under iv.mu, with requestID (when not "") as the
// invocation's request id.
func (iv *Invoker) invoke(ctx context.Context, event []byte, requestID string) ([]byte, error) {
	select {
	case <-iv.exited:
		return nil, fmt.Errorf("invoke: %w", ErrStopped)
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, iv.url, bytes.NewReader(event))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if requestID != "" {
		req.Header.Set("X-Amzn-RequestId", requestID)
	}
	resp, err := iv.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("invoke: read response: %w", err)
	}
	first := !iv.invoked
	iv.invoked = true
	if first {
		iv.awaitInit(ctx)
	}
	if st := iv.InitStatus(); first && st != "" && st != "success" {
		return body, fmt.Errorf("invoke: %w (status %s): %s", ErrInitFailed, st, snippet(body))
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("invoke: %w: emulator answered %d: %s", ErrInvoke, resp.StatusCode, snippet(body))
	}
	if fe, ok := parseFunctionError(body); ok {
		return body, fe
	}
	return body, nil
}

// awaitInit waits for the INIT REPORT line of the first invocation. The
// emulator logs it before it hands the event over, so it is normally already
// in the pipe; the bound only guards against an emulator that never logs it.
func (iv *Invoker) awaitInit(ctx context.Context) {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-iv.initSeen:
	case <-iv.scanned:
	case <-ctx.Done():
	case <-t.C:
	}
}

// Init is the duration of the function's INIT phase as the emulator measured
// it (exec of the bootstrap until the runtime's first request for work):
// Lambda's "Init Duration". It is 0 until the first Invoke has returned, and
// when the emulator did not report it.
func (iv *Invoker) Init() time.Duration {
	iv.state.Lock()
	defer iv.state.Unlock()
	return iv.initDur
}

// InitStatus is the emulator's verdict on the first INIT: "success",
// "error", ...; "" before the first Invoke.
func (iv *Invoker) InitStatus() string {
	iv.state.Lock()
	defer iv.state.Unlock()
	return iv.initStatus
}

// Logs returns what the emulator and the function wrote so far (the
// function's JSON logs, START/END/REPORT lines and the emulator's own), at
// most 1 MiB.
func (iv *Invoker) Logs() string {
	iv.state.Lock()
	defer iv.state.Unlock()
	return iv.logs.String()
}

// Stop ends the emulator, which on SIGTERM kills the function process it
// started; if the emulator has not exited after 5 s its process group is
// killed (the function runs in a group of its own, so a stuck emulator may
// then leave it behind until its Runtime API connection drops). Stop waits
// for the exit and is safe to call more than once.
func (iv *Invoker) Stop() {
	iv.stopOnce.Do(func() {
		signalGroup(iv.cmd, false)
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-iv.exited:
		case <-t.C:
			signalGroup(iv.cmd, true)
			<-iv.exited
		}
		t.Reset(2 * time.Second)
		select {
		case <-iv.scanned:
		case <-t.C:
		}
		iv.client.CloseIdleConnections()
		if iv.tracer != nil {
			iv.tracer.close()
		}
	})
}

func snippet(b []byte) string {
	const n = 512
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}

// Invocation is one invocation as Run saw it: what Lambda would report and
// hand CloudWatch Logs for it.
type Invocation struct {
	// RequestID is the invocation's request id (the function's
	// lambdacontext AwsRequestID).
	RequestID string
	// Body is the function's response payload, as Invoke returns it.
	Body []byte
	// TraceID is the Root of the X-Ray trace header the function got with
	// the event under WithActiveTracing ("1-6749f1a2-..."), else "".
	TraceID string
	// TraceHeader is that whole header (Root, Parent: the id of Lambda's
	// segment for the invocation, Sampled), else "".
	TraceHeader string
	// Duration is Lambda's Duration of the invocation: the runtime's time
	// from taking the event to its answer, from rapid's INVOKE RTDONE line
	// (Lambda's platform.runtimeDone), so a cold start's INIT is not in it;
	// the REPORT line's Duration when the emulator did not log that line.
	Duration time.Duration
	// Output is what the function wrote (stdout and stderr) between the
	// emulator's START and END lines for the invocation, one line each
	// without the newline, and none of the emulator's own lines: what
	// Lambda puts in the log stream for the invocation besides its
	// START/END/REPORT. On the cold start it includes what the function
	// wrote during its INIT, which the emulator runs inside the first
	// invoke.
	Output []string
}

// run is an invocation Run waits on; record fills it in.
type run struct {
	output      []string
	duration    time.Duration
	runtimeDone bool          // duration is the INVOKE RTDONE line's
	reported    chan struct{} // closed at its REPORT line
}

// reportWait bounds how long Run waits for the REPORT line after the
// emulator answered: the emulator prints it before it answers, so it is
// normally already in the pipe.
const reportWait = 5 * time.Second

// Run is Invoke that also returns the invocation's REPORT Duration and the
// function's own output for it. It waits for the emulator's REPORT line
// (bounded by ctx and 5 s; ErrNoReport without it). Errors are Invoke's; a
// *FunctionError comes with the Invocation filled in.
func (iv *Invoker) Run(ctx context.Context, event []byte) (Invocation, error) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	id, err := newRequestID()
	if err != nil {
		return Invocation{}, fmt.Errorf("invoke: %w", err)
	}
	r := &run{reported: make(chan struct{})}
	iv.state.Lock()
	iv.runs[id] = r
	iv.state.Unlock()
	forget := func() {
		iv.state.Lock()
		delete(iv.runs, id)
		if iv.current == r {
			iv.current = nil
		}
		iv.state.Unlock()
	}
	body, err := iv.invoke(ctx, event, id)
	inv := Invocation{RequestID: id, Body: body}
	var fe *FunctionError
	if err != nil && !errors.As(err, &fe) {
		forget()
		return inv, err
	}
	t := time.NewTimer(reportWait)
	defer t.Stop()
	select {
	case <-r.reported:
	case <-iv.scanned:
		// The output ended; the REPORT may have been its last line.
		select {
		case <-r.reported:
		default:
			forget()
			return inv, fmt.Errorf("invoke %s: %w: the emulator exited", id, ErrNoReport)
		}
	case <-ctx.Done():
		forget()
		return inv, fmt.Errorf("invoke %s: %w: %w", id, ErrNoReport, ctx.Err())
	case <-t.C:
		forget()
		return inv, fmt.Errorf("invoke %s: %w within %v", id, ErrNoReport, reportWait)
	}
	iv.state.Lock()
	inv.Duration, inv.Output = r.duration, r.output
	iv.state.Unlock()
	if iv.tracer != nil {
		inv.TraceHeader = iv.tracer.take(id)
		inv.TraceID = traceRoot(inv.TraceHeader)
	}
	return inv, err
}

// newRequestID is a random request id shaped as Lambda's (a UUID).
func newRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("request id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// emulatorLine reports whether line is one of the emulator's own log lines
// ("02 Dec 2026 01:50:00,123 [INFO] (rapid) ..."), not the function's.
func emulatorLine(line string) bool {
	return emulatorLog.MatchString(line)
}

var emulatorLog = regexp.MustCompile(`^\d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2},\d{3} \[[A-Z]+\] `)

// joinCgroups writes pid into the cgroup.procs of each of dirs.
func joinCgroups(pid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("put the emulator in cgroup %s: %w", d, err)
		}
	}
	return nil
}
