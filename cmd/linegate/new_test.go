package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI has no bot compiled in: linegate local runs the bot of the
// project it is started in, never linegate's example.
func TestNoExampleBotInTheCLI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !strings.Contains(string(out), "github.com/linegate/linegate/internal/local\n") {
		t.Fatalf("go list gave %d packages, not the CLI's dependency list", len(deps))
	}
	for _, bot := range []string{"github.com/linegate/linegate/internal/app", "github.com/linegate/linegate/internal/testbot"} {
		for _, d := range deps {
			if d == bot {
				t.Errorf("the CLI links %s", bot)
			}
		}
	}
}

// linegate new refuses what it cannot do, with a usage error or the
// reason, and writes nothing then.
func TestNewRefuses(t *testing.T) {
	full := filepath.Join(t.TempDir(), "mybot")
	if err := os.Mkdir(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notCheckout := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no directory", []string{"new"}, 2, "usage: linegate new"},
		{"two directories", []string{"new", "a", "b"}, 2, "usage: linegate new"},
		{"a directory with files", []string{"new", "--tidy=false", full}, 1, "not empty"},
		{"not a version", []string{"new", "--tidy=false", "--linegate", "latest", filepath.Join(t.TempDir(), "p")}, 2, `"latest" is neither a directory nor a version`},
		{"not a checkout", []string{"new", "--tidy=false", "--linegate", notCheckout, filepath.Join(t.TempDir(), "p")}, 1, "no go.mod of github.com/linegate/linegate"},
		{"a bad module path", []string{"new", "--tidy=false", "--module", "my bot", filepath.Join(t.TempDir(), "p")}, 1, `module path "my bot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Fatalf("the refused new wrote into the directory: %v", entries)
	}
}

// Without --linegate, a linegate built from this checkout requires it
// through a replace; with a version, go.mod requires that version.
func TestNewRequiresLinegate(t *testing.T) {
	root, _ := filepath.Abs("../..")
	src, err := linegateSource("")
	if err != nil || src.replace != root || src.version != develVersion {
		t.Fatalf("from this checkout: %+v %v, want a replace to %s", src, err, root)
	}
	dir := filepath.Join(t.TempDir(), "p")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"new", "--tidy=false", "--linegate", "v1.2.3", "--name", "shop", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(mod), "require github.com/linegate/linegate v1.2.3\n") || strings.Contains(string(mod), "replace") || !strings.Contains(string(mod), "module p\n") {
		t.Fatalf("go.mod (%v):\n%s", err, mod)
	}
	if sam, _ := os.ReadFile(filepath.Join(dir, "samconfig.toml")); !strings.Contains(string(sam), `stack_name = "shop"`) {
		t.Fatalf("samconfig.toml:\n%s", sam)
	}
	for base, want := range map[string]string{"mybot": "mybot", "my_bot.v2": "my-bot-v2", "001": "bot-001", "-x-": "bot--x"} {
		if got := stackName(base); got != want {
			t.Errorf("stackName(%q) = %q, want %q", base, got, want)
		}
	}
}
