package awswire_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmem"
)

// maxBytesPerRecord bounds the heap an event's completed idempotency record
// takes in Tables. `linegate local` keeps one per event for 48 hours, so
// this is what its memory grows with over a long run
// (cmd/linegate's TestLongRunRSSStaysFlat). A record held as maps of raw
// JSON values took about 1,700 bytes; kept as its wire JSON, about 250.
const maxBytesPerRecord = 600

// The tables keep an idempotency record in a few hundred bytes of heap:
// 5,000 events claimed and completed through pkg/idempotency's store (the
// in-process worker's path) grow the live heap by less than
// maxBytesPerRecord each.
func TestTablesKeepRecordsCompactly(t *testing.T) {
	const events = 5_000
	tables, record, items := recorder(t)
	record(-1) // the first call's one-time allocations (the SDK's, the table's)
	before := testmem.LiveHeap()
	for i := range events {
		record(i)
	}
	after := testmem.LiveHeap()
	if n := items(); n != events+1 {
		t.Fatalf("%d items, want %d", n, events+1)
	}
	per := float64(after-before) / events
	t.Logf("%.0f bytes of live heap per completed record (%d records)", per, events)
	if per > maxBytesPerRecord {
		t.Errorf("a completed record takes %.0f bytes of heap, want at most %d", per, maxBytesPerRecord)
	}
	runtime.KeepAlive(tables)
}

// BenchmarkRecord is an event's idempotency record as the in-process
// worker writes it: a claim and its completion, through the SDK, on a
// table that already holds 10,000 records.
func BenchmarkRecord(b *testing.B) {
	_, record, _ := recorder(b)
	for i := range 10_000 {
		record(-1 - i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		record(i)
	}
}

// recorder returns in-memory tables with the idempotency table "idem", a
// function that records event i as the in-process worker does (a claim
// and its completion, through pkg/idempotency's store and the SDK), and a
// count of the table's items.
func recorder(tb testing.TB) (*awswire.Tables, func(i int), func() int) {
	tb.Helper()
	clk := testclock.New(time.Now())
	tables := awswire.NewTables("us-east-1", "123456789012", awswire.WithTablesClock(clk.Now))
	if err := tables.CreateTable("idem", idempotency.AttrID, "S"); err != nil {
		tb.Fatal(err)
	}
	if err := tables.EnableTTL("idem", idempotency.AttrExpiresAt); err != nil {
		tb.Fatal(err)
	}
	s, items := inProcessStore(tb, tables, clk)
	ctx := context.Background()
	record := func(i int) {
		key := fmt.Sprintf("01J%023d", i) // a webhookEventId's length (a ULID)
		if err := s.Claim(ctx, key, 30*time.Second); err != nil {
			tb.Fatal(err)
		}
		if err := s.Complete(ctx, key, 48*time.Hour); err != nil {
			tb.Fatal(err)
		}
	}
	return tables, record, items
}
