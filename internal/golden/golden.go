// Package golden is the one golden-file check of linegate's tests: it
// compares a test's output with a file kept under the package's testdata/,
// and rewrites that file when the test binary runs with -update, so a
// reviewed change of output is one command. Read loads a test's input kept
// there beside them.
//
// Importing it registers the -update flag; a test package that imports it
// must not declare its own.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// Check compares got with the file at path (relative to the test's package
// directory, usually under testdata/), first writing got there when -update
// is set. A difference fails t, showing both; a missing file fails it with
// the hint to run -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it after review)\n got: %s\nwant: %s", path, got, want)
	}
}

// Read returns the file at path (relative to the test's package directory,
// usually under testdata/): an input a test keeps beside its golden files.
// A file that cannot be read fails t.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
