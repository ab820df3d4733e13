package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the DynamoDB table. The table's partition key is
// AttrID (S); AttrExpiresAt (N, epoch seconds) is the table's TTL attribute.
// AttrStatus (S) is StatusInProgress or StatusCompleted on a claim's item.
// AttrValue (B) holds a step result or a session's state, AttrVersion (N) a
// versioned value's version.
const (
	AttrID        = "id"
	AttrStatus    = "status"
	AttrExpiresAt = "expiresAt"
	AttrValue     = "value"
	AttrVersion   = "version"
)

// dynamoAPI is the part of *dynamodb.Client the store calls.
type dynamoAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// claimAttempts bounds Claim's retries when the blocking item vanishes
// between the failed conditional put and the read of why it failed.
const claimAttempts = 3

// DynamoDB is the production Store: one item per key, every state change a
// conditional write, so concurrent workers on any number of Lambda instances
// never both claim a key.
//
// Expiry has epoch-second precision: expiresAt is rounded up, and an item
// counts as expired once expiresAt < now (in whole seconds), so an entry
// expires up to two seconds late and never early. The condition also checks
// expiresAt itself because DynamoDB's TTL deletion is lazy (up to days late).
type DynamoDB struct {
	api   dynamoAPI
	table string
	now   func() time.Time
}

// DynamoDBOption configures a DynamoDB store.
type DynamoDBOption func(*DynamoDB)

// WithDynamoClock sets the clock expiry is computed from (default
// time.Now); tests pass a fake clock to expire items without sleeping.
func WithDynamoClock(now func() time.Time) DynamoDBOption {
	return func(d *DynamoDB) {
		if now != nil {
			d.now = now
		}
	}
}

// NewDynamoDB returns a store over table, called through api (a
// *dynamodb.Client in production). The table must have the partition key
// "id" (S) and should have TTL enabled on "expiresAt".
func NewDynamoDB(api dynamoAPI, table string, opts ...DynamoDBOption) *DynamoDB {
	d := &DynamoDB{api: api, table: table, now: time.Now}
	for _, o := range opts {
		o(d)
	}
	return d
}

var (
	_ Store          = (*DynamoDB)(nil)
	_ ValueStore     = (*DynamoDB)(nil)
	_ VersionedStore = (*DynamoDB)(nil)
)

// Claim implements Store with a PutItem conditioned on the key being absent
// or expired. On a failed condition the old item (returned with the error,
// or read back when the endpoint does not return it) tells ErrCompleted from
// ErrInProgress.
func (d *DynamoDB) Claim(ctx context.Context, key string, inProgressFor time.Duration) error {
	_, err := d.ClaimValue(ctx, key, inProgressFor)
	return err
}

// ClaimValue implements ValueStore: Claim, with the completed marker's value
// taken from the same old item that tells ErrCompleted.
func (d *DynamoDB) ClaimValue(ctx context.Context, key string, inProgressFor time.Duration) ([]byte, error) {
	key = StorageKey(key)
	for range claimAttempts {
		now := d.now()
		_, err := d.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(d.table),
			Item: map[string]types.AttributeValue{
				AttrID:        &types.AttributeValueMemberS{Value: key},
				AttrStatus:    &types.AttributeValueMemberS{Value: StatusInProgress},
				AttrExpiresAt: epochSeconds(ceilSecond(now.Add(inProgressFor))),
			},
			ConditionExpression:      aws.String("attribute_not_exists(#id) OR #exp < :now"),
			ExpressionAttributeNames: map[string]string{"#id": AttrID, "#exp": AttrExpiresAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":now": epochSeconds(now.Unix()),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return nil, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, fmt.Errorf("idempotency: claim %q: put item: %w", key, err)
		}
		old := ccf.Item
		if old == nil {
			got, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(d.table),
				Key:            d.key(key),
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return nil, fmt.Errorf("idempotency: claim %q: read blocking item: %w", key, err)
			}
			old = got.Item
		}
		if old == nil {
			continue // released or deleted in between: try again
		}
		if s, ok := old[AttrStatus].(*types.AttributeValueMemberS); ok && s.Value == StatusCompleted {
			var value []byte
			if b, ok := old[AttrValue].(*types.AttributeValueMemberB); ok {
				value = b.Value
			}
			return value, ErrCompleted
		}
		return nil, ErrInProgress
	}
	return nil, ErrInProgress
}

// Complete implements Store with an UpdateItem conditioned on an in-progress
// claim existing.
func (d *DynamoDB) Complete(ctx context.Context, key string, keepFor time.Duration) error {
	return d.CompleteValue(ctx, key, nil, keepFor)
}

// CompleteValue implements ValueStore: Complete, setting the value in the
// same conditional update.
func (d *DynamoDB) CompleteValue(ctx context.Context, key string, value []byte, keepFor time.Duration) error {
	key = StorageKey(key)
	if len(value) > MaxValueBytes {
		return fmt.Errorf("idempotency: complete %q: %d bytes: %w", key, len(value), ErrTooLarge)
	}
	update := "SET #st = :done, #exp = :exp"
	names := map[string]string{"#id": AttrID, "#st": AttrStatus, "#exp": AttrExpiresAt}
	values := map[string]types.AttributeValue{
		":done":       &types.AttributeValueMemberS{Value: StatusCompleted},
		":inprogress": &types.AttributeValueMemberS{Value: StatusInProgress},
		":exp":        epochSeconds(ceilSecond(d.now().Add(keepFor))),
	}
	if value != nil {
		update += ", #val = :val"
		names["#val"] = AttrValue
		values[":val"] = &types.AttributeValueMemberB{Value: value}
	}
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       d.key(key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(#id) AND #st = :inprogress"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return fmt.Errorf("idempotency: complete %q: %w", key, ErrNotClaimed)
		}
		return fmt.Errorf("idempotency: complete %q: update item: %w", key, err)
	}
	return nil
}

