// Package samcli drives the real AWS SAM CLI (`sam`) over a project's
// template.yaml, samconfig.toml and events/: `sam validate --lint`, `sam build`
// into a directory of the caller's, and `sam local invoke` of one sample event.
//
// An invocation is judged by what the function printed, never by sam's exit
// status: `sam local invoke` exits 0 when the function fails at INIT or
// returns an error (seen with SAM CLI 1.164.0), so Invoke reads the function's
// response from sam's stdout and the runtime's verdict from its log (stderr).
//
// A function under `sam local invoke` runs in a Docker container and reaches
// the host as host.docker.internal (samconfig.toml maps that name to Docker's
// host-gateway). On Linux the name is the Docker bridge's address, not
// loopback, while `linegate local` serves loopback only; Relay carries the
// container's connections from the bridge address to it (docs/deploy.md).
package samcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotInstalled means no `sam` executable is on PATH. Tests branch on it to
// skip loudly (or, in CI, to fail).
var ErrNotInstalled = errors.New("the AWS SAM CLI (sam) is not on PATH")

// ConfigFile is the SAM CLI configuration file of a project, in its root.
const ConfigFile = "samconfig.toml"

// CLI runs one `sam` executable in one project directory.
type CLI struct {
	// Path is the sam executable.
	Path string
	// Dir is the project: it holds template.yaml, samconfig.toml and the
	// files samconfig.toml names (events/env.json). Every command runs here,
	// as a developer runs sam from the project's root.
	Dir string
	// Env is sam's environment; nil is this process's (os.Environ). CleanEnv
	// builds one that keeps the shell's variables away from the functions.
	Env []string
}

// Find returns a CLI for the sam on PATH working in dir, or an error wrapping
// ErrNotInstalled.
func Find(dir string) (*CLI, error) {
	p, err := exec.LookPath("sam")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sam project %s: %w", dir, err)
	}
	return &CLI{Path: p, Dir: abs}, nil
}

// keptEnv are the variables CleanEnv keeps: what sam (Python), Docker's client
// and the Makefile's `go build` need. Prefixes end in "_".
var keptEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
	"GOPATH", "GOCACHE", "GOMODCACHE", "GOROOT", "GOBIN", "GOENV", "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB",
	"GOPRIVATE", "GONOPROXY", "GOINSECURE", "GOTOOLCHAIN", "GOTMPDIR", "GOMAXPROCS", "GODEBUG",
	"DOCKER_", "SAMREAL_", "SAM_CLI_", "CGO_", "XDG_", "PYENV_", "SSL_CERT_",
}

// CleanEnv is environ (KEY=value entries) without the variables a function
// could pick up by accident, plus two settings that keep sam offline.
//
// `sam local invoke` gives a declared variable the shell's value when the
// --env-vars file does not set it (the file's entry wins, then the shell, then
// the template), so a developer's LOG_LEVEL or LINE_CHANNEL_ACCESS_TOKEN would
// reach the function. CleanEnv keeps only PATH, HOME and the like, Docker's
// DOCKER_*, Go's settings (sam build runs the Makefile's go build), and
// SAM_CLI_*; it drops AWS_* (samconfig.toml names the region; with no profile
// sam passes placeholder keys), and sets AWS_EC2_METADATA_DISABLED=true (no
// probe of an instance metadata service for credentials) and
// SAM_CLI_TELEMETRY=0.
func CleanEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "SAM_CLI_TELEMETRY" {
			continue
		}
		for _, keep := range keptEnv {
			if k == keep || (strings.HasSuffix(keep, "_") && strings.HasPrefix(k, keep)) {
				out = append(out, kv)
				break
			}
		}
	}
	return append(out, "AWS_EC2_METADATA_DISABLED=true", "SAM_CLI_TELEMETRY=0")
}

// config is the --config-file argument: samconfig.toml of the project, by
// absolute path. sam looks for samconfig.toml next to the template it is
// given, so with a template in a build directory elsewhere it would find none.
func (c *CLI) config() []string {
	return []string{"--config-file", filepath.Join(c.Dir, ConfigFile)}
}

// run runs sam with args in c.Dir and returns its stdout and stderr.
func (c *CLI) run(ctx context.Context, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, c.Path, args...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("sam %s: %w\n%s", strings.Join(args, " "), err, lastLines(errb.String()+out.String(), 30))
	}
	return out.Bytes(), errb.Bytes(), err
}

// Version returns `sam --version`'s line ("SAM CLI, version 1.164.0").
func (c *CLI) Version(ctx context.Context) (string, error) {
	out, _, err := c.run(ctx, "--version")
	return strings.TrimSpace(string(out)), err
}

// Validate runs `sam validate --lint` on the project's template.yaml (sam's
// translator and cfn-lint) and returns what it printed. A template sam finds
// invalid is an error carrying sam's output.
func (c *CLI) Validate(ctx context.Context) (string, error) {
	out, errb, err := c.run(ctx, append([]string{"validate", "--lint", "--template-file", filepath.Join(c.Dir, "template.yaml")}, c.config()...)...)
	return string(out) + string(errb), err
}

// Built is the output of one `sam build`.
type Built struct {
	// Dir is the build directory: one folder per function and the built
	// template.
	Dir string
	// Template is the built template sam local invoke runs
	// (Dir/template.yaml): each CodeUri points at the function's folder.
	Template string
}

// Build runs `sam build` on the project's template.yaml into buildDir with
// its cache in cacheDir (samconfig.toml's build parameters apply: cached,
// parallel). Every function with `BuildMethod: makefile` is built by the
// Makefile's build-<LogicalId> target, as in a deploy.
func (c *CLI) Build(ctx context.Context, buildDir, cacheDir string) (Built, error) {
	args := append([]string{"build", "--template-file", filepath.Join(c.Dir, "template.yaml"), "--build-dir", buildDir, "--cache-dir", cacheDir}, c.config()...)
	if _, _, err := c.run(ctx, args...); err != nil {
		return Built{}, err
	}
	b := Built{Dir: buildDir, Template: filepath.Join(buildDir, "template.yaml")}
	if _, err := os.Stat(b.Template); err != nil {
		return Built{}, fmt.Errorf("sam build reported success but wrote no template: %w", err)
	}
	return b, nil
}

// Invoke runs `sam local invoke logicalID --event event` on the built
// template, with samconfig.toml's local_invoke parameters (--env-vars, the
// host mapping) and extra arguments, and judges the result by its output
// (ParseInvocation): the returned error wraps ErrInitFailed, ErrInvokeFailed
// or ErrNoResponse, or is a *FunctionError, when the function did not answer
// normally, whatever sam's exit status. The Invocation carries the log in
// every case.
func (c *CLI) Invoke(ctx context.Context, built Built, logicalID, event string, extra ...string) (Invocation, error) {
	args := append([]string{"local", "invoke", logicalID, "--template", built.Template, "--event", event}, c.config()...)
	args = append(args, extra...)
	stdout, stderr, runErr := c.run(ctx, args...)
	inv, err := ParseInvocation(stdout, stderr)
	if err != nil {
		if runErr != nil {
			return inv, fmt.Errorf("%w (%v)", err, runErr)
		}
		return inv, err
	}
	if runErr != nil {
		// The function answered but sam failed afterwards: say so, the
		// answer may be incomplete.
		return inv, runErr
	}
	return inv, nil
}

// lastLines is the end of s, at most n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
