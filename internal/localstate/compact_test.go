package localstate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/localstate"
)

// fill writes n keys of about 300 bytes into bucket "b", then (expire)
// deletes all but every keep-th, as a burst that expired leaves a state
// file.
func fill(t *testing.T, s *localstate.Store, n, keep int) {
	t.Helper()
	write(t, s, n)
	expire(t, s, n, keep)
}

func write(t *testing.T, s *localstate.Store, n int) {
	t.Helper()
	value := make([]byte, 300)
	for i := 0; i < n; i += 500 {
		var cs []localstate.Change
		for j := i; j < min(i+500, n); j++ {
			cs = append(cs, localstate.Change{Bucket: "b", Key: fmt.Sprintf("k%06d", j), Value: value})
		}
		if err := s.Write(context.Background(), cs...); err != nil {
			t.Fatal(err)
		}
	}
}

func expire(t *testing.T, s *localstate.Store, n, keep int) {
	t.Helper()
	var del []localstate.Change
	for j := range n {
		if j%keep != 0 {
			del = append(del, localstate.Change{Bucket: "b", Key: fmt.Sprintf("k%06d", j)})
		}
	}
	if err := s.Write(context.Background(), del...); err != nil {
		t.Fatal(err)
	}
}

// A running Store gives back the space a burst left once it expired: the
// committer compacts the file when its free pages are worth it, the file
// shrinks, writes made around the compaction are all durable, and a
// second process still cannot open the directory (the lock never lapses).
func TestCompactsWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, err := localstate.Open(dir, localstate.WithCompaction(1<<20, 0))
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, 20_000)
	before, err := s.Size()
	if err != nil {
		t.Fatal(err)
	}
	// The burst expires while writers keep writing: the committer
	// compacts between their commits.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := s.Write(context.Background(), localstate.Change{Bucket: "w", Key: fmt.Sprintf("w%d-%02d", w, i), Value: []byte("v")}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	expire(t, s, 20_000, 10)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Compactions == 0 || st.CompactFailures != 0 {
		t.Fatalf("stats %+v after a burst that expired: want a compaction and no failure", st)
	}
	after, err := s.Size()
	if err != nil {
		t.Fatal(err)
	}
	if after.Pages >= before.Pages/2 || after.InUse*10 < after.Pages*8 {
		t.Fatalf("file %+v before, %+v after the compaction: want under half the pages, at least 80%% in use", before, after)
	}
	if _, err := localstate.Open(dir); !errors.Is(err, localstate.ErrInUse) {
		t.Fatalf("a second Open after the compaction: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if n := len(contents(t, s, "b")); n != 2000 {
		t.Fatalf("%d keys left after the compaction and a reopen, want 2000", n)
	}
	if n := len(contents(t, s, "w")); n != 400 {
		t.Fatalf("%d of the 400 writes made around the compaction survived, want all", n)
	}
	if _, err := os.Stat(filepath.Join(dir, localstate.FileName+".compact")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the compaction's file is left behind: %v", err)
	}
}

// Open compacts a file that is mostly free before it is used, and deletes
// what a compaction cut short by a crash left next to it; a file without
// much free space is left alone.
func TestCompactsAtOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := localstate.Open(dir, localstate.WithCompaction(1<<20, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 20_000, 10)
	if st := s.Stats(); st.Compactions != 0 {
		t.Fatalf("compacted while running with an hour between looks: %+v", st)
	}
	big, _ := s.Size()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, localstate.FileName+".compact")
	if err := os.WriteFile(leftover, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = localstate.Open(dir, localstate.WithCompaction(1<<20, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	small, _ := s.Size()
	if st := s.Stats(); st.Compactions != 1 || small.Pages >= big.Pages/2 {
		t.Fatalf("at Open: stats %+v, size %+v (was %+v); want one compaction to under half", st, small, big)
	}
	if n := len(contents(t, s, "b")); n != 2000 {
		t.Fatalf("%d keys after the compaction at Open, want 2000", n)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover of a cut compaction is still there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = localstate.Open(dir, localstate.WithCompaction(1<<20, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Stats(); st.Compactions != 0 {
		t.Fatalf("a compact file compacted again at Open: %+v", st)
	}
}

// A compaction that cannot even start (its file's name is taken by a
// directory) leaves the database as it was: counted as failed, and every
// write before and after it is there.
func TestCompactionThatFailsChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := localstate.Open(dir, localstate.WithCompaction(1<<20, 0))
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, 20_000)
	blocker := filepath.Join(dir, localstate.FileName+".compact")
	if err := os.MkdirAll(filepath.Join(blocker, "in the way"), 0o700); err != nil {
		t.Fatal(err)
	}
	expire(t, s, 20_000, 10)
	if err := s.Write(context.Background(), localstate.Change{Bucket: "w", Key: "after", Value: []byte("v")}); err != nil {
		t.Fatalf("a write after a failed compaction: %v", err)
	}
	if st := s.Stats(); st.Compactions != 0 || st.CompactFailures == 0 {
		t.Fatalf("stats %+v; want failed compactions and none done", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if n, w := len(contents(t, s, "b")), len(contents(t, s, "w")); n != 2000 || w != 1 {
		t.Fatalf("%d keys and %d later writes after the failed compaction, want 2000 and 1", n, w)
	}
}
