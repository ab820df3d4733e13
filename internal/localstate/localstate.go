// Package localstate keeps `linegate local --state DIR` durable: one bbolt
// database in DIR that the in-memory cloud's queues, the local DynamoDB
// tables and the event log write their changes to, and read back at start.
//
// The in-memory structures stay the source of truth while the process runs;
// this package is their journal. A component changes its memory under its
// own lock and appends the change (Append, cheap and ordered), then, after
// releasing the lock, waits until the change is durable (Wait) before it
// acknowledges anything. One committer goroutine writes whatever has been
// appended in a single bbolt transaction, whose commit is fsync'd (bbolt's
// default: NoSync off): concurrent writers share one fsync (group commit),
// a lone writer waits for exactly one, and changes are applied in the
// order they were appended, so the last write of a key wins on disk as in
// memory.
//
// A commit that fails (a full disk) fails every waiter from then on: the
// memory has moved ahead of the disk, and acknowledging more would promise
// what a restart cannot keep.
package localstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the database's name inside the state directory.
const FileName = "state.db"

// ErrInUse is returned by Open when another process holds the directory's
// database (bbolt locks the file): two linegate local processes cannot
// share one state directory.
var ErrInUse = errors.New("localstate: the state directory is in use by another process")

// ErrClosed is returned by Wait after Close.
var ErrClosed = errors.New("localstate: closed")

// ErrDamaged is returned by Open (and by Each) when the database file is
// not a whole bbolt database: empty (0 bytes), truncated, or overwritten.
// Its message names the file and what to do; nothing is started on it, and
// nothing in it is changed.
var ErrDamaged = errors.New("localstate: the state file is damaged")

// lockTimeout is how long Open waits for another process's lock.
const lockTimeout = time.Second

// Change is one key's new value in a bucket; a nil Value deletes the key.
// The Store owns Key and Value once they are appended: the caller must not
// modify them afterwards.
type Change struct {
	Bucket string
	Key    string
	Value  []byte
}

// Stats counts what the Store did: Changes appended and the Commits (each
// one fsync'd transaction) they took, and the Compactions of the file
// (CompactFailures: tried and left as it was).
type Stats struct {
	Changes, Commits             uint64
	Compactions, CompactFailures uint64
}

// Option configures a Store.
type Option func(*Store)

// WithCommitHook calls f in the committer with each batch of changes,
// before the batch's transaction: tests hold a commit there to check that
// nothing is acknowledged before it is durable, or read which changes
// shared a commit. f must not call the Store; the batch is read-only.
func WithCommitHook(f func(batch []Change)) Option { return func(s *Store) { s.beforeCommit = f } }

// Store is an open state directory. It is safe for concurrent use.
type Store struct {
	dbMu         sync.RWMutex // the committer swaps db when it compacts
	db           *bolt.DB
	path         string
	beforeCommit func(batch []Change)

	compactMinFree int64
	compactEvery   time.Duration
	lastCompact    time.Time // when the committer last looked

	mu       sync.Mutex
	pending  []Change
	appended uint64        // the ticket of the last Append
	durable  uint64        // every ticket up to this one is on disk
	err      error         // the first failed commit: sticky
	closed   bool          // no more commits after the final one
	done     chan struct{} // closed and replaced after every commit
	wake     chan struct{} // one token: pending changes are waiting
	stats    Stats
	stopped  chan struct{} // closed when the committer returns
}

// Open opens (creating it when needed) the state directory dir. An
// existing database is checked whole before it is used: every page of
// every bucket is read (bbolt panics on a damaged page, and a truncated
// file faults where its pages should be), and a file that is not a whole
// database fails with an error wrapping ErrDamaged that names it and says
// what to do. A 0-byte file is damaged too, never a fresh start: the
// database would start empty while the state it should hold is lost.
func Open(dir string, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localstate: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	if info, err := os.Stat(path); err == nil && info.Size() == 0 {
		return nil, damagedError(path + " is empty (0 bytes), not a state file: delete it to start with an empty state")
	}
	if err := precheckFile(path); err != nil {
		return nil, err
	}
	if err := removeLeftover(path); err != nil {
		return nil, err
	}
	db, err := openChecked(path)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, done: make(chan struct{}), wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		compactMinFree: DefaultCompactMinFree, compactEvery: DefaultCompactEvery, lastCompact: time.Now()}
	for _, o := range opts {
		o(s)
	}
	if worthCompacting(db, path, s.compactMinFree) {
		s.db, err = compactFile(db, path)
		switch {
		case s.db == nil:
			return nil, err
		case err != nil:
			s.stats.CompactFailures++ // the file as it was: it works, only larger
		default:
			s.stats.Compactions++
		}
	}
	go s.commitLoop()
	return s, nil
}

