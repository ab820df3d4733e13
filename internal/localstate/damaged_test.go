package localstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/localstate"
)

// wholeState writes a state directory of a few hundred kilobytes and
// returns its database's bytes.
func wholeState(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	s := open(t, dir)
	var changes []localstate.Change
	for i := range 2000 {
		changes = append(changes, localstate.Change{Bucket: fmt.Sprintf("bucket-%d", i%3), Key: fmt.Sprintf("key-%05d", i), Value: bytes.Repeat([]byte{'v'}, 100+i%50)})
	}
	if err := s.Write(context.Background(), changes...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, localstate.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A state file that is not a whole database — truncated, overwritten, or
// empty — fails Open with one line that names the file and says what to
// do, matching ErrDamaged; bbolt's panics never escape, the file is left
// as it was, and its lock is released (a second Open says the same).
func TestDamagedStateFile(t *testing.T) {
	whole := wholeState(t)
	const page = 4096
	garble := func(from, to int) func([]byte) []byte {
		return func(b []byte) []byte {
			out := bytes.Clone(b)
			r := rand.New(rand.NewPCG(1, 2))
			for i := from; i < min(to, len(out)); i++ {
				out[i] = byte(r.UintN(256))
			}
			return out
		}
	}
	tests := []struct {
		name    string
		corrupt func([]byte) []byte
		want    string // in the message besides the path
	}{
		{"empty", func([]byte) []byte { return nil }, "empty (0 bytes)"},
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }, "move it aside"},
		{"truncated to its meta pages", func(b []byte) []byte { return b[:2*page] }, "move it aside"},
		{"truncated mid-page", func(b []byte) []byte { return b[:len(b)/2+123] }, "move it aside"},
		{"pages overwritten", garble(2*page, len(whole)/2), "move it aside"},
		{"meta pages overwritten", garble(0, 2*page), "move it aside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, localstate.FileName)
			bad := tt.corrupt(whole)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			for attempt := range 2 {
				s, err := localstate.Open(dir)
				if err == nil {
					_ = s.Close()
					t.Fatalf("Open %d of a damaged file succeeded", attempt+1)
				}
				msg := err.Error()
				if !errors.Is(err, localstate.ErrDamaged) || !strings.Contains(msg, path) || !strings.Contains(msg, tt.want) ||
					strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
					t.Fatalf("Open %d: %q; want one line matching ErrDamaged, naming %s and saying %q", attempt+1, msg, path, tt.want)
				}
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, bad) {
				t.Fatalf("the damaged file was changed (%d bytes, was %d): %v", len(got), len(bad), err)
			}
		})
	}
	// The whole file opens, and has everything.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, localstate.FileName), whole, 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	defer s.Close()
	if n := len(contents(t, s, "bucket-1")); n != 667 {
		t.Fatalf("the whole file has %d keys in bucket-1, want 667", n)
	}
}

// FuzzOpen opens arbitrary bytes as a state file: Open never panics, and
// either opens (a whole database) or fails with ErrDamaged, one line.
func FuzzOpen(f *testing.F) {
	whole := wholeStateF(f)
	f.Add(whole[:8192])
	f.Add(whole[:min(len(whole), 6*4096)])
	f.Add([]byte("not a database"))
	f.Add(bytes.Repeat([]byte{0}, 3*4096))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, localstate.FileName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := localstate.Open(dir)
		if err == nil {
			_ = s.Close()
			return
		}
		if !errors.Is(err, localstate.ErrDamaged) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Open: %q; want ErrDamaged on one line", err)
		}
	})
}

// wholeStateF is wholeState for a fuzz target's seeds.
func wholeStateF(f *testing.F) []byte {
	dir := f.TempDir()
	s, err := localstate.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 50 {
		s.Append(localstate.Change{Bucket: "b", Key: fmt.Sprintf("k%03d", i), Value: bytes.Repeat([]byte{'v'}, 200)})
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, localstate.FileName))
	if err != nil {
		f.Fatal(err)
	}
	return b
}
