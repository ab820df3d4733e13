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
const (
	AttrID        = "id"
	AttrStatus    = "status"
	AttrExpiresAt = "expiresAt"
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

var _ Store = (*DynamoDB)(nil)

// Claim implements Store with a PutItem conditioned on the key being absent
// or expired. On a failed condition the old item (returned with the error,
// or read back when the endpoint does not return it) tells ErrCompleted from
// ErrInProgress.
func (d *DynamoDB) Claim(ctx context.Context, key string, inProgressFor time.Duration) error {
	for range claimAttempts {
		now := d.now()
		_, err := d.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(d.table),
			Item: map[string]types.AttributeValue{
				AttrID:        &types.AttributeValueMemberS{Value: key},
				AttrStatus:    &types.AttributeValueMemberS{Value: statusInProgress},
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
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return fmt.Errorf("idempotency: claim %q: put item: %w", key, err)
		}
		old := ccf.Item
		if old == nil {
			got, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(d.table),
				Key:            d.key(key),
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return fmt.Errorf("idempotency: claim %q: read blocking item: %w", key, err)
			}
			old = got.Item
		}
		if old == nil {
			continue // released or deleted in between: try again
		}
		if s, ok := old[AttrStatus].(*types.AttributeValueMemberS); ok && s.Value == statusCompleted {
			return ErrCompleted
		}
		return ErrInProgress
	}
	return ErrInProgress
}

// Complete implements Store with an UpdateItem conditioned on an in-progress
// claim existing.
func (d *DynamoDB) Complete(ctx context.Context, key string, keepFor time.Duration) error {
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(key),
		UpdateExpression:         aws.String("SET #st = :done, #exp = :exp"),
		ConditionExpression:      aws.String("attribute_exists(#id) AND #st = :inprogress"),
		ExpressionAttributeNames: map[string]string{"#id": AttrID, "#st": AttrStatus, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done":       &types.AttributeValueMemberS{Value: statusCompleted},
			":inprogress": &types.AttributeValueMemberS{Value: statusInProgress},
			":exp":        epochSeconds(ceilSecond(d.now().Add(keepFor))),
		},
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
	_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       d.key(key),
		ConditionExpression:       aws.String("#st = :inprogress"),
		ExpressionAttributeNames:  map[string]string{"#st": AttrStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{":inprogress": &types.AttributeValueMemberS{Value: statusInProgress}},
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
