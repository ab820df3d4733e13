package localstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt reuses the pages that deletes free, but never gives them back to
// the filesystem, and the pages it fills as keys come (in increasing
// order, mostly) stay part empty: a burst (thousands of FIFO deduplication
// ids, messages in flight) leaves the file at its high-water mark long
// after what it held expired, and every page of it that was touched
// counts in the process's memory (the file is mapped). So the Store
// compacts: it copies the live data into a new file, pages filled
// (bbolt.Compact), and replaces the old one — at Open, and while running,
// from the committer, between two commits, when a third of the file's pages
// are free and they make at least compactMinFree. Commits wait while it
// runs (well under a second for tens of megabytes).
const (
	// DefaultCompactMinFree is the least free space worth a compaction.
	DefaultCompactMinFree = 4 << 20
	// DefaultCompactEvery is how often the committer looks.
	DefaultCompactEvery = time.Minute
	// compactTxBytes bounds one transaction of a compaction's copy.
	compactTxBytes = 4 << 20
)

// compactSuffix names the file a compaction writes before it replaces the
// database with it; a leftover (a crash mid-compaction) is deleted at Open.
const compactSuffix = ".compact"

// WithCompaction sets how much free space is worth a compaction (minFree
// bytes, and at least a third of the file's pages) and how often the
// committer looks (every): tests compact small files at once.
func WithCompaction(minFree int64, every time.Duration) Option {
	return func(s *Store) { s.compactMinFree, s.compactEvery = minFree, every }
}

// Size is what the database file takes: Bytes, the file's size; Pages,
// the bytes of the pages the database has used (its high-water mark: bbolt
// grows the file ahead of it, and a file's tail past it takes neither disk
// blocks nor memory); Free, those of them on bbolt's freelist (freed by
// deletes, reusable); InUse, the bytes that hold data (keys, values and the
// pages' headers, as bbolt's bucket statistics count them). Pages less
// InUse — free pages, and pages part empty — is what a compaction gives
// back.
type Size struct {
	Bytes, Pages, Free, InUse int64
}

// Size reports the database file's size and how much of it is in use. It
// reads every page (the bucket statistics walk them), so every page of the
// mapped file is then in the process's memory: for tests and reports, not
// for the committer.
func (s *Store) Size() (Size, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return Size{}, s.failure()
	}
	sz, err := pagesOf(s.db, s.path)
	if err != nil {
		return sz, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		sz.InUse = 4 * int64(s.db.Info().PageSize) // the meta pages, the freelist, the root
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			st := b.Stats()
			sz.InUse += int64(st.BranchInuse + st.LeafInuse + st.InlineBucketInuse)
			return nil
		})
	})
	return sz, err
}

// pagesOf is the Size of db, whose file is at path (a compacted database's
// own Path is the name it was written under), without InUse: from the
// file, the meta page and the freelist, reading no other page.
func pagesOf(db *bolt.DB, path string) (Size, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Size{}, fmt.Errorf("localstate: %w", err)
	}
	out := Size{Bytes: info.Size()}
	st := db.Stats()
	out.Free = int64(st.FreePageN+st.PendingPageN) * int64(db.Info().PageSize)
	err = db.View(func(tx *bolt.Tx) error { out.Pages = tx.Size(); return nil })
	return out, err
}

// worthCompacting reports whether compacting db (at path) is worth it: at
// least a third of its pages free, and at least minFree bytes. It reads the
// freelist's count only (walking the pages would bring the whole mapped
// file into the process's memory, which the compaction is there to keep
// small); a compaction leaves no free page, so it is not worth doing again
// until deletes free a third of the file again.
func worthCompacting(db *bolt.DB, path string, minFree int64) bool {
	sz, err := pagesOf(db, path)
	return err == nil && sz.Free >= minFree && sz.Free*3 >= sz.Pages
}

// compactFile copies the live data of db (at path) into a new file and
// puts it in path's place: the copy is committed (fsync'd) first, the
// rename is atomic, and the directory is synced before the new database
// takes a commit, so a crash at any point leaves one whole database at
// path. The copy holds the lock on the path's new file from before the
// rename, so no other process can open the database in between. It
// returns the new database (db is closed) or, on failure, db as it was.
func compactFile(db *bolt.DB, path string) (*bolt.DB, error) {
	tmp := path + compactSuffix
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return db, fmt.Errorf("localstate: compact %s: %w", path, err)
	}
	fail := func(err error) (*bolt.DB, error) {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return db, fmt.Errorf("localstate: compact %s: %w", path, err)
	}
	if err := bolt.Compact(dst, db, compactTxBytes); err != nil {
		return fail(err)
	}
	if err := dst.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDirectory(filepath.Dir(path)); err != nil {
		// The rename may not survive a power cut: the new file must not
		// take commits that the old one, coming back, would lack. It holds
		// everything, so it stays; only its use waits for a good sync.
		_ = dst.Close()
		_ = db.Close()
		return nil, fmt.Errorf("localstate: compact %s: sync the directory after the rename: %w", path, err)
	}
	_ = db.Close()
	return dst, nil
}

// syncDirectory is syncDir; tests make it fail.
var syncDirectory = syncDir

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeLeftover deletes what a compaction cut short left next to path.
func removeLeftover(path string) error {
	if err := os.Remove(path + compactSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("localstate: remove %s%s: %w", path, compactSuffix, err)
	}
	return nil
}

// failure is why the database is closed under a running Store: the
// compaction that could not make its result safe.
func (s *Store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return ErrClosed
}
