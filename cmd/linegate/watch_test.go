package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
)

// The "done when", for real: `linegate new` writes a project in
// its own module (go.mod replacing linegate with this checkout); in it,
// with nothing else, `go test ./...`, `go vet ./...` and cfn-lint pass;
// `linegate local --watch` started there answers a text with that
// project's own handler; the handler's reply is edited while it runs, and
// the next text gets the new reply from the same process, its queues
// untouched.
func TestNewProjectRunsItsOwnBot(t *testing.T) {
	bin := linegateBinary(t) // skips under -short
	dir := filepath.Join(t.TempDir(), "mybot")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s in the new project: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	new := exec.Command(bin, "new", "--module", "example.com/mybot", dir)
	if out, err := new.CombinedOutput(); err != nil || !strings.Contains(string(out), "replaced by the checkout") {
		t.Fatalf("linegate new: %v\n%s", err, out)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if root, _ := filepath.Abs("../.."); err != nil || !strings.Contains(string(mod), "replace github.com/linegate/linegate => "+root+"\n") {
		t.Fatalf("go.mod (%v):\n%s", err, mod)
	}
	run("go", "test", "./...")
	run("go", "vet", "./...")
	if _, err := exec.LookPath("cfn-lint"); err == nil {
		run("cfn-lint", "template.yaml")
	} else if os.Getenv("CI") == "true" {
		t.Fatal("cfn-lint is required in CI but not on PATH")
	} else {
		t.Log("SKIPPED LOUDLY: cfn-lint not installed: the new project's template.yaml NOT linted")
	}

	app := filepath.Join(dir, "internal", "app", "app.go")
	src, err := os.ReadFile(app)
	if err != nil || !strings.Contains(string(src), `"You said: "+text`) {
		t.Fatalf("the project's bot (%v):\n%s", err, src)
	}
	p := startProcessIn(t, dir, "--watch", "--time-scale", "30")
	waitConsole(t, p, 10*time.Second, "bot built and running")
	lp := lineplatform.New(p.webhook, []byte(local.DefaultSecret))
	user := "U6161616161616161616161616161616a"
	ask := func(text, want string) {
		t.Helper()
		if d, err := lp.Deliver(context.Background(), lp.Text(user, text)); err != nil || !d.Delivered {
			t.Fatalf("delivery: %+v %v", d, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !sentText(t, p, want) {
			if time.Now().After(deadline) {
				t.Fatalf("no reply %q after 30 s", want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ask("hello", "You said: hello")

	edited := time.Now()
	if err := os.WriteFile(app, []byte(strings.Replace(string(src), `"You said: "+text`, `"Echo v2: "+text`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitConsole(t, p, 2*time.Minute, "bot rebuilt and live")
	t.Logf("the edit was live %v after it was saved", time.Since(edited).Round(100*time.Millisecond))
	ask("hello again", "Echo v2: hello again")
}

func waitConsole(t *testing.T, p *process, timeout time.Duration, s string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.console.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the console after %v", s, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sentText(t *testing.T, p *process, text string) bool {
	t.Helper()
	resp, err := http.Get(p.url + "/_local/line/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ms []struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, raw := range m.Messages {
			if strings.Contains(string(raw), `"`+text+`"`) {
				return true
			}
		}
	}
	return false
}

// botPID is the pid linegate local's console gave its bot process.
var botPID = regexp.MustCompile(`bot built and running in its own process \(pid (\d+)\)`)

// The bot's process never outlives linegate local, however it ends: after
// a SIGKILL of linegate local (nothing of it runs to stop the bot), the
// bot, which reads its lifeline pipe, exits by itself.
func TestBotProcessEndsWithLinegateLocal(t *testing.T) {
	p := startProcess(t)
	waitConsole(t, p, 10*time.Second, "bot built and running")
	m := botPID.FindStringSubmatch(p.console.String())
	if m == nil {
		t.Fatalf("no bot pid on the console:\n%s", p.console.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the bot process %d is not running: %v", pid, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the bot process %d still runs 30 s after linegate local was killed", pid)
		}
	}
}
