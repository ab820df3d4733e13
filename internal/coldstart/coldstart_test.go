package coldstart

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want logLine
	}{
		{"init report", "29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT REPORT(durationMs: 14.926000)",
			logLine{kind: lineInitReport, duration: 14926 * time.Microsecond}},
		{"init report, whole ms", "x [INFO] (rapid) INIT REPORT(durationMs: 3)",
			logLine{kind: lineInitReport, duration: 3 * time.Millisecond}},
		{"suppressed init after a failure", "x [INFO] (rapid) INIT REPORT(durationMs: 0.018000)",
			logLine{kind: lineInitReport, duration: 18 * time.Microsecond}},
		{"init done", "29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT RTDONE(status: success)",
			logLine{kind: lineInitDone, status: "success"}},
		{"init error", "x [INFO] (rapid) INIT RTDONE(status: error)",
			logLine{kind: lineInitDone, status: "error"}},
		{"init error with a type", "x [INFO] (rapid) INIT RTDONE(status: error, errorType: Runtime.ExitError)",
			logLine{kind: lineInitDone, status: "error"}},
		{"report: its Duration, not the Init Duration", "REPORT RequestId: e2c1\tInit Duration: 0.05 ms\tDuration: 16.07 ms\tBilled Duration: 17 ms\t",
			logLine{kind: lineReport, request: "e2c1", duration: 16070 * time.Microsecond}},
		{"warm report", "REPORT RequestId: 6b16e114-ee08-4cf6-914f-2ddd83ec4230\tDuration: 2.31 ms\tBilled Duration: 3 ms\tMemory Size: 256 MB\tMax Memory Used: 256 MB\t",
			logLine{kind: lineReport, request: "6b16e114-ee08-4cf6-914f-2ddd83ec4230", duration: 2310 * time.Microsecond}},
		{"report without a duration", "REPORT RequestId: e2c1\tInit Duration: 0.05 ms", logLine{}},
		{"report with a bad duration", "REPORT RequestId: e2c1\tDuration: soon ms", logLine{}},
		{"report with a negative duration", "REPORT RequestId: e2c1\tDuration: -1 ms", logLine{}},
		{"report in seconds", "REPORT RequestId: e2c1\tDuration: 1.5 s", logLine{}},
		{"report without an id", "REPORT RequestId: \tDuration: 1.00 ms", logLine{}},
		{"invoke done", "02 Dec 2026 01:51:30,839 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 1.727000ms)",
			logLine{kind: lineInvokeDone, duration: 1727 * time.Microsecond}},
		{"invoke done without a duration", "x (rapid) INVOKE RTDONE(status: error)", logLine{}},
		{"invoke done, bad duration", "x (rapid) INVOKE RTDONE(status: success, duration: -3ms)", logLine{}},
		{"start", "START RequestId: e2c1 Version: $LATEST", logLine{kind: lineStart, request: "e2c1"}},
		{"end", "END RequestId: e2c1", logLine{kind: lineEnd, request: "e2c1"}},
		{"end with a strange id", "END RequestId: e2c1 {x}", logLine{}},
		{"function output quoting a start", `{"message":"START RequestId: e2c1 Version: 1"}`, logLine{}},
		{"function output quoting it", `{"message":"INIT REPORT(durationMs: 1.0)"}`, logLine{}},
		{"init start", "x [INFO] (rapid) INIT START(type: on-demand, phase: init)", logLine{}},
		{"not a number", "x (rapid) INIT REPORT(durationMs: soon)", logLine{}},
		{"negative", "x (rapid) INIT REPORT(durationMs: -1)", logLine{}},
		{"NaN", "x (rapid) INIT REPORT(durationMs: NaN)", logLine{}},
		{"over a day", "x (rapid) INIT REPORT(durationMs: 1e300)", logLine{}},
		{"unterminated", "x (rapid) INIT REPORT(durationMs: 1.5", logLine{}},
		{"empty status", "x (rapid) INIT RTDONE(status: )", logLine{}},
		{"status is not a word", "x (rapid) INIT RTDONE(status: 0))", logLine{}},
		{"empty", "", logLine{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseLine(tt.line); got != tt.want {
				t.Fatalf("parseLine(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

// TestEmulatorLine checks which lines between START and END are the
// emulator's own (not the function's output).
func TestEmulatorLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		want bool
	}{
		{"02 Dec 2026 01:51:30,839 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 1.727000ms)", true},
		{"02 Dec 2026 01:51:30,822 [WARNING] (rapid) Cannot list external agents", true},
		{`{"level":"INFO","message":"02 Dec 2026 01:51:30,839 [INFO] (rapid) x"}`, false},
		{"SDK 2026/12/02 01:47:43 WARN failed to close HTTP response body", false},
		{"2 Dec 2026 01:51:30,839 [INFO] (rapid) x", false},
		{"", false},
	} {
		if got := emulatorLine(tt.line); got != tt.want {
			t.Errorf("emulatorLine(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestParseFunctionError(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *FunctionError
	}{
		{"runtime error", `{"errorMessage":"json: cannot unmarshal","errorType":"UnmarshalTypeError"}`,
			&FunctionError{Type: "UnmarshalTypeError", Message: "json: cannot unmarshal"}},
		{"with a stack trace", ` {"errorType":"Panic","errorMessage":"boom","stackTrace":[{"path":"x"}]}` + "\n",
			&FunctionError{Type: "Panic", Message: "boom"}},
		{"a proxy response", `{"statusCode":401,"body":"{\"error\":\"invalid signature\"}"}`, nil},
		{"a result with extra fields", `{"errorMessage":"m","errorType":"t","statusCode":200}`, nil},
		{"message only", `{"errorMessage":"m"}`, nil},
		{"type only", `{"errorType":"t"}`, nil},
		{"non-string type", `{"errorMessage":"m","errorType":7}`, nil},
		{"null", `null`, nil},
		{"batch response", `{"batchItemFailures":[]}`, nil},
		{"not JSON", `{oops`, nil},
		{"empty", ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseFunctionError([]byte(tt.body))
			if ok != (tt.want != nil) || (ok && *got != *tt.want) {
				t.Fatalf("parseFunctionError(%s) = %+v, %v; want %+v", tt.body, got, ok, tt.want)
			}
		})
	}
}

// OwnMedian is the median over the starts of INIT less the wait, not the
// difference of the medians.
func TestOwnMedian(t *testing.T) {
	ms := time.Millisecond
	r := Row{Inits: []time.Duration{10 * ms, 20 * ms, 30 * ms}, Waits: []time.Duration{9 * ms, 1 * ms, 2 * ms}}
	if got := r.OwnMedian(); got != 19*ms {
		t.Fatalf("OwnMedian = %v, want 19ms (the starts own 1, 19 and 28 ms)", got)
	}
	if got := (Row{Inits: []time.Duration{5 * ms}}).OwnMedian(); got != 5*ms {
		t.Fatalf("OwnMedian without waits = %v", got)
	}
}

func TestMedian(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", ms(7), 7 * time.Millisecond},
		{"odd, unsorted", ms(30, 10, 20), 20 * time.Millisecond},
		{"even: mean of the middle two", ms(40, 10, 20, 30), 25 * time.Millisecond},
		{"outlier does not move it", ms(11, 10, 900, 12, 10), 11 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := Median(in); got != tt.want {
				t.Fatalf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Fatalf("Median reordered its input: %v", in)
			}
		})
	}
}

func TestZip(t *testing.T) {
	tests := []struct {
		name    string
		content []byte
	}{
		{"compressible", bytes.Repeat([]byte("linegate "), 50_000)},
		{"empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, BootstrapName)
			if err := os.WriteFile(path, tt.content, 0o755); err != nil {
				t.Fatal(err)
			}
			size, err := Zip(Binary{Path: path, Size: int64(len(tt.content))})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path + ".zip")
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size {
				t.Fatalf("Zip returned %d, the file has %d bytes", size, fi.Size())
			}
			if len(tt.content) > 1000 && size >= int64(len(tt.content)) {
				t.Fatalf("zip of %d compressible bytes is %d bytes: not deflated", len(tt.content), size)
			}
			zr, err := zip.OpenReader(path + ".zip")
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
				t.Fatalf("zip holds %d entries, want only bootstrap", len(zr.File))
			}
			if m := zr.File[0].Mode(); m.Perm()&0o111 == 0 || !m.IsRegular() {
				t.Fatalf("bootstrap has mode %v, want an executable regular file", m)
			}
			rc, err := zr.File[0].Open()
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, tt.content) {
				t.Fatalf("bootstrap in the zip differs from the binary (%d vs %d bytes, %v)", len(got), len(tt.content), err)
			}
			again, err := Zip(Binary{Path: path})
			if err != nil || again != size {
				t.Fatalf("zipping the same binary twice gave %d then %d bytes (%v)", size, again, err)
			}
		})
	}
}

