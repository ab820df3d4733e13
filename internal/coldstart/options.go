package coldstart

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EmulatorName is the executable `go install` produces for the Runtime
// Interface Emulator.
const EmulatorName = "aws-lambda-rie"

// ErrNoEmulator means aws-lambda-rie is neither on PATH nor in GOBIN or
// GOPATH/bin. Tests branch on it to skip (or, in CI, to fail).
var ErrNoEmulator = errors.New("aws-lambda-rie is not installed (go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d)")

// Option configures Build, Start and Report; each says which it applies to.
type Option func(*options)

type options struct {
	goBin        string
	emulator     string
	startTimeout time.Duration
	cgroups      []string
	tracing      bool
	starts       int
	noZip        bool
	env          map[string]map[string]string
	ssm          string
	ssmThrottle  int
	only         []string
	variants     []variant
}

// variant is one more configuration every function is measured in.
type variant struct {
	label string
	env   map[string]string
}

func newOptions(opts []Option) options {
	o := options{startTimeout: 10 * time.Second, starts: 5}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithGo sets the go command the Makefile's recipe runs (its GO variable)
// in Build and Report, instead of the one on PATH.
func WithGo(path string) Option { return func(o *options) { o.goBin = path } }

// WithEmulator sets the aws-lambda-rie executable Start (and Report) run,
// instead of looking it up with FindEmulator.
func WithEmulator(path string) Option { return func(o *options) { o.emulator = path } }

// WithStartTimeout bounds how long Start waits for the emulator to listen
// (default 10 s).
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.startTimeout = d
		}
	}
}

// WithCgroups makes Start put the emulator in the cgroups at these
// directories (each hierarchy of cgroup v1 needs its own, e.g. cpu and
// cpuacct; one directory on cgroup v2) by writing its pid into their
// cgroup.procs before it listens. The function's process, which the emulator
// forks at the first Invoke, inherits them, so a group's limits and
// accounting cover the function and the emulator serving it, as a Lambda
// sandbox's vCPU share covers its runtime API. Start fails (and leaves no
// emulator running) when a group cannot be joined.
func WithCgroups(dirs ...string) Option {
	return func(o *options) { o.cgroups = append(o.cgroups, dirs...) }
}

// WithActiveTracing makes Start serve the function as Lambda does with
// active tracing: every event it takes carries a sampled X-Ray trace header
// of its own (Lambda-Runtime-Trace-Id), which Run reports as
// Invocation.TraceID. The emulator sends none (its tracer is a no-op), so a
// proxy in front of its Runtime API adds it, and the bootstrap is started
// through env(1) to reach the proxy; the function's process is still the
// bootstrap's.
func WithActiveTracing() Option { return func(o *options) { o.tracing = true } }

// WithStarts sets how many fresh starts Report measures per function
// (default 5); the median INIT is reported.
func WithStarts(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.starts = n
		}
	}
}

// WithoutZip makes Measure and Report skip the deployment zip (ZipBytes 0,
// shown as "-"): compressing ~20 MB takes a few hundred ms normally but
// several seconds under the race detector.
func WithoutZip() Option { return func(o *options) { o.noZip = true } }

// WithEnv adds environment variables for one function in Report (function
// is its folder name under functions/, e.g. "worker"); they override the
// placeholders and events/env.json.
func WithEnv(function string, env map[string]string) Option {
	return func(o *options) {
		if o.env == nil {
			o.env = map[string]map[string]string{}
		}
		if o.env[function] == nil {
			o.env[function] = map[string]string{}
		}
		for k, v := range env {
			o.env[function][k] = v
		}
	}
}

// WithVariant makes Measure also start every function (not hello-world)
// with env added to its environment, in rows of their own labelled label
// ("TRACING=otel"): the same binary, another configuration, measured in the
// same interleaved rounds.
func WithVariant(label string, env map[string]string) Option {
	return func(o *options) { o.variants = append(o.variants, variant{label: label, env: env}) }
}

// WithSSM makes Measure start every function with its secrets in SSM, as
// in AWS: the channel secret and access token are SecureString parameters
// on endpoint (moto_server's), named in LINE_CHANNEL_SECRET_PARAM and
// LINE_CHANNEL_ACCESS_TOKEN_PARAM, and the functions reach the endpoint
// through a proxy that times each SSM call, so a Row tells the wait on the
// endpoint from the rest of the INIT.
func WithSSM(endpoint string) Option { return func(o *options) { o.ssm = endpoint } }

// WithSSMThrottling makes the SSM endpoint of WithSSM answer the first n SSM
// calls of every start with ThrottlingException, as Parameter Store does
// when a burst of cold starts exceeds its throughput: the INIT measured then
// includes the function's backoff.
func WithSSMThrottling(n int) Option { return func(o *options) { o.ssmThrottle = n } }

// WithFunctions makes Measure measure only these functions (folder names
// under functions/) besides the hello-world baseline.
func WithFunctions(names ...string) Option { return func(o *options) { o.only = names } }

// FindEmulator returns the path of aws-lambda-rie: from PATH, else GOBIN,
// else GOPATH/bin (where `go install` puts it; often not on PATH). It
// returns ErrNoEmulator when none has it.
func FindEmulator(ctx context.Context) (string, error) {
	if p, err := exec.LookPath(EmulatorName); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.CommandContext(ctx, "go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 0 && strings.TrimSpace(lines[0]) != "" {
			dirs = append(dirs, strings.TrimSpace(lines[0]))
		}
		if len(lines) > 1 {
			for _, gp := range filepath.SplitList(strings.TrimSpace(lines[1])) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, EmulatorName)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("find %s: %w", EmulatorName, ErrNoEmulator)
}
