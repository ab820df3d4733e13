package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/idempotency/idempotencytest"
	"github.com/linegate/linegate/internal/motoserver"
)

// motoClient starts moto_server and returns a DynamoDB client for it.
func motoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(motoserver.Config(motoserver.Start(t)))
}

func TestDynamoDBConformanceOnMoto(t *testing.T) {
	client := motoClient(t)
	var n atomic.Int64
	idempotencytest.Run(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.Store {
		table := fmt.Sprintf("idempotency-%d", n.Add(1))
		createTable(t, client, table)
		return idempotency.NewDynamoDB(client, table, idempotency.WithDynamoClock(clock.Now))
	})
}

// The value and versioned suites share one moto table: their keys are
// unique per subtest.
func TestDynamoDBStateConformanceOnMoto(t *testing.T) {
	client := motoClient(t)
	createTable(t, client, "state")
	store := func(clock *idempotencytest.Clock) *idempotency.DynamoDB {
		return idempotency.NewDynamoDB(client, "state", idempotency.WithDynamoClock(clock.Now))
	}
	idempotencytest.RunValues(t, func(_ *testing.T, clock *idempotencytest.Clock) idempotency.ValueStore { return store(clock) })
	idempotencytest.RunVersioned(t, func(_ *testing.T, clock *idempotencytest.Clock) idempotency.VersionedStore { return store(clock) })
	idempotencytest.RunAttempts(t, func(_ *testing.T, clock *idempotencytest.Clock) idempotency.VersionedStore { return store(clock) })
}

// TestDynamoDBItemShapeOnMoto checks what lands in the table: the TTL
// attribute in epoch seconds and the status, as operators and TTL see them.
func TestDynamoDBItemShapeOnMoto(t *testing.T) {
	client := motoClient(t)
	createTable(t, client, "shape")
	now := time.Date(2026, 1, 1, 0, 0, 0, 500_000_000, time.UTC)
	s := idempotency.NewDynamoDB(client, "shape", idempotency.WithDynamoClock(func() time.Time { return now }))
	ctx := context.Background()
	read := func() map[string]types.AttributeValue {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("shape"), Key: map[string]types.AttributeValue{idempotency.AttrID: &types.AttributeValueMemberS{Value: "ev1"}}, ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	if err := s.Claim(ctx, "ev1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	item := read()
	if got := attrS(item, idempotency.AttrStatus); got != "in-progress" {
		t.Errorf("status = %q; want in-progress", got)
	}
	if got, want := attrN(item, idempotency.AttrExpiresAt), fmt.Sprint(now.Unix()+11); got != want {
		t.Errorf("expiresAt = %s; want %s (rounded up)", got, want)
	}
	if err := s.Complete(ctx, "ev1", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	item = read()
	if got := attrS(item, idempotency.AttrStatus); got != "completed" {
		t.Errorf("status = %q; want completed", got)
	}
	if got, want := attrN(item, idempotency.AttrExpiresAt), fmt.Sprint(now.Add(24*time.Hour).Unix()+1); got != want {
		t.Errorf("expiresAt = %s; want %s", got, want)
	}
	// A claim that expired but is still in the table (TTL is lazy) can be
	// completed: the effect happened.
	if err := s.Claim(ctx, "ev2", time.Second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if err := s.Complete(ctx, "ev2", time.Hour); err != nil {
		t.Fatalf("complete of an expired claim = %v; want nil", err)
	}
}

func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(idempotency.AttrID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(idempotency.AttrID), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	_, err = c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(idempotency.AttrExpiresAt), Enabled: aws.Bool(true),
		},
	})
	if err != nil {
		t.Fatalf("enable TTL on %s: %v", name, err)
	}
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// fakeDynamo answers each call from a function; a nil function fails the
// test, so every test states exactly which calls it expects.
type fakeDynamo struct {
	t      *testing.T
	put    func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	get    func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
	update func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	del    func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	calls  []string
}

func (f *fakeDynamo) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return answer(f, "PutItem", f.put, in)
}

func (f *fakeDynamo) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return answer(f, "GetItem", f.get, in)
}

