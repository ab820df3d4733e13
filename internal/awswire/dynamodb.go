package awswire

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/localstate"
)

// Tables is an in-memory DynamoDB: tables with a partition key (and
// optionally a sort key), and the item calls of DynamoDB's API with
// condition and update expressions (see expr.go). TTL deletes expired items
// as DynamoDB does, lazily: a sweep during writes, at most once a minute,
// removes items whose TTL attribute (epoch seconds) has passed, so a reader
// must still check the expiry itself, as pkg/idempotency does. With Persist
// the tables and their items are kept in a state directory (state.go).
type Tables struct {
	mu        sync.Mutex
	region    string
	account   string
	tables    map[string]*table
	now       func() time.Time
	lastSweep time.Time
	journal   Journal // set by Persist
}

type table struct {
	name    string
	keys    []keyElem // HASH first, then RANGE
	attrs   []attrDef
	ttl     string
	created time.Time
	items   map[string]storedItem // by the key's canonical JSON
}

// sweepEvery bounds how often expired items are looked for.
const sweepEvery = time.Minute

type keyElem struct {
	AttributeName string
	KeyType       string
}

type attrDef struct {
	AttributeName string
	AttributeType string
}

// NewTables returns an empty DynamoDB whose table ARNs name region and
// account.
func NewTables(region, account string, opts ...TablesOption) *Tables {
	t := &Tables{region: region, account: account, tables: map[string]*table{}, now: time.Now}
	for _, o := range opts {
		o(t)
	}
	return t
}

// TablesOption configures Tables.
type TablesOption func(*Tables)

// WithTablesClock sets the clock of creation times and TTL expiry (default
// time.Now); tests pass a fake clock to expire items without sleeping.
func WithTablesClock(now func() time.Time) TablesOption {
	return func(t *Tables) { t.now = now }
}

// ddbError is a DynamoDB error document: its shape, message, and for a
// failed condition the item that failed it.
type ddbError struct {
	shape, msg string
	item       item
}

func (e *ddbError) Error() string { return e.shape + ": " + e.msg }

func validation(format string, args ...any) error {
	return &ddbError{shape: "ValidationException", msg: fmt.Sprintf(format, args...)}
}

func notFound(name string) error {
	return &ddbError{shape: "ResourceNotFoundException", msg: "Requested resource not found: Table: " + name + " not found"}
}

func (s *Server) addDynamoDB() {
	t := s.ddb
	ops := map[string]func(context.Context, []byte) (any, error){
		"CreateTable":      t.createTable,
		"DescribeTable":    t.describeTable,
		"UpdateTimeToLive": t.updateTimeToLive,
		"PutItem":          t.putItem,
		"GetItem":          t.getItem,
		"UpdateItem":       t.updateItem,
		"DeleteItem":       t.deleteItem,
	}
	for name, call := range ops {
		s.json["DynamoDB_20120810."+name] = jsonOp{service: "DynamoDB", namespace: "com.amazonaws.dynamodb.v20120810", version: "1.0", call: call}
	}
}

// CreateTable creates a table with the given key (the first element the
// partition key), as the provisioning of `linegate local` does for each
// table of the template. An existing table is kept (ResourceInUse is not an
// error here: provisioning is idempotent).
func (t *Tables) CreateTable(name string, hashKey, hashType string) error {
	t.mu.Lock()
	if t.tables[name] != nil {
		t.mu.Unlock()
		return nil
	}
	tb := &table{name: name, keys: []keyElem{{hashKey, "HASH"}}, attrs: []attrDef{{hashKey, hashType}}, created: t.now(), items: map[string]storedItem{}}
	t.tables[name] = tb
	ticket := t.saveTable(tb)
	t.mu.Unlock()
	return t.durable(context.Background(), ticket)
}

// EnableTTL makes attr the table's TTL attribute, as UpdateTimeToLive does
// (the provisioning of `linegate local` sets the template's).
func (t *Tables) EnableTTL(name, attr string) error {
	t.mu.Lock()
	tb := t.tables[name]
	if tb == nil {
		t.mu.Unlock()
		return notFound(name)
	}
	tb.setTTL(attr)
	ticket := t.saveTable(tb)
	t.mu.Unlock()
	return t.durable(context.Background(), ticket)
}

