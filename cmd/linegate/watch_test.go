package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
)

// appSource is the example bot of the copied module, its words set by the
// test: the handler edit a developer makes.
const appSource = `package app

import (
	"context"

	"github.com/linegate/linegate/pkg/bot"
)

// Config is the example bot's configuration.
type Config struct{ Probes bool }

// New answers every text with %q and the text.
func New(Config) *bot.Router {
	r := bot.NewRouter()
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error { return e.ReplyText(ctx, %q+text) })
	return r
}
`

// linegate local --watch, for real: a copy of this module, the bot's
// handler edited while linegate local runs, `go build` of cmd/linegate by
// the watcher, and the edit answering the next message — the same process
// still serving, its queues untouched.
func TestWatchRebuildsTheBot(t *testing.T) {
	linegateBinary(t) // skips under -short
	mod := t.TempDir()
	copyModule(t, "../..", mod)
	app := filepath.Join(mod, "internal", "app", "app.go")
	writeApp := func(prefix string) {
		t.Helper()
		if err := os.WriteFile(app, []byte(fmt.Sprintf(appSource, prefix, prefix)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeApp("v1: ")
	p := startProcessIn(t, mod, "--watch", "--time-scale", "30")
	waitConsole(t, p, 3*time.Minute, "bot built and running")

	lp := lineplatform.New(p.webhook, []byte(local.DefaultSecret))
	user := "U6161616161616161616161616161616a"
	ask := func(text, want string) {
		t.Helper()
		if d, err := lp.Deliver(context.Background(), lp.Text(user, text)); err != nil || !d.Delivered {
			t.Fatalf("delivery: %+v %v", d, err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !sentText(t, p, want) {
			if time.Now().After(deadline) {
				t.Fatalf("no reply %q after 20 s", want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ask("hello", "v1: hello")

	edited := time.Now()
	writeApp("v2: ")
	waitConsole(t, p, 2*time.Minute, "bot rebuilt and live")
	t.Logf("the edit was live %v after it was saved", time.Since(edited).Round(100*time.Millisecond))
	ask("hello again", "v2: hello again")
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

// copyModule copies what building the module needs: go.mod, go.sum, the
// template, the non-test Go sources and the console's embedded page.
func copyModule(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		embedded := strings.HasPrefix(filepath.ToSlash(rel), "internal/console/web/")
		if !(strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) && rel != "go.mod" && rel != "go.sum" && rel != "template.yaml" && !embedded {
			return nil
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