func TestZipMissingBinary(t *testing.T) {
	if _, err := Zip(Binary{Path: filepath.Join(t.TempDir(), "nope")}); err == nil {
		t.Fatal("zipping a missing binary succeeded")
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("AWS_PROFILE", "developer") // must not leak into the function
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"defaults only", nil, []string{"AWS_SAM_LOCAL=true", "PATH=/usr/bin:/bin"}},
		{"env added, sorted", map[string]string{"Z": "1", "A": "x=y"},
			[]string{"A=x=y", "AWS_SAM_LOCAL=true", "PATH=/usr/bin:/bin", "Z=1"}},
		{"env overrides the defaults", map[string]string{"AWS_SAM_LOCAL": "false", "PATH": "/opt"},
			[]string{"AWS_SAM_LOCAL=false", "PATH=/opt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := environ(tt.env); !slices.Equal(got, tt.want) {
				t.Fatalf("environ = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLogicalID(t *testing.T) {
	for in, want := range map[string]string{"webhook": "WebhookFunction", "worker": "WorkerFunction", "notifier": "NotifierFunction", "": ""} {
		if got := LogicalID(in); got != want {
			t.Errorf("LogicalID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFunctionsAndSampleEnv(t *testing.T) {
	root := filepath.Join("testdata", "repo")
	fns, err := Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "beta"}; !slices.Equal(fns, want) {
		t.Fatalf("Functions = %v, want %v (folders with a main.go only)", fns, want)
	}
	tests := []struct {
		fn   string
		want map[string]string
	}{
		{"alpha", map[string]string{"ALPHA_SETTING": "a", "EMPTY": ""}},
		{"beta", map[string]string{}},
	}
	for _, tt := range tests {
		got, err := SampleEnv(root, tt.fn)
		if err != nil {
			t.Fatal(err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tt.want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("SampleEnv(%s) = %s, want %s", tt.fn, gj, wj)
		}
	}
	if _, err := Functions(t.TempDir()); err == nil {
		t.Error("Functions of a folder without functions/ succeeded")
	}
	if _, err := SampleEnv(t.TempDir(), "alpha"); err == nil {
		t.Error("SampleEnv without events/env.json succeeded")
	}
}

// TestOfflineEnvNamesTheFunction checks OfflineEnv names the function as
// SAM does, fills the template's resource variables and keeps AWS calls on
// loopback. (That the real functions start with it is TestColdStart's job.)
func TestOfflineEnvNamesTheFunction(t *testing.T) {
	env := OfflineEnv("worker")
	if env["AWS_LAMBDA_FUNCTION_NAME"] != "WorkerFunction" || env["IDEMPOTENCY_TABLE"] == "" || env["EVENT_BUS_NAME"] == "" {
		t.Fatalf("OfflineEnv(worker) = %v", env)
	}
	if !strings.HasPrefix(env["AWS_ENDPOINT_URL"], "http://127.0.0.1:") {
		t.Fatalf("OfflineEnv points AWS at %q, want a loopback address", env["AWS_ENDPOINT_URL"])
	}
}

func TestWriteTableGolden(t *testing.T) {
	rows := []Row{
		{Function: HelloName, BinaryBytes: 6 << 20, ZipBytes: 3 << 20, InitArch: "linux/amd64",
			Inits: []time.Duration{3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}, Waits: []time.Duration{0, 0, 0}},
		{Function: "notifier", BinaryBytes: 20840610, ZipBytes: 6844370, InitArch: "linux/amd64",
			Inits: []time.Duration{11633 * time.Microsecond, 9545 * time.Microsecond, 9203 * time.Microsecond},
			Waits: []time.Duration{2 * time.Millisecond, 3 * time.Millisecond, 1 * time.Millisecond}},
		{Function: "webhook", BinaryBytes: 16 << 20, ZipBytes: 5 << 20, InitArch: "linux/amd64",
			Inits: []time.Duration{10 * time.Millisecond, 12 * time.Millisecond}}, // no waits measured
		{Function: "worker", BinaryBytes: 1, ZipBytes: 0, InitArch: "linux/arm64"}, // zip not measured
		{Function: "webhook", Variant: "TRACING=otel", BinaryBytes: 16 << 20, ZipBytes: 5 << 20, InitArch: "linux/amd64",
			Inits: []time.Duration{12 * time.Millisecond}, Waits: []time.Duration{time.Millisecond}},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "table.golden.md"), b.Bytes())
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteTableReportsWriteErrors(t *testing.T) {
	if err := WriteTable(failWriter{}, nil); err == nil {
		t.Fatal("WriteTable to a failing writer succeeded")
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT REPORT(durationMs: 14.926000)",
		"29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT RTDONE(status: success)",
		"x (rapid) INIT RTDONE(status: error, errorType: Runtime.ExitError)",
		"REPORT RequestId: e2c1\tInit Duration: 0.05 ms",
		"REPORT RequestId: e2c1\tDuration: 16.07 ms\tBilled Duration: 17 ms\t",
		"START RequestId: e2c1 Version: $LATEST",
		"END RequestId: e2c1",
		"x (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 1.727000ms)",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		got := parseLine(line)
		switch got.kind {
		case lineOther:
			if got != (logLine{}) {
				t.Fatalf("an unrecognised line carries data: %+v", got)
			}
		case lineInitReport:
			if !strings.Contains(line, "(rapid) "+initReportPrefix) || got.duration < 0 || got.duration > 24*time.Hour {
				t.Fatalf("parseLine(%q) = %+v", line, got)
			}
		case lineInitDone:
			if !strings.Contains(line, "(rapid) "+initDonePrefix) || got.status == "" || strings.IndexFunc(got.status, notStatusRune) >= 0 {
				t.Fatalf("parseLine(%q) = %+v", line, got)
			}
		case lineInvokeDone:
			if !strings.Contains(line, "(rapid) "+invokeDonePrefix) || got.duration < 0 || got.duration > 24*time.Hour {
				t.Fatalf("parseLine(%q) = %+v", line, got)
			}
		case lineStart, lineEnd:
			prefix := map[lineKind]string{lineStart: startPrefix, lineEnd: endPrefix}[got.kind]
			if !strings.HasPrefix(line, prefix+got.request) || !requestID(got.request) || got.duration != 0 {
				t.Fatalf("parseLine(%q) = %+v", line, got)
			}
		case lineReport:
			if !strings.HasPrefix(line, reportPrefix+got.request) || !requestID(got.request) || got.duration < 0 || got.duration > 24*time.Hour {
				t.Fatalf("parseLine(%q) = %+v", line, got)
			}
		default:
			t.Fatalf("unknown kind %d", got.kind)
		}
	})
}

func FuzzParseFunctionError(f *testing.F) {
	for _, s := range []string{
		`{"errorMessage":"boom","errorType":"Panic"}`,
		`{"errorMessage":"m","errorType":"t","stackTrace":[]}`,
		`{"statusCode":200,"body":""}`,
		`{"batchItemFailures":[]}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fe, ok := parseFunctionError(body)
		if !ok {
			if fe != nil {
				t.Fatal("not an error document, yet an error was returned")
			}
			return
		}
		// Whatever was accepted round-trips through the runtime's format.
		again, err := json.Marshal(map[string]string{"errorMessage": fe.Message, "errorType": fe.Type})
		if err != nil {
			t.Fatal(err)
		}
		fe2, ok := parseFunctionError(again)
		if !ok || *fe2 != *fe {
			t.Fatalf("%+v did not round-trip: %+v %v", fe, fe2, ok)
		}
	})
}