// openChecked opens the database at path and reads it whole (checkWhole),
// turning a damaged file into ErrDamaged. A panic of bbolt's on the way is
// recovered, and the file it had opened is closed (its lock released).
func openChecked(path string) (db *bolt.DB, err error) {
	var file *os.File
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	err = guard(path, func() error {
		var oerr error
		db, oerr = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, OpenFile: openFile})
		switch {
		case errors.Is(oerr, bolterrors.ErrTimeout):
			return fmt.Errorf("%w: %s", ErrInUse, path)
		case errors.Is(oerr, bolterrors.ErrInvalid), errors.Is(oerr, bolterrors.ErrChecksum), errors.Is(oerr, bolterrors.ErrVersionMismatch):
			return damaged(path, oerr)
		case oerr != nil:
			return fmt.Errorf("localstate: open %s: %w", path, oerr)
		}
		return checkWhole(db, path)
	})
	if err != nil {
		if db != nil {
			_ = db.Close()
		} else if file != nil {
			_ = file.Close() // bbolt panicked holding it
		}
		return nil, err
	}
	return db, nil
}

// checkWhole reads every key and value of every bucket, and checks that
// the file holds every page the database says it has.
func checkWhole(db *bolt.DB, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("localstate: %s: %w", path, err)
	}
	return db.View(func(tx *bolt.Tx) error {
		if info.Size() < tx.Size() {
			return damaged(path, fmt.Errorf("%d bytes of the %d its pages take: truncated", info.Size(), tx.Size()))
		}
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { return nil })
		})
	})
}

// guard runs f, turning a panic of bbolt's (an assertion on a damaged page)
// or a fault on its memory-mapped file (pages a truncated file lacks) into
// ErrDamaged.
func guard(path string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			err = damaged(path, fmt.Errorf("%v", v))
		}
	}()
	return f()
}

// damaged is ErrDamaged for path, on one line, with why and what to do.
func damaged(path string, why error) error {
	reason := strings.Join(strings.Fields(why.Error()), " ")
	return damagedError(fmt.Sprintf("%s is damaged (%s): move it aside to start with an empty state (mv %s %s.damaged), or put back a copy",
		path, reason, path, path))
}

// damagedError is an error matching ErrDamaged whose message is its own: the
// file, why and what to do, without the sentinel's words.
type damagedError string

func (e damagedError) Error() string { return string(e) }

// Is reports whether target is ErrDamaged.
func (e damagedError) Is(target error) bool { return target == ErrDamaged }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Append queues changes to be committed in order after every change
// appended before, and returns their ticket for Wait. It never blocks on
// the disk. Appending nothing returns the latest ticket.
func (s *Store) Append(changes ...Change) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(changes) == 0 {
		return s.appended
	}
	if s.closed {
		s.appended++ // never durable: Wait reports ErrClosed
		return s.appended
	}
	s.pending = append(s.pending, changes...)
	s.appended++
	s.stats.Changes += uint64(len(changes))
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.appended
}

// Wait returns once every change up to ticket is durable, or with the
// error of the commit that failed, ErrClosed after Close, or the context's
// error. A context that ends does not undo the change: it is committed all
// the same, the caller only stops waiting.
func (s *Store) Wait(ctx context.Context, ticket uint64) error {
	for {
		s.mu.Lock()
		durable, err, closed, done := s.durable, s.err, s.closed, s.done
		s.mu.Unlock()
		switch {
		case durable >= ticket:
			return nil
		case err != nil:
			return err
		case closed:
			return ErrClosed
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("localstate: waiting for change %d to be durable: %w", ticket, ctx.Err())
		}
	}
}

// Write appends changes and waits until they are durable.
func (s *Store) Write(ctx context.Context, changes ...Change) error {
	return s.Wait(ctx, s.Append(changes...))
}

// Sync waits until everything appended so far is durable.
func (s *Store) Sync(ctx context.Context) error { return s.Wait(ctx, s.Append()) }

// Stats reports the changes appended and the commits made so far.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Each calls fn with every key and value of bucket on disk, in key order
// (nothing when the bucket does not exist). The slices are valid only
// during the call. Call it at start, before appending to the bucket.
func (s *Store) Each(bucket string, fn func(key, value []byte) error) error {
	return guard(s.path, func() error { return s.each(bucket, fn) })
}

func (s *Store) each(bucket string, fn func(key, value []byte) error) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return s.failure()
	}
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := fn(k, v); err != nil {
				return fmt.Errorf("localstate: %s %q: %w", bucket, k, err)
			}
			return nil
		})
	})
}

