package coldstart_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/coldstart"
)

// fakeEmulatorEnv makes the test binary act as the emulator (TestMain):
// for what the real one never does on cue, such as leaving out a REPORT.
const fakeEmulatorEnv = "COLDSTART_FAKE_EMULATOR"

// fakeEmulator serves the emulator's invoke endpoint on the address of
// --runtime-interface-emulator-address and prints the emulator's lines
// around a line of "function output", as aws-lambda-rie prints them. In mode
// "report" it prints START, the function's line, its own INVOKE RTDONE line,
// END and REPORT; in mode "noreport" no REPORT; in mode "nortdone" no
// INVOKE RTDONE. With FAKE_PID_FILE set it
// writes its pid there first.
func fakeEmulator(mode string) int {
	fset := flag.NewFlagSet("aws-lambda-rie", flag.ContinueOnError)
	addr := fset.String("runtime-interface-emulator-address", "", "")
	fset.String("runtime-api-address", "", "")
	fset.String("log-level", "", "")
	if err := fset.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if p := os.Getenv("FAKE_PID_FILE"); p != "" {
		if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return 2
		}
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return 2
	}
	first := true
	stamp := "02 Dec 2026 01:50:00,123 [INFO] (rapid) "
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Amzn-RequestId")
		if first {
			first = false
			fmt.Println(stamp + "INIT RTDONE(status: success)")
			fmt.Println(stamp + "INIT REPORT(durationMs: 1.500000)")
		}
		fmt.Println("START RequestId: " + id + " Version: $LATEST")
		fmt.Println(`{"level":"INFO","message":"from the function"}`)
		if mode != "nortdone" {
			fmt.Println(stamp + "INVOKE RTDONE(status: success, produced bytes: 0, duration: 7.250000ms)")
		}
		fmt.Println("END RequestId: " + id)
		if mode != "noreport" {
			fmt.Printf("REPORT RequestId: %s\tDuration: 12.50 ms\tBilled Duration: 13 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t\n", id)
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	return 0
}

// startFake starts the test binary as the emulator in mode, with opts.
func startFake(t *testing.T, mode string, env map[string]string, opts ...coldstart.Option) (*coldstart.Invoker, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{fakeEmulatorEnv: mode}
	for k, v := range env {
		all[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return coldstart.Start(ctx, coldstart.Binary{Path: self}, all, append([]coldstart.Option{coldstart.WithEmulator(self)}, opts...)...)
}

// TestRunReadsTheEmulatorsLines checks Run against the emulator's output:
// the runtime's Duration (INVOKE RTDONE's, else REPORT's), the function's
// line and not the emulator's own, the request id it sent; and, without a
// REPORT, ErrNoReport rather than an invocation with no output.
func TestRunReadsTheEmulatorsLines(t *testing.T) {
	for _, tt := range []struct {
		mode string
		want time.Duration
	}{
		{"report", 7250 * time.Microsecond},
		{"nortdone", 12500 * time.Microsecond},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			iv, err := startFake(t, tt.mode, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer iv.Stop()
			for i := range 2 {
				inv, err := iv.Run(context.Background(), []byte("{}"))
				if err != nil {
					t.Fatal(err)
				}
				if string(inv.Body) != `{"ok":true}` || inv.Duration != tt.want || inv.TraceID != "" ||
					!slices.Equal(inv.Output, []string{`{"level":"INFO","message":"from the function"}`}) {
					t.Fatalf("invocation %d: %+v", i, inv)
				}
				if !strings.Contains(iv.Logs(), "END RequestId: "+inv.RequestID+"\n") {
					t.Fatalf("the request id %q is not the one the emulator got:\n%s", inv.RequestID, iv.Logs())
				}
			}
		})
	}
	t.Run("no report", func(t *testing.T) {
		iv, err := startFake(t, "noreport", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer iv.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		inv, err := iv.Run(ctx, []byte("{}"))
		if !errors.Is(err, coldstart.ErrNoReport) || string(inv.Body) != `{"ok":true}` {
			t.Fatalf("Run without a REPORT line: %+v, %v; want the body and ErrNoReport", inv, err)
		}
	})
}

// TestStartJoinsTheCgroups checks WithCgroups: the emulator's pid is in each
// group's cgroup.procs when Start returns (before the first invocation, so
// the function it forks then inherits the groups), and a group it cannot
// join fails Start with no emulator left running. Plain directories stand in
// for the groups: cgroup.procs is a file the pid is written to.
func TestStartJoinsTheCgroups(t *testing.T) {
	t.Run("joined", func(t *testing.T) {
		dirs := []string{t.TempDir(), t.TempDir()}
		pidFile := filepath.Join(t.TempDir(), "pid")
		iv, err := startFake(t, "report", map[string]string{"FAKE_PID_FILE": pidFile}, coldstart.WithCgroups(dirs...))
		if err != nil {
			t.Fatal(err)
		}
		defer iv.Stop()
		pid, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if got, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err != nil || string(got) != string(pid) {
				t.Fatalf("%s/cgroup.procs = %q (%v), want the emulator's pid %s", d, got, err, pid)
			}
		}
	})
	t.Run("cannot join", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		missing := filepath.Join(t.TempDir(), "no-such-group")
		iv, err := startFake(t, "report", map[string]string{"FAKE_PID_FILE": pidFile}, coldstart.WithCgroups(t.TempDir(), missing))
		if err == nil {
			iv.Stop()
			t.Fatal("Start succeeded with a cgroup that does not exist")
		}
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("err = %v, want one naming %s", err, missing)
		}
		pid, rerr := os.ReadFile(pidFile)
		if rerr != nil {
			return // it had not even run: nothing left behind
		}
		if _, err := os.Stat("/proc/" + string(pid)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the emulator (pid %s) is still there after Start failed: %v", pid, err)
		}
	})
}