// Release implements Store with a DeleteItem conditioned on the item being
// in progress, so a completed marker is never deleted.
func (d *DynamoDB) Release(ctx context.Context, key string) error {
	key = StorageKey(key)
	_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       d.key(key),
		ConditionExpression:       aws.String("#st = :inprogress"),
		ExpressionAttributeNames:  map[string]string{"#st": AttrStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{":inprogress": &types.AttributeValueMemberS{Value: StatusInProgress}},
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil // absent or completed: nothing to release
		}
		return fmt.Errorf("idempotency: release %q: delete item: %w", key, err)
	}
	return nil
}

// Get implements VersionedStore with a strongly consistent GetItem; an item
// whose expiresAt has passed counts as absent (TTL deletes lazily).
func (d *DynamoDB) Get(ctx context.Context, key string) (Versioned, error) {
	key = StorageKey(key)
	out, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            d.key(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Versioned{}, fmt.Errorf("idempotency: get %q: get item: %w", key, err)
	}
	item := out.Item
	if item == nil || expiredAt(item, d.now()) {
		return Versioned{}, nil
	}
	v := Versioned{Version: numberAttr(item, AttrVersion)}
	if v.Version == 0 {
		return Versioned{}, nil
	}
	if b, ok := item[AttrValue].(*types.AttributeValueMemberB); ok {
		v.Value = b.Value
	}
	return v, nil
}

// Put implements VersionedStore with a PutItem conditioned on the version
// read (or, for version 0, on the key being absent or expired).
func (d *DynamoDB) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	key = StorageKey(key)
	if len(value) > MaxValueBytes {
		return 0, fmt.Errorf("idempotency: put %q: %d bytes: %w", key, len(value), ErrTooLarge)
	}
	now := d.now()
	cond, names, values := versionCondition(expected, now)
	item := map[string]types.AttributeValue{
		AttrID:        &types.AttributeValueMemberS{Value: key},
		AttrVersion:   &types.AttributeValueMemberN{Value: strconv.FormatInt(expected+1, 10)},
		AttrExpiresAt: epochSeconds(ceilSecond(now.Add(keepFor))),
	}
	if value != nil {
		item[AttrValue] = &types.AttributeValueMemberB{Value: value}
	}
	_, err := d.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(d.table),
		Item:                      item,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return 0, versionedErr("put", key, expected, err)
	}
	return expected + 1, nil
}

// Delete implements VersionedStore with a DeleteItem conditioned on the
// version read.
func (d *DynamoDB) Delete(ctx context.Context, key string, expected int64) error {
	key = StorageKey(key)
	if expected == 0 {
		return nil
	}
	cond, names, values := versionCondition(expected, d.now())
	_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       d.key(key),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return versionedErr("delete", key, expected, err)
	}
	return nil
}

// versionedErr tells a failed version condition (ErrConflict) from an API
// failure of a versioned write.
func versionedErr(op, key string, expected int64, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("idempotency: %s %q at version %d: %w", op, key, expected, ErrConflict)
	}
	return fmt.Errorf("idempotency: %s %q: %w", op, key, err)
}

// versionCondition is the condition of a write that read version expected:
// the item still at that version and unexpired, or, for 0, no live item.
func versionCondition(expected int64, now time.Time) (string, map[string]string, map[string]types.AttributeValue) {
	nowAttr := epochSeconds(now.Unix())
	if expected == 0 {
		return "attribute_not_exists(#id) OR #exp < :now",
			map[string]string{"#id": AttrID, "#exp": AttrExpiresAt},
			map[string]types.AttributeValue{":now": nowAttr}
	}
	return "#ver = :ver AND #exp >= :now",
		map[string]string{"#ver": AttrVersion, "#exp": AttrExpiresAt},
		map[string]types.AttributeValue{
			":ver": &types.AttributeValueMemberN{Value: strconv.FormatInt(expected, 10)},
			":now": nowAttr,
		}
}

// expiredAt reports whether an item's expiresAt has passed at now (in whole
// seconds, as the conditions compare it).
func expiredAt(item map[string]types.AttributeValue, now time.Time) bool {
	exp, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	s, err := strconv.ParseInt(exp.Value, 10, 64)
	return err == nil && s < now.Unix()
}

// numberAttr reads an integer attribute, 0 when absent or not a number.
func numberAttr(item map[string]types.AttributeValue, name string) int64 {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, _ := strconv.ParseInt(n.Value, 10, 64)
	return v
}

func (d *DynamoDB) key(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: key}}
}

// ceilSecond rounds t up to whole epoch seconds, so an entry never expires
// before its duration has passed.
func ceilSecond(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func epochSeconds(s int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(s, 10)}
}
