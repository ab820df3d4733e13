package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/botproc"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/testio"
	"github.com/linegate/linegate/pkg/bot"
)

// The test binary doubles as the bot process: with these variables set it
// serves a bot that answers "<variant>: <text>" (the variant is what the
// fake build wrote into the "binary"), fails every "fail", fails "permanent"
// for good, exits on "crash" (the process dies mid-event), counts a chat's
// messages in its session on "count", and runs a bot.Once step (recorded
// in a file) before failing the first "once" of each event.
const (
	envSocket  = "WATCH_TEST_BOT_SOCKET"
	envVariant = "WATCH_TEST_BOT_FILE"
	envParent  = "WATCH_TEST_BOT_PARENT"
	envSteps   = "WATCH_TEST_BOT_STEPS"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(envSocket); sock != "" {
		os.Exit(serveTestBot(sock))
	}
	os.Exit(m.Run())
}

func serveTestBot(sock string) int {
	variant, err := os.ReadFile(os.Getenv(envVariant))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, string(variant)+": "+text)
	})
	r.OnText("fail", func(context.Context, *bot.Event, string) error { return errors.New("fails on purpose") })
	r.OnText("permanent", func(context.Context, *bot.Event, string) error {
		return bot.Permanent(errors.New("can never succeed, on purpose"))
	})
	r.OnText("crash", func(context.Context, *bot.Event, string) error {
		os.Exit(3) // the bot process dies in the middle of the event
		return nil
	})
	r.OnText("count", func(ctx context.Context, e *bot.Event, text string) error {
		var st struct{ N int }
		s, err := e.Session(ctx, &st)
		if err != nil {
			return err
		}
		st.N++
		if err := s.Save(ctx, st); err != nil {
			return err
		}
		return e.ReplyText(ctx, fmt.Sprintf("count %d", st.N))
	})
	r.OnText("once", func(ctx context.Context, e *bot.Event, text string) error {
		steps := os.Getenv(envSteps)
		if _, err := bot.Once(ctx, e, "side effect", func(context.Context) (string, error) {
			f, err := os.OpenFile(steps, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return "", err
			}
			defer f.Close()
			_, err = fmt.Fprintln(f, e.WebhookEventID)
			return "done", err
		}); err != nil {
			return err
		}
		flag := steps + "." + e.WebhookEventID
		if _, err := os.Stat(flag); err != nil {
			_ = os.WriteFile(flag, nil, 0o600)
			return errors.New("fails once after its step, on purpose")
		}
		return e.ReplyText(ctx, "once: "+text)
	})
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.WriteFile(sock+".pid", []byte(fmt.Sprint(os.Getpid())), 0o600)
	ctx, stop := signalContext()
	defer stop()
	err = botproc.Serve(ctx, ln, r, botproc.Socket(os.Getenv(envParent)), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type syncBuffer = testio.Buffer

// What is tested here, with a fake build (it writes the variant the test
// chose) and the test binary as the bot process: a change under the root
// swaps the bot while the local cloud keeps its state (a dead-lettered
// event stays in its DLQ and in /_local/events); a failed build keeps the
// running bot; a bot process that dies is started again. The real `go
// build` of cmd/linegate is in cmd/linegate's TestWatchRebuildsTheBot.
func TestWatchSwapsTheBotAndKeepsState(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "bot.go")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(src, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package bot // v1")
	var mu sync.Mutex
	variant := "v1"
	setVariant := func(v string) { mu.Lock(); variant = v; mu.Unlock() }

	client := newClient(t)
	console := &syncBuffer{}
	rt, err := local.Start(context.Background(), local.Config{
		Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 120, Params: map[string]string{"MaxReceiveCount": "2"},
		Getenv: func(string) string { return "" }, Out: console,
		Bot: func(config.Worker) *bot.Router { return client.Router() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var pids []string // where each started bot writes its pid
	var pidMu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Root: root, Dir: t.TempDir(), Out: console, Client: client, Poll: 50 * time.Millisecond, Settle: 50 * time.Millisecond, Grace: 5 * time.Second, Rebuild: true,
			Build: func(_ context.Context, out string) ([]byte, error) {
				mu.Lock()
				v := variant
				mu.Unlock()
				if v == "broken" {
					return []byte("./bot.go:1:1: syntax error: planted"), errors.New("exit status 1")
				}
				return nil, os.WriteFile(out, []byte(v), 0o600)
			},
			Command: func(bin, socket string) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envSocket+"="+socket, envVariant+"="+bin, envParent+"="+client.Socket())
				cmd.Stderr = os.Stderr
				pidMu.Lock()
				pids = append(pids, socket+".pid")
				pidMu.Unlock()
				return cmd
			},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("console:\n%s", console.String())
		}
	}()

	lp := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret))
	user := "U5151515151515151515151515151515a"
	say := func(text string) string {
		t.Helper()
		d, err := lp.Deliver(context.Background(), lp.Text(user, text))
		if err != nil || !d.Delivered {
			t.Fatalf("delivery: %+v %v", d, err)
		}
		return d.WebhookEventIDs[0]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; messages: %+v", what, rt.LINE().Messages())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	replied := func(text string) func() bool {
		return func() bool {
			for _, m := range rt.LINE().Messages() {
				if m.To == user && strings.Contains(string(m.Messages[0]), `"`+text+`"`) {
					return true
				}
			}
			return false
		}
	}
	consoleSays := func(s string) func() bool { return func() bool { return strings.Contains(console.String(), s) } }

	waitFor("the first bot", consoleSays("bot built and running"))
	say("hello")
	waitFor("v1's answer", replied("v1: hello"))
	failed := say("fail")
	waitFor("the failing event in the DLQ", func() bool { return dlqHolds(t, rt) == 1 })

	setVariant("v2")
	write("package bot // v2")
	waitFor("the swap", consoleSays("bot rebuilt and live"))
	say("hello again")
	waitFor("v2's answer", replied("v2: hello again"))
	if n := dlqHolds(t, rt); n != 1 {
		t.Fatalf("the DLQ holds %d after the swap, want the 1 it held before", n)
	}
	if e := eventOf(rt, failed); e.Outcome != "dead-lettered" {
		t.Fatalf("the dead-lettered event's entry after the swap: %+v", e)
	}

	setVariant("broken")
	write("package bot // broken")
	waitFor("the build failure", consoleSays("build failed"))
	if !strings.Contains(console.String(), "syntax error: planted") {
		t.Fatalf("the compiler's output is not on the console:\n%s", console.String())
	}
	say("still there?")
	waitFor("v2 still answering", replied("v2: still there?"))

	pidMu.Lock()
	last := pids[len(pids)-1]
	pidMu.Unlock()
	var pid int
	if b, err := os.ReadFile(last); err != nil || func() error { _, err := fmt.Sscan(string(b), &pid); return err }() != nil {
		t.Fatalf("the bot's pid file %s: %v", last, err)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor("the restart", consoleSays("the bot process exited"))
	// Said while the bot is down or starting: it waits for the bot.
	say("back?")
	waitFor("the restarted bot's answer", replied("v2: back?"))
}

