package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/testio"
)

// These tests run a real `linegate local` process, built from this package,
// and read its memory from /proc: a dev server must stay flat over a long
// run and under hostile bodies.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// linegateBinary builds this command once per test binary.
func linegateBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds and runs a linegate local process")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("SKIPPED LOUDLY: no /proc to read RSS from: %v", err)
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "linegate-process-test")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "linegate")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// process is a running linegate local.
type process struct {
	cmd     *exec.Cmd
	url     string // base URL
	webhook string
	console *testio.Buffer
}

// readyURLs reads the base and webhook URLs from linegate local's ready
// line ("linegate local ready: webhook http://127.0.0.1:PORT/webhook (…").
func readyURLs(line string) (base, webhook string, ok bool) {
	_, rest, ok := strings.Cut(line, "ready: webhook http://")
	if !ok {
		return "", "", false
	}
	webhook, _, _ = strings.Cut("http://"+rest, " ")
	host, _, _ := strings.Cut(rest, "/")
	return "http://" + host, webhook, true
}

// startProcess starts linegate local on a free loopback port and waits for
// its ready line.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcessIn(t, "", args...)
}

// startProcessIn is startProcess with the working directory dir ("": this
// one) and its template.
func startProcessIn(t *testing.T, dir string, args ...string) *process {
	t.Helper()
	return startProcessWith(t, dir, nil, args...)
}

// startProcessWith is startProcessIn with env added to the process's
// environment (a later entry wins).
func startProcessWith(t *testing.T, dir string, env []string, args ...string) *process {
	t.Helper()
	bin := linegateBinary(t)
	tmpl, _ := filepath.Abs("../../template.yaml")
	if dir != "" {
		tmpl = filepath.Join(dir, "template.yaml")
	}
	cmd := exec.Command(bin, append([]string{"local", "--addr", "127.0.0.1:0", "--template", tmpl}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "LINE_CHANNEL_ACCESS_TOKEN=", "LINE_CHANNEL_SECRET="), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, console: &testio.Buffer{}}
	cmd.Stderr = p.console
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("console (last 3000 bytes): %s", tail(p.console.String(), 3000))
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if base, hook, ok := readyURLs(line); ok {
				p.url, p.webhook = base, hook
				ready <- line
			}
			_, _ = p.console.Write([]byte(line + "\n"))
		}
	}()
	// The ready line comes once the bot's process (the module's
	// functions/worker, built first) answers.
	select {
	case <-ready:
	case <-time.After(3 * time.Minute):
		t.Fatalf("no ready line after 3 minutes; console:\n%s", p.console.String())
	}
	return p
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// status reads a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func (p *process) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc status", field)
	return 0
}

// settledRSS is the process's RSS once the runtime has had a few seconds
// to hand freed memory back after a burst (Go's scavenger is paced): the
// lowest of the readings over settle.
func (p *process) settledRSS(t *testing.T) int64 {
	t.Helper()
	const settle = 5 * time.Second
	low := p.status(t, "VmRSS")
	for end := time.Now().Add(settle); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		low = min(low, p.status(t, "VmRSS"))
	}
	return low
}