func (f *fakeDynamo) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return answer(f, "UpdateItem", f.update, in)
}

func (f *fakeDynamo) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return answer(f, "DeleteItem", f.del, in)
}

// answer records a call of op and answers it with fn, failing the test
// when the test scripted no answer for op.
func answer[In, Out any](f *fakeDynamo, op string, fn func(In) (Out, error), in In) (Out, error) {
	f.calls = append(f.calls, op)
	if fn == nil {
		f.t.Fatal("unexpected " + op)
	}
	return fn(in)
}

var throttled = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}

func ccf(status string) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if status != "" {
		e.Item = map[string]types.AttributeValue{
			idempotency.AttrID:     &types.AttributeValueMemberS{Value: "k"},
			idempotency.AttrStatus: &types.AttributeValueMemberS{Value: status},
		}
	}
	return e
}

func itemWith(status string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		idempotency.AttrID:     &types.AttributeValueMemberS{Value: "k"},
		idempotency.AttrStatus: &types.AttributeValueMemberS{Value: status},
	}
}

func TestDynamoDBClaimVerdicts(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		put       []error // successive PutItem results
		get       func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
		want      error // sentinel, or nil
		wantWrap  error // for non-sentinel errors: what it must wrap
		wantCalls string
	}{
		{name: "claimed", put: []error{nil}, wantCalls: "PutItem"},
		{name: "completed from error item", put: []error{ccf("completed")}, want: idempotency.ErrCompleted, wantCalls: "PutItem"},
		{name: "in progress from error item", put: []error{ccf("in-progress")}, want: idempotency.ErrInProgress, wantCalls: "PutItem"},
		{
			name: "completed read back when the error has no item", put: []error{ccf("")},
			get: func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				if !aws.ToBool(in.ConsistentRead) {
					return nil, errors.New("read must be consistent")
				}
				return &dynamodb.GetItemOutput{Item: itemWith("completed")}, nil
			},
			want: idempotency.ErrCompleted, wantCalls: "PutItem GetItem",
		},
		{
			name: "vanished item: claim retried", put: []error{ccf(""), nil},
			get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				return &dynamodb.GetItemOutput{}, nil
			},
			wantCalls: "PutItem GetItem PutItem",
		},
		{
			name: "read-back failure wrapped", put: []error{ccf("")},
			get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				return nil, throttled
			},
			wantWrap: throttled, wantCalls: "PutItem GetItem",
		},
		{name: "throttled put wrapped, nothing claimed", put: []error{throttled}, wantWrap: throttled, wantCalls: "PutItem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDynamo{t: t, get: tt.get}
			f.put = func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				checkPut(t, in, now)
				err := tt.put[0]
				tt.put = tt.put[1:]
				return &dynamodb.PutItemOutput{}, err
			}
			s := idempotency.NewDynamoDB(f, "tbl", idempotency.WithDynamoClock(func() time.Time { return now }))
			err := s.Claim(context.Background(), "k", 30*time.Second)
			switch {
			case tt.wantWrap != nil:
				if !errors.Is(err, tt.wantWrap) {
					t.Fatalf("Claim = %v; want it to wrap %v", err, tt.wantWrap)
				}
				if errors.Is(err, idempotency.ErrInProgress) || errors.Is(err, idempotency.ErrCompleted) {
					t.Fatalf("Claim = %v; an API failure must not look like a verdict", err)
				}
				if !strings.Contains(err.Error(), `claim "k"`) {
					t.Fatalf("Claim = %v; want context naming the op and key", err)
				}
			case tt.want != nil:
				if !errors.Is(err, tt.want) {
					t.Fatalf("Claim = %v; want %v", err, tt.want)
				}
			default:
				if err != nil {
					t.Fatalf("Claim = %v; want nil", err)
				}
			}
			if got := strings.Join(f.calls, " "); got != tt.wantCalls {
				t.Fatalf("calls = %q; want %q", got, tt.wantCalls)
			}
		})
	}
}

