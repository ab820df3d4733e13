package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/bot"
)

// terminalBlock is the shell block of docs/local.md's "The same from a
// terminal": the walkthrough as commands.
func terminalBlock(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/local.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### The same from a terminal")
	if !ok {
		t.Fatal(`docs/local.md has no "### The same from a terminal" section`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no ```sh block in docs/local.md's terminal section")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// shellWords splits a command line as sh does for the simple quoting the
// docs use ("two words", 'two words').
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quote, inWord := byte(0), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// waitUntil polls cond until it holds, for at most timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; saw: %s", timeout, what, saw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The docs' terminal walkthrough is true when its commands run in order:
// each line of the block runs against a linegate local (the `go run
// ./cmd/linegate …` lines through the CLI itself, with --url or
// --endpoint-url naming the test's server; the curl lines as GETs), and
// what its comment promises is checked. A line without a check here fails
// the test, so the block and this test change together.
func TestLocalDocsTerminalWalkthrough(t *testing.T) {
	// The walkthrough is the example bot's, as `make local` runs it.
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 300,
		Getenv: func(string) string { return "" },
		Bot:    func(cfg config.Worker) *bot.Router { return app.NewWith(app.Config{Probes: cfg.Probes}) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	get := func(path string) string {
		resp, err := http.Get(rt.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	lineMessages := func() string { return get("/_local/line/messages") }
	dlqVisible := func() (int, string) {
		var qs []struct {
			Name    string `json:"name"`
			Visible int    `json:"visible"`
		}
		raw := get("/_local/queues")
		_ = json.Unmarshal([]byte(raw), &qs)
		for _, q := range qs {
			if q.Name == "linegate-InteractiveDLQ.fifo" {
				return q.Visible, raw
			}
		}
		return -1, raw
	}
	messageSays := func(to, via, text string) func() (bool, string) {
		return func() (bool, string) {
			raw := lineMessages()
			var ms []struct {
				To       string            `json:"to"`
				Via      string            `json:"via"`
				Messages []json.RawMessage `json:"messages"`
			}
			_ = json.Unmarshal([]byte(raw), &ms)
			for _, m := range ms {
				for _, body := range m.Messages {
					if m.To == to && (via == "" || m.Via == via) && strings.Contains(string(body), text) {
						return true, ""
					}
				}
			}
			return false, raw
		}
	}
	const user, wait = "U0000000000000000000000000000user", 30 * time.Second
	var lastOut string
	// checks holds, by the command as the docs write it, what its comment says.
	checks := map[string]func(t *testing.T){
		"go tool linegate send --text hello": func(t *testing.T) {
			if !strings.HasPrefix(lastOut, "200 OK in ") {
				t.Errorf("send printed %q, want 200 OK in …", lastOut)
			}
			waitUntil(t, wait, "the echo of hello", messageSays(user, "reply", `"hello"`))
		},
		"curl -s localhost:3000/_local/line/messages": func(t *testing.T) {
			var ms []struct {
				To, Via  string
				Messages []struct{ Type, Text string }
			}
			if err := json.Unmarshal([]byte(lastOut), &ms); err != nil || len(ms) == 0 || ms[0].To != user || ms[0].Via != "reply" ||
				len(ms[0].Messages) != 1 || ms[0].Messages[0].Type != "text" || ms[0].Messages[0].Text != "hello" {
				t.Errorf("/_local/line/messages = %s (%v); want the reply of hello to %s first", lastOut, err, user)
			}
		},
		`go tool linegate send --text "slow report"`: func(t *testing.T) {
			waitUntil(t, wait, "the long work's answer", messageSays(user, "", "Done with report after 5s."))
			if loading := get("/_local/line/loading"); !strings.Contains(loading, user) {
				t.Errorf("/_local/line/loading = %s; want the animation shown to %s", loading, user)
			}
		},
		"go tool linegate send --text probe:panic": func(t *testing.T) {
			waitUntil(t, wait, "the operator's crash card", messageSays(local.DefaultOperator, "push", "CRASH"))
		},
		"go tool linegate send --text probe:fail": func(t *testing.T) {
			waitUntil(t, wait, "the alarm card of the interactive DLQ", messageSays(local.DefaultOperator, "push", "linegate-interactive-dlq"))
		},
		"go tool linegate send --text probe:permanent": func(t *testing.T) {},
		"curl -s localhost:3000/_local/queues": func(t *testing.T) {
			waitUntil(t, wait, `linegate-InteractiveDLQ.fifo "visible": 3`, func() (bool, string) { n, raw := dlqVisible(); return n == 3, raw })
		},
		"go tool linegate redrive --queue linegate-InteractiveDLQ.fifo --to linegate-InteractiveQueue.fifo --endpoint-url http://127.0.0.1:3000": func(t *testing.T) {
			if !strings.Contains(lastOut, "COMPLETED, 3 message(s) moved to linegate-InteractiveQueue.fifo") {
				t.Errorf("redrive printed %q; want the 3 messages moved back", lastOut)
			}
			// Back in the queue they serve, they fail again (probes) and
			// come back to the DLQ.
			waitUntil(t, wait, "the redriven probes back in the DLQ", func() (bool, string) { n, raw := dlqVisible(); return n == 3, raw })
		},
	}
	lines := terminalBlock(t)
	if len(lines) < len(checks) {
		t.Fatalf("the block has %d lines, the test checks %d: %q", len(lines), len(checks), lines)
	}
	for _, line := range lines {
		cmd, _, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		check, ok := checks[cmd]
		if !ok {
			t.Fatalf("docs/local.md runs %q, which this test does not check: add what its comment says", cmd)
		}
		switch words := shellWords(cmd); {
		case len(words) > 3 && words[0] == "go" && words[1] == "tool" && words[2] == "linegate":
			args := words[3:]
			for i, a := range args {
				if a == "http://127.0.0.1:3000" {
					args[i] = rt.URL()
				}
			}
			if args[0] == "send" {
				args = append(args, "--url", rt.WebhookURL())
			}
			code, out, errOut := runCLI(args...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", cmd, code, out, errOut)
			}
			lastOut = strings.TrimSpace(out)
		case len(words) == 3 && words[0] == "curl" && words[1] == "-s" && strings.HasPrefix(words[2], "localhost:3000/"):
			lastOut = get(strings.TrimPrefix(words[2], "localhost:3000"))
		default:
			t.Fatalf("docs/local.md runs %q: neither the CLI nor a curl GET", cmd)
		}
		t.Run(fmt.Sprint(cmd), check)
		if t.Failed() {
			return
		}
	}
}
