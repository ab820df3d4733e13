package motoserver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fatalTB is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the testing package's does.
type fatalTB struct {
	testing.TB
	mu       sync.Mutex
	msg      string
	cleanups []func()
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Cleanup(fn func()) { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// A moto_server that exits before it answers fails Start at once, with its
// output, instead of after the whole start wait.
func TestStartFailsAtOnceWhenMotoExits(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'moto: cannot bind: address in use' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "moto_server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(tb)
	}()
	select {
	case <-done:
	case <-time.After(startWait / 2):
		t.Fatalf("Start still waiting %v after moto_server exited", startWait/2)
	}
	for _, c := range tb.cleanups {
		c()
	}
	if !strings.Contains(tb.msg, "exited before it answered") || !strings.Contains(tb.msg, "cannot bind") {
		t.Fatalf("Start failed with %q; want that moto_server exited, with its output", tb.msg)
	}
}
