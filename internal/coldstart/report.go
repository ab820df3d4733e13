package coldstart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"
)

// DeployOS and DeployArch are the platform template.yaml deploys to
// (provided.al2023 on arm64); sizes are reported for it.
const (
	DeployOS   = "linux"
	DeployArch = "arm64"
)

// Row is one function's cold-start figures.
type Row struct {
	Function    string          // folder name under functions/, or HelloName
	Variant     string          // the WithVariant label the row was measured with, "" for the plain configuration
	BinaryBytes int64           // stripped DeployOS/DeployArch bootstrap
	ZipBytes    int64           // its deployment zip; 0 when not measured (WithoutZip)
	InitArch    string          // GOOS/GOARCH the INIT was measured on (the host's)
	Inits       []time.Duration // INIT of each fresh start
	// Waits is, per start, how long the function waited on the SSM
	// endpoint for its secrets during the start (WithSSM; 0 without).
	Waits []time.Duration
}

// InitMedian is the median of the row's INIT durations (0 if none).
func (r Row) InitMedian() time.Duration { return Median(r.Inits) }

// WaitMedian is the median of the row's SSM waits (0 if none).
func (r Row) WaitMedian() time.Duration { return Median(r.Waits) }

// OwnMedian is the median, over the starts, of the INIT less the wait on
// the SSM endpoint: what the function itself spends starting.
func (r Row) OwnMedian() time.Duration {
	own := make([]time.Duration, len(r.Inits))
	for i, d := range r.Inits {
		own[i] = d
		if i < len(r.Waits) {
			own[i] -= r.Waits[i]
		}
	}
	return Median(own)
}

// Median returns the median of ds (the mean of the middle two for an even
// count), or 0 for none. ds is not modified.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Functions lists the Lambda functions of the repository at repoRoot: the
// folders under functions/ that hold a main.go, sorted.
func Functions(repoRoot string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(repoRoot, "functions"))
	if err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(repoRoot, "functions", e.Name(), "main.go")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// LogicalID is the template.yaml resource (and events/env.json section) of a
// function folder: "webhook" is WebhookFunction.
func LogicalID(function string) string {
	if function == "" {
		return ""
	}
	r := []rune(function)
	r[0] = unicode.ToUpper(r[0])
	return string(r) + "Function"
}

// SampleEnv returns the function's section of events/env.json (the file
// `sam local invoke --env-vars` reads), or an empty map when the file has no
// section for it.
func SampleEnv(repoRoot, function string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "events", "env.json"))
	if err != nil {
		return nil, fmt.Errorf("sample env: %w", err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("sample env: events/env.json: %w", err)
	}
	env := all[LogicalID(function)]
	if env == nil {
		env = map[string]string{}
	}
	return env, nil
}

// OfflineEnv is an environment in which a function initialises without
// reaching anything: test credentials, AWS_ENDPOINT_URL on a closed loopback
// port, X-Ray off, SAM's function name, and placeholders for the variables
// template.yaml fills from its resources (the bus, the table, the topic).
// A function's INIT makes no AWS call unless a *_PARAM secret is set.
func OfflineEnv(function string) map[string]string {
	return map[string]string{
		"AWS_REGION":                  "us-east-1",
		"AWS_ACCESS_KEY_ID":           "coldstart",
		"AWS_SECRET_ACCESS_KEY":       "coldstart",
		"AWS_ENDPOINT_URL":            "http://127.0.0.1:9",
		"AWS_XRAY_SDK_DISABLED":       "true",
		"AWS_LAMBDA_FUNCTION_NAME":    LogicalID(function),
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
		"EVENT_BUS_NAME":              "linegate",
		"CHAT_QUEUE_URL":              "https://sqs.us-east-1.amazonaws.com/123456789012/linegate-InteractiveQueue.fifo",
		"IDEMPOTENCY_TABLE":           "linegate-idempotency",
		"OPS_TOPIC_ARN":               "arn:aws:sns:us-east-1:123456789012:linegate-ops",
	}
}

// Measure builds every function of the repository at repoRoot for
// DeployOS/DeployArch (size and zip size), then for the host platform, and
// starts that build under the emulator WithStarts times (default 5), each a
// fresh process invoked once with "{}", recording the INIT of each. The
// hello-world function (HelloPackage) is built by the same recipe and
// started the same way, in the first row, so each function's INIT can be
// read as a multiple of the least an aws-lambda-go function costs. The
// starts are interleaved (one of each function per round), so a slow moment
// of the machine falls on all of them alike. Options: WithStarts, WithEnv,
// WithSSM, WithVariant, WithoutZip, WithGo, WithEmulator. The environment is
// OfflineEnv, then events/env.json's section, then WithSSM's, then WithEnv,
// then (in a variant's rows) WithVariant's.
// Build artefacts go to a temporary directory that is removed afterwards.
func Measure(ctx context.Context, repoRoot string, opts ...Option) ([]Row, error) {
	o := newOptions(opts)
	if o.emulator == "" {
		p, err := FindEmulator(ctx)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithEmulator(p))
	}
	fns, err := Functions(repoRoot)
	if err != nil {
		return nil, err
	}
	if len(o.only) > 0 {
		var keep []string
		for _, f := range fns {
			if slices.Contains(o.only, f) {
				keep = append(keep, f)
			}
		}
		if len(keep) != len(o.only) {
			return nil, fmt.Errorf("measure: functions %v: some are not under functions/ (%v)", o.only, fns)
		}
		fns = keep
	}
	tmp, err := os.MkdirTemp("", "coldstart-")
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	defer os.RemoveAll(tmp)
	var secrets *ssmEndpoint
	if o.ssm != "" {
		if secrets, err = startSSM(ctx, o.ssm, o.ssmThrottle); err != nil {
			return nil, err
		}
		defer secrets.close()
	}
	targets := make([]target, 0, (len(fns)+1)*(len(o.variants)+1))
	for _, fn := range append([]string{HelloName}, fns...) {
		t, err := prepare(ctx, repoRoot, fn, filepath.Join(tmp, fn), o, secrets, opts)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	// Each variant reuses its function's builds; only the environment
	// differs.
	for _, v := range o.variants {
		for _, base := range targets[1 : len(fns)+1] {
			t := base
			t.row.Variant = v.label
			t.env = maps.Clone(base.env)
			maps.Copy(t.env, v.env)
			targets = append(targets, t)
		}
	}
	for range o.starts {
		for i := range targets {
			t := &targets[i]
			secrets.reset()
			d, err := coldInit(ctx, t.host, t.env, opts)
			if err != nil {
				return nil, fmt.Errorf("measure %s: %w", t.row.Function, err)
			}
			t.row.Inits = append(t.row.Inits, d)
			t.row.Waits = append(t.row.Waits, secrets.waited())
		}
	}
	rows := make([]Row, len(targets))
	for i, t := range targets {
		rows[i] = t.row
	}
	return rows, nil
}