func checkPut(t *testing.T, in *dynamodb.PutItemInput, now time.Time) {
	t.Helper()
	if aws.ToString(in.TableName) != "tbl" {
		t.Errorf("table = %q", aws.ToString(in.TableName))
	}
	if in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("ReturnValuesOnConditionCheckFailure = %q; want ALL_OLD", in.ReturnValuesOnConditionCheckFailure)
	}
	if got := attrS(in.Item, idempotency.AttrStatus); got != "in-progress" {
		t.Errorf("status = %q", got)
	}
	if got, want := attrN(in.Item, idempotency.AttrExpiresAt), fmt.Sprint(now.Unix()+30); got != want {
		t.Errorf("expiresAt = %s; want %s", got, want)
	}
	if got, want := attrN(in.ExpressionAttributeValues, ":now"), fmt.Sprint(now.Unix()); got != want {
		t.Errorf(":now = %s; want %s", got, want)
	}
}

func TestDynamoDBCompleteAndReleaseFailures(t *testing.T) {
	tests := []struct {
		name     string
		call     func(*idempotency.DynamoDB) error
		update   error
		del      error
		want     error // errors.Is target; nil means success
		verdict  bool  // want is a sentinel verdict rather than a wrapped API error
		wantText string
	}{
		{name: "complete ok", call: complete, update: nil},
		{name: "complete without claim", call: complete, update: ccf(""), want: idempotency.ErrNotClaimed, verdict: true},
		{name: "complete throttled", call: complete, update: throttled, want: throttled, wantText: `complete "k"`},
		{name: "release ok", call: release, del: nil},
		{name: "release of completed or absent is a no-op", call: release, del: ccf("")},
		{name: "release throttled", call: release, del: throttled, want: throttled, wantText: `release "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDynamo{t: t}
			f.update = func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				if !strings.Contains(aws.ToString(in.ConditionExpression), "#st = :inprogress") {
					t.Errorf("update condition = %q; want it conditioned on the claim", aws.ToString(in.ConditionExpression))
				}
				return &dynamodb.UpdateItemOutput{}, tt.update
			}
			f.del = func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
				if aws.ToString(in.ConditionExpression) != "#st = :inprogress" {
					t.Errorf("delete condition = %q; want it conditioned on in-progress", aws.ToString(in.ConditionExpression))
				}
				return &dynamodb.DeleteItemOutput{}, tt.del
			}
			err := tt.call(idempotency.NewDynamoDB(f, "tbl"))
			if !checkVerdict(t, err, tt.want, idempotency.ErrNotClaimed, tt.verdict) {
				return
			}
			if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("err = %v; want context %q", err, tt.wantText)
			}
		})
	}
}

// checkVerdict checks err against want (nil: success), and that an API
// failure never wraps verdict, the sentinel a caller branches on, unless
// the case is that verdict. It reports whether there is an error to check
// further.
func checkVerdict(t *testing.T, err, want, verdict error, isVerdict bool) bool {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("err = %v; want nil", err)
		}
		return false
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v; want it to wrap %v", err, want)
	}
	if !isVerdict && errors.Is(err, verdict) {
		t.Fatalf("err = %v; an API failure must not look like %v", err, verdict)
	}
	return true
}

func complete(d *idempotency.DynamoDB) error { return d.Complete(context.Background(), "k", time.Hour) }
func release(d *idempotency.DynamoDB) error  { return d.Release(context.Background(), "k") }

// Versioned writes are conditional on the version read, and an API failure
// never looks like a conflict.
func TestDynamoDBVersionedWrites(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		call     func(*idempotency.DynamoDB) error
		result   error // what the API answers
		wantCond string
		want     error
		conflict bool
	}{
		{name: "put new", call: putAt(0), wantCond: "attribute_not_exists(#id) OR #exp < :now"},
		{name: "put at version", call: putAt(3), wantCond: "#ver = :ver AND #exp >= :now"},
		{name: "put conflict", call: putAt(3), result: ccf(""), want: idempotency.ErrConflict, conflict: true},
		{name: "put throttled", call: putAt(3), result: throttled, want: throttled},
		{name: "delete at version", call: deleteAt(3), wantCond: "#ver = :ver AND #exp >= :now"},
		{name: "delete conflict", call: deleteAt(3), result: ccf(""), want: idempotency.ErrConflict, conflict: true},
		{name: "delete throttled", call: deleteAt(3), result: throttled, want: throttled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDynamo{t: t}
			check := func(cond *string, vals map[string]types.AttributeValue) {
				if tt.wantCond != "" && aws.ToString(cond) != tt.wantCond {
					t.Errorf("condition = %q; want %q", aws.ToString(cond), tt.wantCond)
				}
				if strings.Contains(aws.ToString(cond), ":ver") && attrN(vals, ":ver") != "3" {
					t.Errorf(":ver = %q; want the version read, 3", attrN(vals, ":ver"))
				}
			}
			f.put = func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				check(in.ConditionExpression, in.ExpressionAttributeValues)
				if tt.result == nil && attrN(in.Item, idempotency.AttrVersion) == "" {
					t.Error("put without a version attribute")
				}
				return &dynamodb.PutItemOutput{}, tt.result
			}
			f.del = func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
				check(in.ConditionExpression, in.ExpressionAttributeValues)
				return &dynamodb.DeleteItemOutput{}, tt.result
			}
			err := tt.call(idempotency.NewDynamoDB(f, "tbl", idempotency.WithDynamoClock(func() time.Time { return now })))
			checkVerdict(t, err, tt.want, idempotency.ErrConflict, tt.conflict)
		})
	}
}

func putAt(v int64) func(*idempotency.DynamoDB) error {
	return func(d *idempotency.DynamoDB) error {
		_, err := d.Put(context.Background(), "k", []byte("v"), v, time.Hour)
		return err
	}
}

func deleteAt(v int64) func(*idempotency.DynamoDB) error {
	return func(d *idempotency.DynamoDB) error { return d.Delete(context.Background(), "k", v) }
}

// A step's value travels in the completing update and comes back with the
// old item of a refused claim, without another read.
func TestDynamoDBValueRoundTripWithoutReads(t *testing.T) {
	f := &fakeDynamo{t: t}
	var stored []byte
	f.update = func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		if !strings.Contains(aws.ToString(in.UpdateExpression), "#val = :val") {
			t.Errorf("update = %q; want it to set the value", aws.ToString(in.UpdateExpression))
		}
		stored = in.ExpressionAttributeValues[":val"].(*types.AttributeValueMemberB).Value
		return &dynamodb.UpdateItemOutput{}, nil
	}
	f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		e := ccf("completed").(*types.ConditionalCheckFailedException)
		e.Item[idempotency.AttrValue] = &types.AttributeValueMemberB{Value: stored}
		return nil, e
	}
	d := idempotency.NewDynamoDB(f, "tbl")
	ctx := context.Background()
	if err := d.CompleteValue(ctx, "k", []byte(`{"receipt":"r-1"}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	v, err := d.ClaimValue(ctx, "k", time.Minute)
	if !errors.Is(err, idempotency.ErrCompleted) || string(v) != `{"receipt":"r-1"}` {
		t.Fatalf("ClaimValue = %q, %v; want the stored value and ErrCompleted", v, err)
	}
	if got := strings.Join(f.calls, " "); got != "UpdateItem PutItem" {
		t.Fatalf("calls = %q; want no read-back", got)
	}
}
