package samcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestCleanEnv(t *testing.T) {
	in := []string{
		"PATH=/tmp/samreal/bin:/usr/bin", "HOME=/root", "DOCKER_HOST=unix:///tmp/d.sock", "GOCACHE=/c", "GOFLAGS=-mod=mod",
		"SAM_CLI_TELEMETRY=1", "SAMREAL_ROOT=/tmp/samreal",
		// Declared on the functions (template.yaml): from the shell they would reach them.
		"LOG_LEVEL=DEBUG", "LINE_CHANNEL_ACCESS_TOKEN=real-token", "AWS_ENDPOINT_URL=https://example.com",
		"AWS_ACCESS_KEY_ID=AKIA", "AWS_PROFILE=prod", "MAKEFLAGS=-j2 --jobserver-auth=3,4", "GOOGLE_APPLICATION_CREDENTIALS=/k", "broken",
	}
	got := CleanEnv(in)
	want := []string{
		"PATH=/tmp/samreal/bin:/usr/bin", "HOME=/root", "DOCKER_HOST=unix:///tmp/d.sock", "GOCACHE=/c", "GOFLAGS=-mod=mod",
		"SAMREAL_ROOT=/tmp/samreal", "AWS_EC2_METADATA_DISABLED=true", "SAM_CLI_TELEMETRY=0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CleanEnv =\n%q\nwant\n%q", got, want)
	}
}

// fakeSAM writes an executable named sam that runs script (sh) and returns
// a CLI for it in a project directory with a samconfig.toml.
func fakeSAM(t *testing.T, script string) *CLI {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("SKIPPED LOUDLY: the fake sam is a shell script")
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "sam"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, ConfigFile), []byte("version = 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	c, err := Find(project)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != filepath.Join(bin, "sam") || c.Dir != project {
		t.Fatalf("Find = %+v", c)
	}
	return c
}

func TestFindWithoutSAM(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Find("."); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Find with no sam on PATH: %v, want ErrNotInstalled", err)
	}
}

// The commands pass the project's samconfig.toml by absolute path, run in the
// project directory, and report sam's failures with its output.
func TestCommandsAgainstAFakeSAM(t *testing.T) {
	ctx := context.Background()
	t.Run("arguments and directory", func(t *testing.T) {
		c := fakeSAM(t, `echo "$PWD|$*"`)
		out, err := c.Validate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(c.Dir, ConfigFile)
		if want := c.Dir + "|validate --lint --template-file " + filepath.Join(c.Dir, "template.yaml") + " --config-file " + cfg; strings.TrimSpace(out) != want {
			t.Fatalf("sam ran as %q, want %q", out, want)
		}
		v, err := c.Version(ctx)
		if err != nil || v != c.Dir+"|--version" {
			t.Fatalf("Version = %q, %v", v, err)
		}
	})
	t.Run("validate finds the template invalid", func(t *testing.T) {
		c := fakeSAM(t, `echo "Error: [InvalidTemplateException('E3012 ...')]" >&2; exit 1`)
		if _, err := c.Validate(ctx); err == nil || !strings.Contains(err.Error(), "E3012") {
			t.Fatalf("Validate = %v, want an error with sam's message", err)
		}
	})
	t.Run("build fails", func(t *testing.T) {
		c := fakeSAM(t, `echo "Build Failed: make: *** [build-WorkerFunction] Error 1" >&2; exit 1`)
		if _, err := c.Build(ctx, t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "Build Failed") {
			t.Fatalf("Build = %v, want an error with sam's output", err)
		}
	})
	t.Run("build succeeds without a template", func(t *testing.T) {
		c := fakeSAM(t, `echo "Build Succeeded"`)
		if _, err := c.Build(ctx, t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "no template") {
			t.Fatalf("Build = %v, want an error: no built template", err)
		}
	})
	t.Run("build writes the template", func(t *testing.T) {
		c := fakeSAM(t, `while [ $# -gt 0 ]; do [ "$1" = --build-dir ] && echo built >"$2/template.yaml"; shift; done`)
		dir := t.TempDir()
		b, err := c.Build(ctx, dir, t.TempDir())
		if err != nil || b.Template != filepath.Join(dir, "template.yaml") {
			t.Fatalf("Build = %+v, %v", b, err)
		}
	})
	t.Run("invoke exits 0 after an INIT failure", func(t *testing.T) {
		stdout, stderr := readCase(t, "init-failed")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "out"), stdout, 0o644)
		os.WriteFile(filepath.Join(dir, "err"), stderr, 0o644)
		c := fakeSAM(t, `cat `+dir+`/out; cat `+dir+`/err >&2; exit 0`)
		inv, err := c.Invoke(ctx, Built{Template: "/b/template.yaml"}, "WorkerFunction", "events/worker-follow.json")
		if !errors.Is(err, ErrInitFailed) || inv.Log != string(stderr) {
			t.Fatalf("Invoke = %v, want ErrInitFailed with the log", err)
		}
	})
	t.Run("invoke passes its arguments", func(t *testing.T) {
		c := fakeSAM(t, `printf '{"args":"%s"}' "$*"`)
		inv, err := c.Invoke(ctx, Built{Template: "/b/template.yaml"}, "WebhookFunction", "events/x.json", "--skip-pull-image")
		if err != nil {
			t.Fatal(err)
		}
		want := `{"args":"local invoke WebhookFunction --template /b/template.yaml --event events/x.json --config-file ` + filepath.Join(c.Dir, ConfigFile) + ` --skip-pull-image"}`
		if string(inv.Response) != want {
			t.Fatalf("response %s, want %s", inv.Response, want)
		}
	})
	t.Run("sam fails after the function answered", func(t *testing.T) {
		c := fakeSAM(t, `echo '{"statusCode":200}'; echo "Error: container removal failed" >&2; exit 1`)
		inv, err := c.Invoke(ctx, Built{Template: "/b/template.yaml"}, "WebhookFunction", "e.json")
		if err == nil || !strings.Contains(err.Error(), "container removal failed") || string(inv.Response) != `{"statusCode":200}` {
			t.Fatalf("Invoke = %s, %v; want the response and sam's error", inv.Response, err)
		}
	})
	t.Run("sam fails before any answer", func(t *testing.T) {
		c := fakeSAM(t, `echo "Error: Running AWS SAM projects locally requires a container runtime." >&2; exit 1`)
		_, err := c.Invoke(ctx, Built{Template: "/b/template.yaml"}, "WebhookFunction", "e.json")
		if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "container runtime") {
			t.Fatalf("Invoke = %v, want ErrNoResponse with sam's message", err)
		}
	})
}