// target is one function being measured: its row, its host build and the
// environment it starts with.
type target struct {
	row  Row
	host Binary
	env  map[string]string
}

func prepare(ctx context.Context, repoRoot, fn, dir string, o options, secrets *ssmEndpoint, opts []Option) (target, error) {
	t := target{row: Row{Function: fn, InitArch: runtime.GOOS + "/" + runtime.GOARCH}}
	build := func(arch, out string) (Binary, error) {
		if fn == HelloName {
			return BuildPackage(ctx, repoRoot, HelloPackage, arch, out, opts...)
		}
		return Build(ctx, repoRoot, fn, arch, out, opts...)
	}
	deploy, err := build(DeployArch, filepath.Join(dir, DeployArch))
	if err != nil {
		return t, err
	}
	t.row.BinaryBytes = deploy.Size
	if !o.noZip {
		if t.row.ZipBytes, err = Zip(deploy); err != nil {
			return t, err
		}
	}
	if t.host, err = build(runtime.GOARCH, filepath.Join(dir, "host")); err != nil {
		return t, err
	}
	t.env = OfflineEnv(fn)
	if fn != HelloName {
		sample, err := SampleEnv(repoRoot, fn)
		if err != nil {
			return t, err
		}
		maps.Copy(t.env, sample)
	}
	if secrets != nil {
		maps.Copy(t.env, secrets.env())
	}
	maps.Copy(t.env, o.env[fn])
	return t, nil
}

// coldInit starts bin fresh, invokes it once to trigger its INIT and returns
// the INIT duration. A handler error is fine: only the start matters.
func coldInit(ctx context.Context, bin Binary, env map[string]string, opts []Option) (time.Duration, error) {
	iv, err := Start(ctx, bin, env, opts...)
	if err != nil {
		return 0, err
	}
	defer iv.Stop()
	var fe *FunctionError
	if _, err := iv.Invoke(ctx, []byte("{}")); err != nil && !errors.As(err, &fe) {
		return 0, fmt.Errorf("%w\n%s", err, lastLines(iv.Logs(), 10))
	}
	if iv.Init() == 0 {
		return 0, fmt.Errorf("the emulator reported no INIT duration:\n%s", lastLines(iv.Logs(), 10))
	}
	return iv.Init(), nil
}

// WriteTable prints rows as a markdown table: function, deploy binary and
// zip size in MiB ("-" when not measured), and the medians over the starts
// of the INIT, of the wait on the SSM endpoint within it, and of the INIT
// without that wait, the last also as a multiple of the hello-world row's
// (when there is one). A variant's row names it after the function.
func WriteTable(w io.Writer, rows []Row) error {
	var hello time.Duration
	for _, r := range rows {
		if r.Function == HelloName {
			hello = r.OwnMedian()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| function | %s/%s binary (MiB) | zip (MiB) | INIT (ms) | SSM wait (ms) | INIT without the wait (ms) | × hello-world | starts | INIT measured on |\n", DeployOS, DeployArch)
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range rows {
		zipped := "-"
		if r.ZipBytes > 0 {
			zipped = fmt.Sprintf("%.2f", mib(r.ZipBytes))
		}
		ratio := "-"
		if hello > 0 {
			ratio = fmt.Sprintf("%.1f×", float64(r.OwnMedian())/float64(hello))
		}
		name := r.Function
		if r.Variant != "" {
			name += ", " + r.Variant
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %.2f | %.2f | %.2f | %s | %d | %s |\n", name,
			mib(r.BinaryBytes), zipped, ms(r.InitMedian()), ms(r.WaitMedian()), ms(r.OwnMedian()), ratio, len(r.Inits), r.InitArch)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write cold-start table: %w", err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// Report measures every function of the repository at repoRoot (Measure)
// and prints the markdown table (WriteTable) to w: the entry point of
// `linegate bench --cold-start`. It needs the go command and aws-lambda-rie
// (an error wrapping ErrNoEmulator otherwise) and runs on Linux only.
func Report(ctx context.Context, repoRoot string, w io.Writer, opts ...Option) error {
	rows, err := Measure(ctx, repoRoot, opts...)
	if err != nil {
		return fmt.Errorf("cold-start report: %w", err)
	}
	return WriteTable(w, rows)
}
