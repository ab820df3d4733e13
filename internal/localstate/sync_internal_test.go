package localstate

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Every commit is fsync'd before Wait returns: bbolt syncs a commit unless
// NoSync is set (and grows the file with a sync unless NoGrowSync is),
// which nothing here may set — a Store whose commits reach only the page
// cache would acknowledge what a power cut loses. The behaviour this
// guards is tested with a held commit in internal/local's
// TestWebhookAnswersAfterItsEventLogIsDurable; no test can see an fsync.
func TestCommitsAreSynced(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.db.NoSync || s.db.NoGrowSync {
		t.Fatalf("bbolt commits are not synced: NoSync %v, NoGrowSync %v", s.db.NoSync, s.db.NoGrowSync)
	}
}

// A compaction whose rename cannot be made durable (the directory's sync
// fails) must not take another commit on the new file — a power cut could
// bring the old one back without it: the Store fails as a failed commit
// does, and the file in place holds everything written before.
func TestCompactionWhoseRenameIsNotDurableFailsTheStore(t *testing.T) {
	errSync := errors.New("planted: directory sync failed")
	syncDirectory = func(string) error { return errSync }
	defer func() { syncDirectory = syncDir }()
	dir := t.TempDir()
	s, err := Open(dir, WithCompaction(1<<20, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var cs []Change
	for i := range 20_000 {
		cs = append(cs, Change{Bucket: "b", Key: fmt.Sprintf("k%06d", i), Value: make([]byte, 300)})
	}
	if err := s.Write(ctx, cs...); err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		cs[i].Value = nil
	}
	if err := s.Write(ctx, cs[1:]...); err != nil { // committed; the compaction after it fails
		t.Fatal(err)
	}
	if err := s.Write(ctx, Change{Bucket: "b", Key: "later", Value: []byte("v")}); !errors.Is(err, errSync) {
		t.Fatalf("a write after the failed compaction: %v, want it to fail with the sync's error", err)
	}
	if err := s.Each("b", func(_, _ []byte) error { return nil }); !errors.Is(err, errSync) {
		t.Fatalf("Each after the failed compaction: %v, want the sync's error", err)
	}
	if err := s.Close(); !errors.Is(err, errSync) {
		t.Fatalf("Close: %v, want the sync's error", err)
	}
	syncDirectory = syncDir
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var keys []string
	_ = s.Each("b", func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
	if len(keys) != 1 || keys[0] != "k000000" {
		t.Fatalf("after a restart the file holds %v, want the one key written before", keys)
	}
}