func (t *Tables) createTable(ctx context.Context, body []byte) (any, error) {
	var in struct {
		TableName            string
		KeySchema            []keyElem
		AttributeDefinitions []attrDef
	}
	if err := decodeInto(body, &in); err != nil {
		return nil, err
	}
	if in.TableName == "" || len(in.KeySchema) == 0 || len(in.KeySchema) > 2 || in.KeySchema[0].KeyType != "HASH" {
		return nil, validation("a table needs a name and a key schema of a HASH key and at most one RANGE key")
	}
	t.mu.Lock()
	if t.tables[in.TableName] != nil {
		t.mu.Unlock()
		return nil, &ddbError{shape: "ResourceInUseException", msg: "Table already exists: " + in.TableName}
	}
	tb := &table{name: in.TableName, keys: in.KeySchema, attrs: in.AttributeDefinitions, created: t.now(), items: map[string]storedItem{}}
	t.tables[in.TableName] = tb
	out := map[string]any{"TableDescription": t.describe(tb)}
	ticket := t.saveTable(tb)
	t.mu.Unlock()
	return out, t.durable(ctx, ticket)
}

func (t *Tables) describe(tb *table) map[string]any {
	return map[string]any{
		"TableName": tb.name, "TableStatus": "ACTIVE", "KeySchema": tb.keys, "AttributeDefinitions": tb.attrs,
		"TableArn":           fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", t.region, t.account, tb.name),
		"ItemCount":          len(tb.items),
		"CreationDateTime":   float64(tb.created.UnixMilli()) / 1000,
		"BillingModeSummary": map[string]string{"BillingMode": "PAY_PER_REQUEST"},
	}
}

func (t *Tables) describeTable(_ context.Context, body []byte) (any, error) {
	var in struct{ TableName string }
	if err := decodeInto(body, &in); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tb := t.tables[in.TableName]
	if tb == nil {
		return nil, notFound(in.TableName)
	}
	return map[string]any{"Table": t.describe(tb)}, nil
}

func (t *Tables) updateTimeToLive(ctx context.Context, body []byte) (any, error) {
	var in struct {
		TableName               string
		TimeToLiveSpecification struct {
			AttributeName string
			Enabled       bool
		}
	}
	if err := decodeInto(body, &in); err != nil {
		return nil, err
	}
	t.mu.Lock()
	tb := t.tables[in.TableName]
	if tb == nil {
		t.mu.Unlock()
		return nil, notFound(in.TableName)
	}
	attr := ""
	if in.TimeToLiveSpecification.Enabled {
		attr = in.TimeToLiveSpecification.AttributeName
	}
	tb.setTTL(attr)
	ticket := t.saveTable(tb)
	t.mu.Unlock()
	return map[string]any{"TimeToLiveSpecification": in.TimeToLiveSpecification}, t.durable(ctx, ticket)
}

// itemRequest is the members the item calls share.
type itemRequest struct {
	TableName                           string
	Key                                 item
	Item                                item
	ConditionExpression                 *string
	UpdateExpression                    *string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]av
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
}

// keyOf checks that k holds exactly the table's key attributes with their
// declared types, and returns its canonical form.
func (tb *table) keyOf(k item, exact bool) (string, item, error) {
	key := item{}
	for _, e := range tb.keys {
		v := k[e.AttributeName]
		if v == nil {
			return "", nil, validation("The provided key element does not match the schema")
		}
		for _, d := range tb.attrs {
			if d.AttributeName == e.AttributeName && d.AttributeType != v.typ() {
				return "", nil, validation("One or more parameter values were invalid: Type mismatch for key %s expected: %s actual: %s", e.AttributeName, d.AttributeType, v.typ())
			}
		}
		key[e.AttributeName] = v
	}
	if exact && len(k) != len(tb.keys) {
		return "", nil, validation("The provided key element does not match the schema")
	}
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		v, _ := json.Marshal(key[n])
		b = append(b, canonical(v)...)
	}
	return string(b), key, nil
}

// onItem runs fn on the item named by in (its Key, or the key attributes of
// its Item) under the table lock, after checking the condition. fn returns
// the new item (nil deletes it).
func (t *Tables) onItem(ctx context.Context, body []byte, useItem, exactKey bool, fn func(in *itemRequest, old item) (item, error)) (any, error) {
	var in itemRequest
	tb, unlock, err := t.lockTable(body, &in)
	if err != nil {
		return nil, err
	}
	var ticket uint64
	out, err := t.changeItem(tb, &in, useItem, exactKey, fn, localstate.ChangesOf(ctx), &ticket)
	unlock()
	if derr := t.durable(ctx, ticket); derr != nil && err == nil {
		return nil, derr
	}
	return out, err
}

