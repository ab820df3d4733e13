package awswire

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/localstate"
)

// Journal is where Tables keeps its tables once Persist is called
// (*localstate.Store): changes are appended in order under the tables' lock
// and waited for after it.
type Journal = localstate.Journal

// The journal's buckets: each table's definition by name, and each item by
// its table's name, a NUL and its key's canonical form.
const (
	bucketTables = "dynamodb.tables"
	bucketItems  = "dynamodb.items"
)

// savedTable is a table's definition as the journal keeps it.
type savedTable struct {
	Name    string
	Keys    []keyElem
	Attrs   []attrDef
	TTL     string `json:",omitempty"`
	Created time.Time
}

// Persist makes the tables durable in j: it restores the tables and items
// j holds, and from then on every call that changes a table or an item
// returns only once j has the change on disk. Call it right after
// NewTables, before anything else.
func (t *Tables) Persist(j Journal) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := localstate.EachJSON(j, bucketTables, func(_ string, s savedTable) {
		t.tables[s.Name] = &table{name: s.Name, keys: s.Keys, attrs: s.Attrs, ttl: s.TTL, created: s.Created, items: map[string]storedItem{}}
	})
	if err == nil {
		err = localstate.EachJSON(j, bucketItems, func(k string, it item) {
			name, id, _ := strings.Cut(k, "\x00")
			if tb := t.tables[name]; tb != nil { // else a table deleted by hand: nothing serves it
				_, _ = tb.set(id, it) // it was decoded: it encodes
			}
		})
	}
	if err != nil {
		return fmt.Errorf("awswire: restore tables: %w", err)
	}
	t.journal = j
	return nil
}

// saveTable appends tb's definition; t.mu is held.
func (t *Tables) saveTable(tb *table) uint64 {
	if t.journal == nil {
		return 0
	}
	b, err := json.Marshal(savedTable{Name: tb.name, Keys: tb.keys, Attrs: tb.attrs, TTL: tb.ttl, Created: tb.created})
	if err != nil {
		return 0
	}
	return t.journal.Append(localstate.Change{Bucket: bucketTables, Key: tb.name, Value: b})
}

// itemRef is one item of one table, and its new encoding (nil: gone).
type itemRef struct {
	table, id string
	doc       []byte
}

// saveItems appends the new state of each item; t.mu is held.
func (t *Tables) saveItems(refs []itemRef, more ...itemRef) uint64 {
	return t.saveItemsWith(nil, refs, more...)
}

// saveItemsWith is saveItems with other changes in the same append, so in
// the same commit (localstate.WithChanges: what rides with a request's
// write); t.mu is held.
func (t *Tables) saveItemsWith(with []localstate.Change, refs []itemRef, more ...itemRef) uint64 {
	if t.journal == nil {
		return 0
	}
	changes := make([]localstate.Change, 0, len(refs)+len(more)+len(with))
	for _, r := range append(refs, more...) {
		changes = append(changes, localstate.Change{Bucket: bucketItems, Key: r.table + "\x00" + r.id, Value: r.doc})
	}
	return t.journal.Append(append(changes, with...)...)
}

// durable waits, outside the lock, until the change of ticket is on disk.
func (t *Tables) durable(ctx context.Context, ticket uint64) error {
	if ticket == 0 || t.journal == nil {
		return nil
	}
	if err := t.journal.Wait(ctx, ticket); err != nil {
		return &ddbError{shape: "InternalServerError", msg: "the change was not saved: " + err.Error()}
	}
	return nil
}

// sweep deletes, at most once per sweepEvery, the items of every table with
// a TTL attribute whose expiry has passed, and returns them; t.mu is held.
func (t *Tables) sweep() []itemRef {
	now := t.now()
	if now.Sub(t.lastSweep) < sweepEvery {
		return nil
	}
	t.lastSweep = now
	var gone []itemRef
	for _, tb := range t.tables {
		if tb.ttl == "" {
			continue
		}
		for id, s := range tb.items {
			if s.exp < now.Unix() {
				delete(tb.items, id)
				gone = append(gone, itemRef{table: tb.name, id: id})
			}
		}
	}
	return gone
}

// epochOf reads a TTL attribute: a number of epoch seconds. DynamoDB
// ignores a TTL attribute of another type.
func epochOf(v av) (int64, bool) {
	raw, ok := v["N"]
	if !ok {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return int64(f), true
}