func dlqHolds(t *testing.T, rt *local.Runtime) int {
	t.Helper()
	resp, err := http.Get(rt.URL() + "/_local/queues")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var qs []struct {
		Name    string `json:"name"`
		Visible int    `json:"visible"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&qs); err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == "linegate-InteractiveDLQ.fifo" {
			return q.Visible
		}
	}
	return -1
}

func eventOf(rt *local.Runtime, id string) local.EventOutcome {
	for _, e := range rt.Events() {
		if e.WebhookEventID == id {
			return e
		}
	}
	return local.EventOutcome{}
}

// A scan sees Go sources, go.mod and go.sum, and not tests, hidden
// directories or testdata.
func TestScan(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a.go", "a_test.go", "go.mod", "go.sum", "README.md", ".git/x.go", "testdata/y.go", "pkg/b.go"} {
		p := filepath.Join(root, f)
		_ = os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for f := range scan(root, nil) {
		rel, _ := filepath.Rel(root, f)
		got = append(got, rel)
	}
	want := map[string]bool{"a.go": true, "go.mod": true, "go.sum": true, "pkg/b.go": true}
	if len(got) != len(want) {
		t.Fatalf("scanned %v, want %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("scanned %v, want %v", got, want)
		}
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signalNotify(context.Background())
}

// newClient is the parent's botproc.Client, its socket in a fresh
// directory.
func newClient(t *testing.T) *botproc.Client {
	t.Helper()
	c, err := botproc.NewClient(filepath.Join(t.TempDir(), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Under --watch a handler fails as it would in one process: a
// bot.Permanent error is dead-lettered on its first receive (not retried
// five times); bot.Once and the chat's session work in the bot process
// (they live in the parent's table: a step that ran before a failure does
// not run again, the session carries over); and a message that kills the
// bot process takes only itself to the DLQ — five other chats that write
// while the bot is being started again wait for it and are answered, each
// once.
func TestWatchKeepsFailureSemantics(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "bot.go"), []byte("package bot"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := filepath.Join(t.TempDir(), "steps")
	client := newClient(t)
	console := &syncBuffer{}
	rt, err := local.Start(context.Background(), local.Config{
		Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 120,
		Getenv: func(string) string { return "" }, Out: console,
		Bot: func(config.Worker) *bot.Router { return client.Router() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Root: root, Dir: t.TempDir(), Out: console, Client: client, Poll: time.Hour, Grace: 5 * time.Second, Rebuild: true,
			Build: func(_ context.Context, out string) ([]byte, error) {
				return nil, os.WriteFile(out, []byte("v1"), 0o600)
			},
			Command: func(bin, socket string) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envSocket+"="+socket, envVariant+"="+bin, envParent+"="+client.Socket(), envSteps+"="+steps)
				cmd.Stderr = os.Stderr
				return cmd
			},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("console:\n%s", console.String())
		}
	}()
	lp := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret))
	say := func(user, text string) string {
		t.Helper()
		d, err := lp.Deliver(context.Background(), lp.Text(user, text))
		if err != nil || !d.Delivered {
			t.Fatalf("delivery: %+v %v", d, err)
		}
		return d.WebhookEventIDs[0]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; events %+v", what, rt.Events())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	answers := func(user, text string) int {
		n := 0
		for _, m := range rt.LINE().Messages() {
			if m.To == user && strings.Contains(string(m.Messages[0]), `"`+text+`"`) {
				n++
			}
		}
		return n
	}
	waitFor("the bot", func() bool { return strings.Contains(console.String(), "bot built and running") })

	// Permanent: the DLQ on the first receive.
	perm := say("U7000000000000000000000000000000a", "permanent")
	waitFor("the permanent failure dead-lettered", func() bool { return eventOf(rt, perm).Outcome == "dead-lettered" })
	if e := eventOf(rt, perm); e.ReceiveCount != 1 {
		t.Fatalf("a bot.Permanent failure under --watch: %+v, want dead-lettered on its first receive", e)
	}

	// The session and bot.Once, in the bot process.
	const counter = "U7000000000000000000000000000000b"
	say(counter, "count")
	waitFor("count 1", func() bool { return answers(counter, "count 1") == 1 })
	say(counter, "count")
	waitFor("count 2", func() bool { return answers(counter, "count 2") == 1 })
	const oncer = "U7000000000000000000000000000000c"
	onceID := say(oncer, "once")
	waitFor("the retried step's answer", func() bool { return answers(oncer, "once: once") == 1 })
	if b, err := os.ReadFile(steps); err != nil || strings.Count(string(b), onceID) != 1 {
		t.Fatalf("the step ran %d times for %s (%v), want once: its result was kept across the retry", strings.Count(string(b), onceID), onceID, err)
	}
	if e := eventOf(rt, onceID); e.Outcome != "ok" || e.ReceiveCount != 2 {
		t.Fatalf("the once event: %+v, want ok after two receives", e)
	}

	// A message that kills the bot process, and five chats writing while
	// it is started again.
	exits := strings.Count(console.String(), "the bot process exited")
	crash := say("U7000000000000000000000000000000d", "crash")
	waitFor("the bot's death", func() bool { return strings.Count(console.String(), "the bot process exited") > exits })
	var others []string
	for i := range 5 {
		others = append(others, say(fmt.Sprintf("U70000000000000000000000000000e%d", i), fmt.Sprintf("hello %d", i)))
	}
	waitFor("the crashing message dead-lettered", func() bool { return eventOf(rt, crash).Outcome == "dead-lettered" })
	for i, id := range others {
		user := fmt.Sprintf("U70000000000000000000000000000e%d", i)
		waitFor("the answer to "+user, func() bool { return eventOf(rt, id).Outcome == "ok" })
		if n := answers(user, fmt.Sprintf("v1: hello %d", i)); n != 1 {
			t.Errorf("%s answered %d times, want once", user, n)
		}
	}
	if e := eventOf(rt, crash); e.ReceiveCount != 5 {
		t.Errorf("the crashing message: %+v, want dead-lettered after its five receives", e)
	}

	// The same, all in one webhook body: the five are in flight beside the
	// crashing message when it kills the bot. Each is then run alone (it
	// might have been the one) and answered; only the crashing message
	// keeps killing the bot, and goes to the DLQ alone.
	evs := []json.RawMessage{lp.Text("U7000000000000000000000000000000f", "crash")}
	for i := range 5 {
		evs = append(evs, lp.Text(fmt.Sprintf("U70000000000000000000000000000f%d", i), fmt.Sprintf("together %d", i)))
	}
	d, err := lp.Deliver(context.Background(), evs...)
	if err != nil || !d.Delivered {
		t.Fatalf("delivery: %+v %v", d, err)
	}
	waitFor("the crashing message dead-lettered", func() bool { return eventOf(rt, d.WebhookEventIDs[0]).Outcome == "dead-lettered" })
	for i, id := range d.WebhookEventIDs[1:] {
		user := fmt.Sprintf("U70000000000000000000000000000f%d", i)
		waitFor("the answer to "+user, func() bool { return eventOf(rt, id).Outcome == "ok" })
		if n := answers(user, fmt.Sprintf("v1: together %d", i)); n != 1 {
			t.Errorf("%s answered %d times, want once", user, n)
		}
	}
}
