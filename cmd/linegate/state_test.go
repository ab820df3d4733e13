package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
)

// crashToken is the channel access token the test's LINE API accepts.
const crashToken = "crash-test-token"

// freeAddr is a loopback address nothing listens on now: both runs of the
// crash test serve on it, so LINE's redeliveries reach the second.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// crashSize is the size of the repeated-kill test: how many events, how
// many SIGKILLs spread over them, and how fast LINE sends them (events a
// second). The defaults keep it well under a minute on two busy cores;
// the larger run by hand (docs/local.md) sets LINEGATE_CRASH_EVENTS,
// LINEGATE_CRASH_KILLS and LINEGATE_CRASH_RATE.
func crashSize(t *testing.T) (events, kills, rate int) {
	t.Helper()
	get := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	return get("LINEGATE_CRASH_EVENTS", 600), get("LINEGATE_CRASH_KILLS", 8), get("LINEGATE_CRASH_RATE", 120)
}

// TestRepeatedSIGKILLAnswersEveryEventOnce kills `linegate local --state
// DIR` (a real process) with SIGKILL again and again while LINE sends it
// events, starting it again each time on the same DIR and address, and
// checks what LINE and the event log end up with: every event whose
// webhook request got a 200 (before or after a kill) answered exactly once
// — none lost, none answered twice — and its final outcome in
// /_local/events "ok".
//
// LINE is played by the test, in the test's own process, so it outlives
// every kill as LINE outlives a crashed bot: it delivers with webhook
// redelivery on (a body whose request a kill cut is sent again, to the
// restarted process), and it is the Messaging API the bot replies to
// (LINE_CHANNEL_ACCESS_TOKEN and LINE_API_BASE_URL point the functions at
// it), refusing a reply token used once as LINE does; its record of sent
// messages is the durable observable. A handler killed after its reply
// reached LINE and before its completion runs again after the restart: the
// reply's attempt, recorded in DIR before the reply, makes LINE's refusal
// of the used token count as delivered instead of a push of the same
// answer. The event log's final outcome commits with the completion, so an
// event answered once never shows "duplicate" when its next receive finds
// it done. It runs at the time scale of `make local` (30).
func TestRepeatedSIGKILLAnswersEveryEventOnce(t *testing.T) {
	total, kills, rate := crashSize(t)
	mock := linemock.New(linemock.WithTokens(crashToken), linemock.WithMaxRecords(max(10_000, 2*total)))
	lineAPI := httptest.NewUnstartedServer(mock)
	var lineConns atomic.Int64 // open connections to LINE: only linegate's
	lineAPI.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			lineConns.Add(1)
		case http.StateClosed, http.StateHijacked:
			lineConns.Add(-1)
		}
	}
	lineAPI.Start()
	defer lineAPI.Close()
	dir, addr := t.TempDir(), freeAddr(t)
	env := []string{"LINE_CHANNEL_ACCESS_TOKEN=" + crashToken, "LINE_API_BASE_URL=" + lineAPI.URL}
	args := []string{"--addr", addr, "--time-scale", "30", "--state", dir}
	p := startProcessWith(t, "", env, args...)

	lp := lineplatform.New(p.webhook, []byte(local.DefaultSecret), lineplatform.WithRedelivery(240, 250*time.Millisecond),
		lineplatform.WithTimeout(5*time.Second), lineplatform.WithReplyTokenHook(mock.IssueReplyToken))
	const perBody, conc = 2, 8
	text := func(i int) string { return fmt.Sprintf("crash %d", i) }
	var (
		mu      sync.Mutex
		acked   = map[string]int{} // webhookEventId -> event index
		failed  []string
		senders sync.WaitGroup
	)
	jobs := make(chan int)
	for range conc {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for start := range jobs {
				var evs []json.RawMessage
				for i := start; i < min(start+perBody, total); i++ {
					evs = append(evs, lp.Text(fmt.Sprintf("U%032x", i), text(i)))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				d, err := lp.Deliver(ctx, evs...)
				cancel()
				mu.Lock()
				for k, id := range d.WebhookEventIDs {
					if d.Delivered {
						acked[id] = start + k
					}
				}
				if !d.Delivered {
					failed = append(failed, fmt.Sprintf("body from %d: %v (%d attempts)", start, err, len(d.Attempts)))
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		tick := time.NewTicker(time.Second * perBody / time.Duration(rate))
		defer tick.Stop()
		for i := 0; i < total; i += perBody {
			<-tick.C
			jobs <- i
		}
		close(jobs)
	}()
	ackedNow := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	// The kills, spread over the run: each once that many events are
	// acknowledged; the restart waits for the dead process's connections
	// to LINE to close (whatever it sent whole is served and recorded
	// first), then starts linegate local again on DIR.
	began := time.Now()
	for k := 1; k <= kills; k++ {
		at := k * total / (kills + 1)
		for deadline := time.Now().Add(60 * time.Second); ackedNow() < at; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: %d of the %d acknowledged events it waits for after 60 s", k, ackedNow(), at)
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		for deadline := time.Now().Add(10 * time.Second); lineConns.Load() > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: %d connections to LINE still open 10 s after it", k, lineConns.Load())
			}
		}
		t.Logf("kill %d after %d acknowledged events", k, ackedNow())
		p = startProcessWith(t, "", env, args...)
	}
	sent := make(chan struct{})
	go func() { senders.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-time.After(3 * time.Minute):
		t.Fatalf("LINE still delivering 3 minutes on (%d acknowledged)", ackedNow())
	}
	if len(failed) > 0 {
		t.Fatalf("%d bodies never acknowledged, with redelivery on: %v", len(failed), failed[:min(3, len(failed))])
	}

	// Done when every acknowledged event has its final outcome in the
	// event log and nothing is left in the queues: nothing more can run.
	outcomes := func() map[string]string {
		resp, err := http.Get(p.url + "/_local/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var evs []struct {
			WebhookEventID string `json:"webhookEventId"`
			Outcome        string `json:"outcome"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
			t.Fatal(err)
		}
		out := make(map[string]string, len(evs))
		for _, e := range evs {
			out[e.WebhookEventID] = e.Outcome
		}
		return out
	}
	var notOK []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := outcomes()
		notOK = notOK[:0]
		for id := range acked {
			if got[id] != "ok" {
				notOK = append(notOK, id+": "+cmpOr(got[id], "missing"))
			}
		}
		if len(notOK) == 0 {
			break
		}
		if time.Now().After(deadline) {
			break // reported below, with the echoes
		}
	}
	p.drained(t, 60*time.Second)
	echoes := map[int]int{}
	for _, r := range mock.Messages() {
		for _, m := range r.Messages {
			var msg struct{ Text string }
			if json.Unmarshal(m, &msg) == nil {
				var i int
				if _, err := fmt.Sscanf(msg.Text, "crash %d", &i); err == nil {
					echoes[i]++
				}
			}
		}
	}
	lost, twice := 0, 0
	for id, i := range acked {
		switch n := echoes[i]; {
		case n == 0:
			lost++
			t.Errorf("event %d (%s) acknowledged and never answered", i, id)
		case n > 1:
			twice++
			t.Errorf("event %d (%s) answered %d times", i, id, n)
		}
	}
	if len(notOK) > 0 {
		t.Errorf("%d acknowledged events without the final outcome ok in /_local/events, e.g. %v", len(notOK), notOK[:min(5, len(notOK))])
	}
	if len(acked) != total {
		t.Errorf("%d of %d events acknowledged", len(acked), total)
	}
	// Each reply LINE refused is a retry that found its token used by the
	// killed run's reply (every token here was issued and fresh): taken as
	// delivered, where the answer used to be pushed a second time.
	refused := mock.Calls()[linemock.Call{Path: linemock.PathReply, Status: http.StatusBadRequest}]
	t.Logf("%d events, %d SIGKILLs: %d acknowledged, %d lost, %d answered twice, %d not ok in the event log, %d replies refused as used (taken as delivered); %v in all",
		total, kills, len(acked), lost, twice, len(notOK), refused, time.Since(began).Round(100*time.Millisecond))
	if !strings.Contains(p.console.String(), "state: kept in "+dir) {
		t.Errorf("the banner does not say where the state is kept:\n%s", p.console.String())
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// A state file that is not whole — truncated, overwritten, or empty —
// stops `linegate local --state DIR` at once with one line on stderr that
// names the file and says what to do: no bbolt panic and stack, and never
// a silent start on an empty state while the banner says state is kept.
func TestLocalRefusesADamagedStateFile(t *testing.T) {
	tmpl, err := filepath.Abs("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A state directory as a run leaves it: its queues, tables and event log.
	good := t.TempDir()
	{
		code, _, errOut := runCLIUntilReady(t, "local", "--template", tmpl, "--addr", "127.0.0.1:0", "--state", good)
		if code != 0 {
			t.Fatalf("the first run exited %d: %s", code, errOut)
		}
	}
	whole, err := os.ReadFile(filepath.Join(good, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "is empty (0 bytes), not a state file: delete it to start with an empty state"},
		{"truncated", whole[:len(whole)/3], "is damaged"},
		{"garbled", append(append(bytes.Clone(whole[:2*4096]), bytes.Repeat([]byte{0xA5}, len(whole)/2)...), whole[2*4096+len(whole)/2:]...), "is damaged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := os.WriteFile(path, tt.file, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI("local", "--template", tmpl, "--addr", "127.0.0.1:0", "--state", dir)
			lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, tt.want) ||
				strings.Contains(errOut, "panic") || strings.Contains(errOut, "goroutine") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming %s and saying %q", code, errOut, path, tt.want)
			}
			if strings.Contains(out, "ready") {
				t.Fatalf("it started anyway: %s", out)
			}
		})
	}
}

// runCLIUntilReady runs the CLI in this process until it prints its ready
// line, then stops it as Ctrl-C would.
func runCLIUntilReady(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &readyWriter{ready: make(chan struct{})}
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, &errOut) }()
	select {
	case <-out.ready:
	case code := <-done:
		return code, out.String(), errOut.String()
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line after 30 s")
	}
	cancel()
	return <-done, out.String(), errOut.String()
}

// readyWriter signals ready once a ready line has been written to it.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), "linegate local ready") {
		w.once.Do(func() { close(w.ready) })
	}
	return n, err
}

func (w *readyWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.buf.String() }
