// Package testsummary reads the event stream of `go test -json` and writes
// what plain `go test` shows — each package's ok/FAIL line, the output of
// failed tests, build errors — followed by the list of every skipped test
// with its reason, and of every failed one. Skips that announce themselves
// "loudly" are invisible in a plain `go test` run; `make test` ends with
// this list instead.
package testsummary

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Result is one test that was skipped or failed.
type Result struct {
	Package string
	Test    string
	// Reason is the test's own output (its t.Skip or t.Error lines),
	// without go test's framing lines.
	Reason string
}

// Summary is what a run came to.
type Summary struct {
	Skipped []Result
	Failed  []Result
	// Passed counts passed tests (subtests included).
	Passed int
	// FailedPackages are packages that failed to build or failed outside
	// any test (a panic in TestMain, a timeout).
	FailedPackages []string
}

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// maxKept bounds the output kept per running test: a test that prints
// megabytes before failing shows its last lines.
const maxKept = 64 << 10

// Summarise copies the stream from r to w as plain `go test` output and
// returns the summary; it then writes the skip and failure lists. A line
// that is not a JSON event (go vet output, a build's stderr) is written as
// it is.
func Summarise(r io.Reader, w io.Writer) (Summary, error) {
	var s Summary
	outputs := map[string]*strings.Builder{} // package + "\x00" + test
	failedPkg := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			io.WriteString(w, e.Output)
		case e.Action == "build-fail":
			path, _, _ := strings.Cut(e.ImportPath, " ") // "p [p.test]"
			failedPkg[path] = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" { // plain go test prints only the ok line
				io.WriteString(w, e.Output) // the package's ok / FAIL / no test files lines
			}
		case e.Test == "" && e.Action == "fail":
			failedPkg[e.Package] = true
		case e.Test == "":
		case e.Action == "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			if b.Len() < maxKept {
				b.WriteString(e.Output)
			}
		case e.Action == "pass":
			s.Passed++
			delete(outputs, key)
		case e.Action == "skip", e.Action == "fail":
			res := Result{Package: e.Package, Test: e.Test, Reason: reason(outputs[key])}
			if e.Action == "skip" {
				s.Skipped = append(s.Skipped, res)
			} else {
				s.Failed = append(s.Failed, res)
				if b := outputs[key]; b != nil {
					io.WriteString(w, b.String())
				}
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("read go test -json: %w", err)
	}
	for p := range failedPkg {
		s.FailedPackages = append(s.FailedPackages, p)
	}
	sort.Strings(s.FailedPackages)
	writeLists(w, s)
	return s, nil
}

// reason is a test's output without go test's framing lines.
func reason(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(b.String(), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		keep = append(keep, t)
	}
	return strings.Join(keep, " | ")
}

func writeLists(w io.Writer, s Summary) {
	fmt.Fprintf(w, "\n%d passed, %d skipped, %d failed", s.Passed, len(s.Skipped), len(s.Failed))
	if len(s.FailedPackages) > 0 {
		fmt.Fprintf(w, ", %d package(s) failed: %s", len(s.FailedPackages), strings.Join(s.FailedPackages, " "))
	}
	fmt.Fprintln(w)
	for _, l := range []struct {
		title string
		rs    []Result
	}{{"SKIPPED", s.Skipped}, {"FAILED", s.Failed}} {
		if len(l.rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s (%d):\n", l.title, len(l.rs))
		for _, r := range l.rs {
			fmt.Fprintf(w, "  %s %s", r.Package, r.Test)
			if r.Reason != "" {
				fmt.Fprintf(w, ": %s", r.Reason)
			}
			fmt.Fprintln(w)
		}
	}
}
