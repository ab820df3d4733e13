package awswire_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/internal/testclock"
)

// persistedStore opens the state directory dir and returns the idempotency
// store linegate local's worker uses: pkg/idempotency's DynamoDB store,
// through the real SDK client, in process, on persisted tables.
func persistedStore(t *testing.T, dir string, clk *testclock.Clock) (*idempotency.DynamoDB, func() int, func()) {
	t.Helper()
	tables, closeFn := persistedTables(t, dir, clk)
	s, items := inProcessStore(t, tables, clk)
	return s, items, closeFn
}

// persistedTables opens the state directory dir and returns its tables,
// with the table "idem" as linegate local provisions the idempotency
// table, and the closing of the directory (also a cleanup).
func persistedTables(t *testing.T, dir string, clk *testclock.Clock) (*awswire.Tables, func()) {
	t.Helper()
	st, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tables := awswire.NewTables("us-east-1", "123456789012", awswire.WithTablesClock(clk.Now))
	if err := tables.Persist(st); err != nil {
		t.Fatal(err)
	}
	if err := tables.CreateTable("idem", "id", "S"); err != nil {
		t.Fatal(err)
	}
	if err := tables.EnableTTL("idem", idempotency.AttrExpiresAt); err != nil {
		t.Fatal(err)
	}
	closed := false
	closeFn := func() {
		if !closed {
			closed = true
			_ = st.Close()
		}
	}
	t.Cleanup(closeFn)
	return tables, closeFn
}

// inProcessStore is pkg/idempotency's DynamoDB store on the table "idem" of
// tables, through the real SDK client in process, as linegate local's
// worker has it, and a count of the table's items.
func inProcessStore(t testing.TB, tables *awswire.Tables, clk *testclock.Clock) (*idempotency.DynamoDB, func() int) {
	t.Helper()
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://linegate.local"),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:  awswire.InProcess(awswire.New(awswire.WithDynamoDB(tables)))})
	items := func() int {
		out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("idem")})
		if err != nil {
			t.Fatal(err)
		}
		return int(aws.ToInt64(out.Table.ItemCount))
	}
	return idempotency.NewDynamoDB(db, "idem", idempotency.WithDynamoClock(clk.Now)), items
}

