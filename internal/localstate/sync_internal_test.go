package localstate

import "testing"

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
	if s.db.NoSync || s.db.NoGrowSync || s.db.NoFreelistSync && s.db.FreelistType == "" {
		t.Fatalf("bbolt commits are not synced: NoSync %v, NoGrowSync %v", s.db.NoSync, s.db.NoGrowSync)
	}
}