// TestRunUnderTheEmulator runs the real webhook under aws-lambda-rie with
// active tracing: an invocation it refuses (a bad signature) makes it log
// its rejection and the rejection's EMF metric, which Run returns as the
// invocation's output, without the emulator's lines, the rejection carrying
// the request id and the trace id the function got.
func TestRunUnderTheEmulator(t *testing.T) {
	requireEmulator(t)
	bin := hostBinary(t, "webhook")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := coldstart.OfflineEnv("webhook")
	env["LINE_CHANNEL_SECRET"] = "s"
	env["AWS_LAMBDA_LOG_FORMAT"] = "JSON"
	iv, err := coldstart.Start(ctx, bin, env, coldstart.WithActiveTracing())
	if err != nil {
		t.Fatal(err)
	}
	defer iv.Stop()
	event := []byte(`{"httpMethod":"POST","path":"/webhook","headers":{"x-line-signature":"bad"},"body":"{\"events\":[]}"}`)
	for i := range 2 { // the cold start and a warm one
		inv, err := iv.Run(ctx, event)
		if err != nil {
			t.Fatalf("invocation %d: %v\n%s", i, err, iv.Logs())
		}
		if inv.Duration <= 0 || inv.TraceID == "" || !strings.HasPrefix(inv.TraceID, "1-") {
			t.Fatalf("invocation %d: duration %v, trace id %q", i, inv.Duration, inv.TraceID)
		}
		if len(inv.Output) != 2 {
			t.Fatalf("invocation %d wrote %d lines, want 2:\n%s\nall output:\n%s", i, len(inv.Output), strings.Join(inv.Output, "\n"), iv.Logs())
		}
		var l, emf map[string]any
		if err := json.Unmarshal([]byte(inv.Output[0]), &l); err != nil || l["message"] != "webhook rejected" ||
			l["requestId"] != inv.RequestID || l["traceId"] != inv.TraceID {
			t.Fatalf("invocation %d: the line %s is not the invocation's rejection (request %s, trace %s): %v", i, inv.Output[0], inv.RequestID, inv.TraceID, err)
		}
		if err := json.Unmarshal([]byte(inv.Output[1]), &emf); err != nil || emf["SignaturesRejected"] != 1.0 {
			t.Fatalf("invocation %d: the line %s is not the rejection's metric: %v", i, inv.Output[1], err)
		}
	}
}
