package localstate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/localstate"
)

func open(t *testing.T, dir string) *localstate.Store {
	t.Helper()
	s, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func contents(t *testing.T, s *localstate.Store, bucket string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.Each(bucket, func(k, v []byte) error { out[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Changes are applied in the order they were appended: the last write of a
// key wins, a nil value deletes, and a reopened directory has them all.
func TestChangesSurviveReopenInOrder(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	steps := []localstate.Change{
		{Bucket: "a", Key: "k1", Value: []byte("one")},
		{Bucket: "a", Key: "k2", Value: []byte("two")},
		{Bucket: "b", Key: "k1", Value: []byte("other bucket")},
		{Bucket: "a", Key: "k1", Value: []byte("one again")},
		{Bucket: "a", Key: "k2"},
		{Bucket: "a", Key: "absent"},
	}
	for _, c := range steps[:3] {
		s.Append(c)
	}
	if err := s.Write(ctx, steps[3:]...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	for _, c := range []struct {
		bucket string
		want   map[string]string
	}{
		{"a", map[string]string{"k1": "one again"}},
		{"b", map[string]string{"k1": "other bucket"}},
		{"never written", map[string]string{}},
	} {
		if got := contents(t, s, c.bucket); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("bucket %s after reopen = %v, want %v", c.bucket, got, c.want)
		}
	}
}

// Concurrent writers share commits: each Write returns only once its change
// is on disk, and there are fewer commits than writes.
func TestConcurrentWritersShareCommits(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	const writers, each = 16, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Write(context.Background(), localstate.Change{Bucket: "k", Key: fmt.Sprintf("%02d-%03d", w, i), Value: []byte("v")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("%d changes in %d commits", st.Changes, st.Commits)
	if st.Changes != writers*each || st.Commits == 0 || st.Commits >= st.Changes {
		t.Errorf("stats %+v: want %d changes in fewer commits", st, writers*each)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if n := len(contents(t, s, "k")); n != writers*each {
		t.Fatalf("%d keys after reopen, want %d", n, writers*each)
	}
}

// A second process (here: a second Open) cannot use a directory in use.
func TestDirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	_, err := localstate.Open(dir)
	if !errors.Is(err, localstate.ErrInUse) {
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
}

// After Close, appended changes are never durable and Wait says so.
func TestWaitAfterClose(t *testing.T) {
	s := open(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Write(ctx, localstate.Change{Bucket: "a", Key: "k", Value: []byte("v")}); !errors.Is(err, localstate.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

// writerEnv makes this test binary a writer process (see TestMain).
const writerEnv = "LOCALSTATE_TEST_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		s, err := localstate.Open(dir)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		// Write keys one after the other from 4 goroutines, printing each
		// key once its Write returned: the acknowledgement.
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					k := fmt.Sprintf("%d-%d", w, i)
					if err := s.Write(context.Background(), localstate.Change{Bucket: "acked", Key: k, Value: []byte(k)}); err != nil {
						return
					}
					mu.Lock()
					fmt.Println(k)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A process killed with SIGKILL while writing keeps every change it
// acknowledged: Write returns only after the commit's fsync.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		acked = append(acked, sc.Text())
		if len(acked) == 2000 || time.Now().After(deadline) {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 100 {
		t.Fatalf("the writer acknowledged only %d keys: %v", len(acked), acked)
	}
	s := open(t, dir)
	defer s.Close()
	got := contents(t, s, "acked")
	missing := 0
	for _, k := range acked {
		if got[k] != k {
			missing++
		}
	}
	t.Logf("%d keys acknowledged before SIGKILL, %d on disk after it", len(acked), len(got))
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged keys lost", missing, len(acked))
	}
}
