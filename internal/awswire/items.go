package awswire

import (
	"context"
	"encoding/json"
	"math"
)

// storedItem is an item at rest in a table: its wire JSON in one
// allocation, decoded into an item only while a call works on it. An item
// held as an item (a map of maps of raw values) takes about seven times
// the memory — 1.7 KB for an idempotency record of three attributes
// against some 250 bytes — and `linegate local` keeps one record per event
// for 48 hours, so that is what its memory grows with over a long run. The
// same bytes are what the journal of --state keeps.
type storedItem struct {
	doc []byte // json.Marshal of the item (attribute names sorted); never modified
	exp int64  // the epoch seconds of the table's TTL attribute, noExpiry when none
}

// noExpiry is the exp of an item the TTL sweep never deletes: the table has
// no TTL attribute, or the item no number in it.
const noExpiry = math.MaxInt64

// get decodes the item stored under id (nil when there is none); the
// caller owns the item it returns.
func (tb *table) get(id string) (item, error) {
	s, ok := tb.items[id]
	if !ok {
		return nil, nil
	}
	var it item
	if err := json.Unmarshal(s.doc, &it); err != nil {
		return nil, &ddbError{shape: "InternalServerError", msg: "a stored item does not decode: " + err.Error()}
	}
	return it, nil
}

// set stores it under id and returns its encoding, which the journal may
// keep as it is.
func (tb *table) set(id string, it item) ([]byte, error) {
	doc, err := json.Marshal(it)
	if err != nil {
		return nil, validation("the item does not encode: %v", err)
	}
	tb.items[id] = storedItem{doc: doc, exp: expiryOf(it, tb.ttl)}
	return doc, nil
}

// setTTL makes attr the table's TTL attribute ("": none), reading every
// item's expiry again when it changes.
func (tb *table) setTTL(attr string) {
	if attr == tb.ttl {
		return
	}
	tb.ttl = attr
	for id, s := range tb.items {
		it, err := tb.get(id)
		if err == nil {
			s.exp = expiryOf(it, attr)
			tb.items[id] = s
		}
	}
}

// expiryOf is the exp of it in a table whose TTL attribute is attr.
func expiryOf(it item, attr string) int64 {
	if attr == "" {
		return noExpiry
	}
	if exp, ok := epochOf(it[attr]); ok {
		return exp
	}
	return noExpiry
}

// DeleteWhere deletes every item of the named table whose attribute attr
// holds the string value, and returns how many it deleted; with Persist the
// deletions are on disk before it returns. It is not a call of DynamoDB's
// API but the local operator's: `linegate local`, starting on a state
// directory, releases the idempotency claims its previous process left in
// progress (no worker of that process can still be running), so their
// events run at their next receive instead of waiting out the claims.
func (t *Tables) DeleteWhere(ctx context.Context, table, attr, value string) (int, error) {
	t.mu.Lock()
	tb := t.tables[table]
	if tb == nil {
		t.mu.Unlock()
		return 0, notFound(table)
	}
	var gone []itemRef
	for id := range tb.items {
		it, err := tb.get(id)
		if err != nil {
			t.mu.Unlock()
			return 0, err
		}
		if v := it[attr]; v.typ() == "S" && v.str() == value {
			delete(tb.items, id)
			gone = append(gone, itemRef{table: table, id: id})
		}
	}
	var ticket uint64
	if len(gone) > 0 {
		ticket = t.saveItems(gone)
	}
	t.mu.Unlock()
	return len(gone), t.durable(ctx, ticket)
}