// drained waits until no queue holds anything but dead letters.
func (p *process) drained(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var qs []struct {
		Name       string `json:"name"`
		Visible    int    `json:"visible"`
		InFlight   int    `json:"inFlight"`
		DeadLetter bool   `json:"deadLetter"`
	}
	for first := true; first || time.Now().Before(deadline); first = false {
		resp, err := http.Get(p.url + "/_local/queues")
		if err != nil {
			t.Fatal(err)
		}
		qs = qs[:0]
		err = json.NewDecoder(resp.Body).Decode(&qs)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, q := range qs {
			if !q.DeadLetter {
				busy += q.Visible + q.InFlight
			}
		}
		if busy == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("queues not drained after %v: %+v", timeout, qs)
}

// send delivers n events, perBody to a webhook body, concurrency bodies at
// once, each from its own user, at most rate events a second (0: as fast
// as the webhook answers).
func send(t *testing.T, p *process, from, n, perBody, concurrency, rate int) {
	t.Helper()
	// A generous attempt timeout: these tests count effects and memory, not
	// the webhook's speed, which a loaded machine can push past LINE's 2 s.
	lp := lineplatform.New(p.webhook, []byte(local.DefaultSecret), lineplatform.WithTimeout(30*time.Second))
	jobs := make(chan int)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range jobs {
				evs := make([]json.RawMessage, 0, perBody)
				for i := start; i < start+perBody && i < from+n; i++ {
					evs = append(evs, lp.Text(fmt.Sprintf("U%032x", i), "hello "+strconv.Itoa(i)))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				d, err := lp.Deliver(ctx, evs...)
				cancel()
				if err != nil || !d.Delivered {
					select {
					case errs <- fmt.Errorf("delivery from %d: %+v %v", start, d.Attempts, err):
					default:
					}
				}
			}
		}()
	}
	var tick <-chan time.Time
	if rate > 0 {
		tk := time.NewTicker(time.Second * time.Duration(perBody) / time.Duration(rate))
		defer tk.Stop()
		tick = tk.C
	}
	for i := from; i < from+n; i += perBody {
		if tick != nil {
			<-tick
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// 20,000 events through linegate local leave its RSS within 1.5× of what
// it was once its bounded buffers were full (after 11,000), plus what the second idempotency record of
// each replied event takes: the event log, the sent messages, the traces
// and the FIFO deduplication window are bounded, and the idempotency
// records, which are kept 48 hours as in Lambda and so do grow with the
// traffic, take a few hundred bytes each (internal/awswire's
// TestTablesKeepRecordsCompactly bounds them on their own). Each replied
// event keeps two — its completion and its reply's attempt — where the
// 1.5× was set for one: the second is allowed for explicitly, at
// attemptRecordRSS each. The
// events come at a steady 500 a second, which the local workers keep up
// with on two shared cores: a dev server's long run, not a burst that
// parks thousands of messages in a queue (the peak a backlog takes is
// kept by Go's heap for a while, and is no leak).
func TestLongRunRSSStaysFlat(t *testing.T) {
	p := startProcess(t, "--time-scale", "30")
	// The baseline is taken once the bounded buffers are full (the event
	// log keeps local.DefaultEventLogSize entries): what they fill between 2,000
	// and 10,000 events is their bound, not a leak.
	const total, perBody, conc, rate = 20_000, 10, 8, 500
	const first = local.DefaultEventLogSize + 1_000
	begin := time.Now()
	send(t, p, 0, first, perBody, conc, rate)
	p.drained(t, time.Minute)
	baseline := p.settledRSS(t)
	send(t, p, first, total-first, perBody, conc, rate)
	p.drained(t, 2*time.Minute)
	after20k := p.settledRSS(t)
	t.Logf("RSS after %d events: %.1f MiB; after %d: %.1f MiB (%.2f×), peak %.1f MiB; %d events in %v",
		first, mib(baseline), total, mib(after20k), float64(after20k)/float64(baseline), mib(p.status(t, "VmHWM")), total, time.Since(begin).Round(time.Second))
	limit := 1.5*float64(baseline) + float64((total-first)*attemptRecordRSS)
	if float64(after20k) > limit {
		t.Fatalf("RSS grew from %.1f MiB to %.1f MiB over %d events: more than 1.5× and the reply attempts' records (%.1f MiB)",
			mib(baseline), mib(after20k), total, mib(int64(limit)))
	}
	var evs []json.RawMessage
	resp, err := http.Get(p.url + "/_local/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != local.DefaultEventLogSize {
		t.Fatalf("/_local/events holds %d entries after %d events, want the newest %d", len(evs), total, local.DefaultEventLogSize)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// attemptRecordRSS is what one reply's attempt record may add to the RSS:
// about 250 bytes of live heap (as a completion record, measured in
// internal/awswire), rounded up to 300, twice that for the heap the
// garbage collector lets grow past what is live (GOGC=100).
const attemptRecordRSS = 2 * 300

// zeroes is an endless body.
type zeroes struct{}

func (zeroes) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// 60 unsigned 10 MB bodies, 20 at a time, raise the process's peak memory
// by less than 100 MB (each is read through the webhook's 1 MiB limit, never
// buffered whole), and all get 413. Meanwhile a connection that never
// finishes its headers is closed within the read-header timeout, and one
// that never sends the body it announced within the read timeout.
func TestHostileClientsAreBounded(t *testing.T) {
	p := startProcess(t)
	base := p.status(t, "VmRSS")

	addr := strings.TrimPrefix(p.url, "http://")
	lim := local.DefaultLimits
	// Headers never finished: the read-header timeout ends it. Headers
	// complete, the announced body never sent: the read timeout ends it.
	slow := testio.Stall(t, addr, "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n", lim.ReadHeaderTimeout+10*time.Second)
	mute := testio.Stall(t, addr, "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", lim.ReadTimeout+10*time.Second)

	const bodies, conc, size = 60, 20, 10 << 20
	statuses := make(chan int, bodies)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for range bodies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			req, _ := http.NewRequest(http.MethodPost, p.webhook, io.LimitReader(zeroes{}, size))
			req.ContentLength = size
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusRequestEntityTooLarge && s != 0 { // 0: the server closed the connection after answering early
			t.Errorf("a 10 MB body answered %d, want 413", s)
		}
	}
	peak := p.status(t, "VmHWM")
	t.Logf("RSS before %.1f MiB, peak after %d × 10 MB bodies %.1f MiB (+%.1f MiB)", mib(base), bodies, mib(peak), mib(peak-base))
	if peak-base >= 100<<20 {
		t.Fatalf("peak memory rose by %.1f MiB, want under 100 MiB", mib(peak-base))
	}

	for _, c := range []struct {
		what    string
		closed  <-chan testio.Closed
		timeout time.Duration
	}{{"a header-only connection", slow, lim.ReadHeaderTimeout}, {"a connection that never sent its body", mute, lim.ReadTimeout}} {
		if got := <-c.closed; !got.ByServer || got.After > c.timeout+2*time.Second {
			t.Errorf("%s: closed by the server %v after %v, want within %v", c.what, got.ByServer, got.After, c.timeout)
		}
	}
}
