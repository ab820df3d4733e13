package testsummary

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/golden"
)

// A real `go test -json ./...` stream of a module with a passing, a
// skipped, a failing and an unbuildable package: the output is what plain
// go test shows plus the lists, and every skip and failure is counted.
func TestSummarise(t *testing.T) {
	var out bytes.Buffer
	s, err := Summarise(fixture(t, "testdata/stream.jsonl"), &out)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/summary.golden", out.Bytes())
	names := func(rs []Result) string {
		var n []string
		for _, r := range rs {
			n = append(n, strings.TrimPrefix(r.Package, "example.com/demo/")+" "+r.Test)
		}
		return strings.Join(n, ", ")
	}
	if got := names(s.Skipped); got != "good TestSkipsLoudly, good TestTable/two" {
		t.Errorf("skipped %s", got)
	}
	if got := names(s.Failed); got != "bad TestFails" || !strings.Contains(s.Failed[0].Reason, "want 4") {
		t.Errorf("failed %s (%+v)", got, s.Failed)
	}
	if !strings.Contains(s.Skipped[0].Reason, "SKIPPED LOUDLY: cfn-lint not installed") {
		t.Errorf("skip reason %q", s.Skipped[0].Reason)
	}
	if strings.Join(s.FailedPackages, " ") != "example.com/demo/bad example.com/demo/broken" || s.Passed != 4 {
		t.Errorf("failed packages %v, passed %d", s.FailedPackages, s.Passed)
	}
	if strings.Contains(out.String(), "TestPasses") {
		t.Error("a passing test's name reached the output, which plain go test does not print")
	}
}

// Lines that are not go test events (go vet's output, a compiler's stderr
// merged in) pass through unchanged.
func TestSummarisePassesOtherLinesThrough(t *testing.T) {
	var out bytes.Buffer
	if _, err := Summarise(strings.NewReader("# example.com/x\nvet: something\n{not json\n"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "# example.com/x\nvet: something\n{not json\n") {
		t.Fatalf("output %q", out.String())
	}
}

// Whatever the stream holds, Summarise neither panics nor loses the count.
func FuzzSummarise(f *testing.F) {
	f.Add([]byte(`{"Action":"skip","Package":"p","Test":"T"}`))
	f.Add([]byte(`{"Action":"output","Package":"p","Test":"T","Output":"x\n"}` + "\n" + `{"Action":"fail","Package":"p","Test":"T"}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		s, err := Summarise(bytes.NewReader(stream), io.Discard)
		if err != nil {
			return
		}
		if s.Passed < 0 || len(s.Skipped)+len(s.Failed) > bytes.Count(stream, []byte("{"))+1 {
			t.Fatalf("summary %+v from %d bytes", s, len(stream))
		}
	})
}

// fixture opens a checked-in stream.
func fixture(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