// changeItem is onItem's work under the lock; ticket gets the journal
// ticket of what it changed. The changes with ride along with the item's
// change in one append (one commit), and only when the item changes (a
// failed condition writes neither).
func (t *Tables) changeItem(tb *table, in *itemRequest, useItem, exactKey bool, fn func(in *itemRequest, old item) (item, error), with []localstate.Change, ticket *uint64) (any, error) {
	swept := t.sweep()
	if len(swept) > 0 {
		*ticket = t.saveItems(swept) // dropped from memory: so from disk
	}
	src := in.Key
	if useItem {
		src = in.Item
	}
	id, _, err := tb.keyOf(src, exactKey)
	if err != nil {
		return nil, err
	}
	old, err := tb.get(id)
	if err != nil {
		return nil, err
	}
	env := &exprEnv{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, used: map[string]bool{}}
	if in.ConditionExpression != nil {
		ok, err := evalCondition(*in.ConditionExpression, env, orEmpty(old))
		if err != nil {
			return nil, validation("%v", err)
		}
		if !ok {
			// Usage is checked across every expression before any verdict.
			if in.UpdateExpression != nil {
				_ = applyUpdate(*in.UpdateExpression, env, copyItem(old))
			}
			if err := env.unused(); err != nil {
				return nil, validation("%v", err)
			}
			e := &ddbError{shape: "ConditionalCheckFailedException", msg: "The conditional request failed"}
			if in.ReturnValuesOnConditionCheckFailure == "ALL_OLD" {
				e.item = old
			}
			return nil, e
		}
	}
	next, err := fn(in, old)
	if err == nil && in.UpdateExpression != nil {
		err = applyUpdate(*in.UpdateExpression, env, next)
	}
	if err != nil {
		return nil, validation("%v", err)
	}
	if err := env.unused(); err != nil {
		return nil, validation("%v", err)
	}
	ref := itemRef{table: tb.name, id: id}
	if next == nil {
		delete(tb.items, id)
	} else if ref.doc, err = tb.set(id, next); err != nil {
		return nil, err
	}
	*ticket = max(*ticket, t.saveItemsWith(with, nil, ref))
	out := map[string]any{}
	switch in.ReturnValues {
	case "ALL_OLD":
		if old != nil {
			out["Attributes"] = old
		}
	case "ALL_NEW":
		if next != nil {
			out["Attributes"] = next
		}
	}
	return out, nil
}

// lockTable decodes an item request and locks the tables; it returns the
// table the request names (ResourceNotFound when there is none) and the
// unlock to defer.
func (t *Tables) lockTable(body []byte, in *itemRequest) (*table, func(), error) {
	if err := decodeInto(body, in); err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	tb := t.tables[in.TableName]
	if tb == nil {
		t.mu.Unlock()
		return nil, nil, notFound(in.TableName)
	}
	return tb, t.mu.Unlock, nil
}

func orEmpty(it item) item {
	if it == nil {
		return item{}
	}
	return it
}

func copyItem(it item) item {
	out := item{}
	for k, v := range it {
		out[k] = v
	}
	return out
}

func (t *Tables) putItem(ctx context.Context, body []byte) (any, error) {
	return t.onItem(ctx, body, true, false, func(in *itemRequest, _ item) (item, error) {
		if in.UpdateExpression != nil {
			return nil, fmt.Errorf("PutItem takes no UpdateExpression")
		}
		return copyItem(in.Item), nil
	})
}

func (t *Tables) updateItem(ctx context.Context, body []byte) (any, error) {
	return t.onItem(ctx, body, false, true, func(in *itemRequest, old item) (item, error) {
		next := copyItem(old)
		for k, v := range in.Key {
			next[k] = v
		}
		return next, nil
	})
}

func (t *Tables) deleteItem(ctx context.Context, body []byte) (any, error) {
	return t.onItem(ctx, body, false, true, func(*itemRequest, item) (item, error) { return nil, nil })
}

func (t *Tables) getItem(_ context.Context, body []byte) (any, error) {
	var in itemRequest
	tb, unlock, err := t.lockTable(body, &in)
	if err != nil {
		return nil, err
	}
	defer unlock()
	id, _, err := tb.keyOf(in.Key, true)
	if err != nil {
		return nil, err
	}
	it, err := tb.get(id)
	if err != nil || it == nil {
		return map[string]any{}, err
	}
	return map[string]any{"Item": it}, nil
}

// writeDDBError writes e as DynamoDB's error document.
func writeDDBError(w http.ResponseWriter, e *ddbError) {
	doc := map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#" + e.shape, "message": e.msg}
	if e.item != nil {
		doc["Item"] = e.item
	}
	w.WriteHeader(http.StatusBadRequest)
	b, _ := json.Marshal(doc)
	_, _ = w.Write(b)
}
