package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records failures instead of stopping.
type recorder struct {
	testing.TB
	failed, fatal bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.fatal = true; panic(r) }
func (r *recorder) Fatalf(string, ...any) { r.fatal = true; panic(r) }

func check(t *testing.T, path string, got []byte, updating bool) (r *recorder) {
	t.Helper()
	old := *update
	*update = updating
	defer func() { *update = old }()
	r = &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	Check(r, path, got)
	return r
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "testdata", "out.golden")
	tests := []struct {
		name          string
		got           string
		update        bool
		failed, fatal bool
	}{
		{"missing file", "a", false, false, true},
		{"update writes it", "a", true, false, false},
		{"same output", "a", false, false, false},
		{"different output", "b", false, true, false},
		{"update accepts the new output", "b", true, false, false},
	}
	for _, tt := range tests { // in order: each builds on the file the last left
		r := check(t, path, []byte(tt.got), tt.update)
		if r.failed != tt.failed || r.fatal != tt.fatal {
			t.Errorf("%s: failed=%v fatal=%v, want %v and %v", tt.name, r.failed, r.fatal, tt.failed, tt.fatal)
		}
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "b" {
		t.Errorf("golden file = %q, %v; want the updated output", b, err)
	}
}

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := Read(t, path); string(got) != `{"a":1}` {
		t.Errorf("Read = %q, want the file's bytes", got)
	}
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		Read(r, path+".missing")
	}()
	if !r.fatal {
		t.Error("Read of a missing file did not fail the test")
	}
}