// The idempotency table survives a restart: a completed event is still a
// duplicate, a claim still in progress still blocks until it expires, a
// session keeps its version, and a step its result. Expired items are
// swept as DynamoDB's TTL deletes them, from disk too.
func TestTablesPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(time.Now())
	ctx := context.Background()
	s, _, closeAll := persistedStore(t, dir, clk)
	for _, step := range []error{
		s.Claim(ctx, "done", time.Minute),
		s.Complete(ctx, "done", 48*time.Hour),
		s.Claim(ctx, "running", 30*time.Second),
		s.Claim(ctx, "short", time.Second),
		s.CompleteValue(ctx, "short", []byte("x"), time.Minute),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if _, err := s.Put(ctx, "session", []byte(`{"step":"size"}`), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	closeAll()

	s, items, closeAll := persistedStore(t, dir, clk)
	if err := s.Claim(ctx, "done", time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Errorf("claim of an event completed before the restart: %v, want ErrCompleted", err)
	}
	if err := s.Claim(ctx, "running", time.Minute); !errors.Is(err, idempotency.ErrInProgress) {
		t.Errorf("claim of an event in progress before the restart: %v, want ErrInProgress", err)
	}
	if v, err := s.Get(ctx, "session"); err != nil || v.Version != 1 || string(v.Value) != `{"step":"size"}` {
		t.Errorf("session after the restart: %+v, %v", v, err)
	}
	if v, err := s.ClaimValue(ctx, "short", time.Second); !errors.Is(err, idempotency.ErrCompleted) || string(v) != "x" {
		t.Errorf("step result after the restart: %q, %v", v, err)
	}
	if n := items(); n != 4 {
		t.Fatalf("%d items after the restart, want 4", n)
	}

	// Two minutes on, "short" (kept a minute) and "running" (claimed for
	// 30 s) have expired: the next write sweeps them, and a restart does
	// not bring them back.
	clk.Advance(2 * time.Minute)
	if err := s.Claim(ctx, "new", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := items(); n != 3 {
		t.Errorf("%d items after the sweep, want 3 (done, session, new)", n)
	}
	closeAll()
	_, items, _ = persistedStore(t, dir, clk)
	if n := items(); n != 3 {
		t.Errorf("%d items after a second restart, want the 3 the sweep left", n)
	}
}

// DeleteWhere releases the claims in progress and nothing else — not a
// completed marker, a step result or a session — and its deletions are on
// disk: a restart does not bring the claims back. An unknown table is
// ResourceNotFound.
func TestDeleteWhereReleasesClaimsDurably(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(time.Now())
	ctx := context.Background()
	tables, closeDir := persistedTables(t, dir, clk)
	s, _ := inProcessStore(t, tables, clk)
	for _, step := range []error{
		s.Claim(ctx, "running-1", 30*time.Second),
		s.Claim(ctx, "running-2", time.Hour),
		s.Claim(ctx, "done", time.Minute),
		s.Complete(ctx, "done", 48*time.Hour),
		s.Claim(ctx, "step", time.Minute),
		s.CompleteValue(ctx, "step", []byte("in-progress"), time.Hour), // the status's value elsewhere: kept
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if _, err := s.Put(ctx, "session", []byte(`"in-progress"`), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	n, err := tables.DeleteWhere(ctx, "idem", idempotency.AttrStatus, idempotency.StatusInProgress)
	if err != nil || n != 2 {
		t.Fatalf("DeleteWhere: %d, %v; want the 2 claims", n, err)
	}
	if _, err := tables.DeleteWhere(ctx, "nope", idempotency.AttrStatus, idempotency.StatusInProgress); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("DeleteWhere on an unknown table: %v, want ResourceNotFoundException", err)
	}
	closeDir()

	s, items, _ := persistedStore(t, dir, clk)
	if n := items(); n != 3 {
		t.Fatalf("%d items after the restart, want 3 (done, step, session)", n)
	}
	for _, key := range []string{"running-1", "running-2"} {
		if err := s.Claim(ctx, key, time.Minute); err != nil {
			t.Errorf("claim of %s after its release and a restart: %v, want it free", key, err)
		}
	}
	if err := s.Claim(ctx, "done", time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
		t.Errorf("claim of the completed key: %v, want ErrCompleted", err)
	}
	if v, err := s.ClaimValue(ctx, "step", time.Minute); !errors.Is(err, idempotency.ErrCompleted) || string(v) != "in-progress" {
		t.Errorf("step result: %q, %v", v, err)
	}
	if v, err := s.Get(ctx, "session"); err != nil || v.Version != 1 {
		t.Errorf("session: %+v, %v", v, err)
	}
}

// recordingJournal is a Journal that keeps every Append, as one slice per
// call (what one call appends reaches the disk in one commit).
type recordingJournal struct {
	appends [][]localstate.Change
}

func (j *recordingJournal) Append(changes ...localstate.Change) uint64 {
	j.appends = append(j.appends, append([]localstate.Change(nil), changes...))
	return uint64(len(j.appends))
}
func (j *recordingJournal) Wait(context.Context, uint64) error { return nil }
func (j *recordingJournal) Each(string, func(key, value []byte) error) error {
	return nil
}

// The changes a request's context carries (localstate.WithChanges) ride
// in the same Append as the item the request changes, so in one commit;
// a write whose condition fails changes nothing, and appends none of them.
func TestChangesRideWithTheWrite(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	j := &recordingJournal{}
	tables := awswire.NewTables("us-east-1", "123456789012", awswire.WithTablesClock(clk.Now))
	if err := tables.Persist(j); err != nil {
		t.Fatal(err)
	}
	if err := tables.CreateTable("idem", "id", "S"); err != nil {
		t.Fatal(err)
	}
	s, _ := inProcessStore(t, tables, clk)
	ctx := context.Background()
	if err := s.Claim(ctx, "ev1", time.Minute); err != nil {
		t.Fatal(err)
	}
	rider := localstate.Change{Bucket: "local.outcomes", Key: "ev1", Value: []byte("ok")}
	with := localstate.WithChanges(ctx, rider)
	before := len(j.appends)
	if err := s.Complete(with, "ev1", time.Hour); err != nil {
		t.Fatal(err)
	}
	last := j.appends[len(j.appends)-1]
	if len(j.appends) != before+1 || len(last) != 2 || last[0].Bucket != "dynamodb.items" || !strings.Contains(string(last[0].Value), `"completed"`) ||
		last[1].Bucket != rider.Bucket || last[1].Key != rider.Key || string(last[1].Value) != "ok" {
		t.Fatalf("the completion appended %+v, want the item and the rider in one append", j.appends[before:])
	}
	before = len(j.appends)
	if err := s.Complete(with, "ev1", time.Hour); !errors.Is(err, idempotency.ErrNotClaimed) {
		t.Fatalf("a second completion: %v, want ErrNotClaimed", err)
	}
	for _, a := range j.appends[before:] {
		for _, c := range a {
			if c.Bucket == rider.Bucket {
				t.Fatalf("a write whose condition failed appended its rider: %+v", a)
			}
		}
	}
}