// commitLoop commits whatever was appended, one transaction at a time,
// until Close.
func (s *Store) commitLoop() {
	defer close(s.stopped)
	for range s.wake {
		s.mu.Lock()
		batch, ticket := s.pending, s.appended
		s.pending = nil
		failed := s.err != nil
		s.mu.Unlock()
		if len(batch) == 0 || failed {
			continue
		}
		if s.beforeCommit != nil {
			s.beforeCommit(batch)
		}
		err := s.db.Update(func(tx *bolt.Tx) error { return apply(tx, batch) })
		s.mu.Lock()
		if err != nil {
			s.err = fmt.Errorf("localstate: commit to %s: %w", s.path, err)
		} else {
			s.durable = ticket
			s.stats.Commits++
		}
		close(s.done)
		s.done = make(chan struct{})
		s.mu.Unlock()
		if err == nil {
			s.maybeCompact()
		}
	}
}

// maybeCompact compacts the database, between two commits, when it is
// time to look and worth it. A compaction that fails leaves the database as
// it was, and is tried again at the next look; one that cannot make its
// result safe fails the Store as a failed commit does.
func (s *Store) maybeCompact() {
	if time.Since(s.lastCompact) < s.compactEvery {
		return
	}
	s.lastCompact = time.Now()
	if !worthCompacting(s.db, s.path, s.compactMinFree) {
		return
	}
	s.dbMu.Lock()
	db, err := compactFile(s.db, s.path)
	s.db = db // the old database when it failed; nil when it closed both
	s.dbMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case db == nil:
		s.err = err
		close(s.done)
		s.done = make(chan struct{})
	case err != nil:
		s.stats.CompactFailures++
	default:
		s.stats.Compactions++
	}
}

// fillPercent is how full bbolt fills a page before it splits it. Its
// default, 0.5, leaves the pages of keys written in increasing order (a
// webhookEventId is a ULID: event log entries, idempotency records) half
// empty for good; nearly full pages halve the file those take.
const fillPercent = 0.9

func apply(tx *bolt.Tx, batch []Change) error {
	buckets := map[string]*bolt.Bucket{}
	for _, c := range batch {
		b := buckets[c.Bucket]
		if b == nil {
			var err error
			if b, err = tx.CreateBucketIfNotExists([]byte(c.Bucket)); err != nil {
				return fmt.Errorf("bucket %s: %w", c.Bucket, err)
			}
			buckets[c.Bucket] = b
		}
		b.FillPercent = fillPercent
		var err error
		if c.Value == nil {
			err = b.Delete([]byte(c.Key))
		} else {
			err = b.Put([]byte(c.Key), c.Value)
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", c.Bucket, c.Key, err)
		}
	}
	return nil
}

// Close commits what is still pending, stops the committer and closes the
// database. Waits after Close fail with ErrClosed unless their change made
// it into the final commit.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	// The last commit: wake the committer once more, then stop it.
	select {
	case s.wake <- struct{}{}:
	default:
	}
	_ = s.Sync(context.Background())
	s.mu.Lock()
	s.closed = true
	close(s.wake)
	close(s.done)
	s.done = make(chan struct{})
	s.mu.Unlock()
	<-s.stopped
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil { // a compaction that could not be made safe closed it
		return s.err
	}
	return s.db.Close()
}

// Journal is what a component that keeps its state through a Store calls:
// Append under its own lock, Wait after releasing it, Each at start.
// *Store implements it; tests pass fakes.
type Journal interface {
	Append(changes ...Change) uint64
	Wait(ctx context.Context, ticket uint64) error
	Each(bucket string, fn func(key, value []byte) error) error
}

// withChangesKey carries WithChanges' changes in a context.
type withChangesKey struct{}

// WithChanges returns a context whose journaled write carries changes in
// the same transaction: a component that writes on behalf of a context
// (internal/awswire's tables, for a DynamoDB call made with it) appends
// ChangesOf(ctx) in the same Append as its own change, so both reach the
// disk in one commit or neither does. linegate local writes an event's
// final outcome in its event log this way, with the completion of the
// event's idempotency claim. Changes already in ctx are kept, these after
// them.
func WithChanges(ctx context.Context, changes ...Change) context.Context {
	if len(changes) == 0 {
		return ctx
	}
	prev := ChangesOf(ctx)
	all := make([]Change, 0, len(prev)+len(changes))
	return context.WithValue(ctx, withChangesKey{}, append(append(all, prev...), changes...))
}

// ChangesOf returns the changes WithChanges put in ctx (none: nil). The
// caller must not modify them.
func ChangesOf(ctx context.Context) []Change {
	c, _ := ctx.Value(withChangesKey{}).([]Change)
	return c
}

// EachJSON decodes every value of bucket into a T and hands it to add with
// its key: a component's restore at start.
func EachJSON[T any](j Journal, bucket string, add func(key string, v T)) error {
	return j.Each(bucket, func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return err
		}
		add(string(k), x)
		return nil
	})
}
