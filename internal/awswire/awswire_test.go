package awswire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/awswire"
	"github.com/linegate/linegate/internal/cloud"
	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/idempotency/idempotencytest"
)

// sdkConfig points the real SDK clients at url, as AWS_ENDPOINT_URL does for
// a function under `sam local invoke` (SAM's placeholder credentials).
func sdkConfig(url string) aws.Config {
	return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("defaultkey", "defaultsecret", "")}
}

// TestConformanceOverTheWire runs the conformance suite the in-memory cloud
// passes in-process against the same cloud reached through its wire
// protocols with the real SDK clients: what `sam local invoke` against
// `linegate local` sees. No case may diverge.
func TestConformanceOverTheWire(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem over awswire",
		New: func(t *testing.T) cloudtest.Backend {
			c, b := cloudtest.Mem(t)
			srv := httptest.NewServer(awswire.New(awswire.WithSQS(c), awswire.WithEventBridge(c), awswire.WithSNS(c)))
			t.Cleanup(srv.Close)
			clients := cloud.NewAWS(sdkConfig(srv.URL))
			b.SQS, b.EventBridge, b.SNS = clients.SQS, clients.EventBridge, clients.SNS
			return b
		},
	})
}

// TestIdempotencyStoreOverTheWire runs the idempotency stores' suite against
// pkg/idempotency's DynamoDB store talking to the server's DynamoDB with the
// real SDK client: every conditional write the worker makes, over JSON 1.0.
func TestIdempotencyStoreOverTheWire(t *testing.T) {
	tables := awswire.NewTables("us-east-1", "123456789012")
	srv := httptest.NewServer(awswire.New(awswire.WithDynamoDB(tables)))
	defer srv.Close()
	client := dynamodb.NewFromConfig(sdkConfig(srv.URL))
	var n atomic.Int64
	idempotencytest.Run(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.Store {
		name := fmt.Sprintf("idempotency-%d", n.Add(1))
		_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
			BillingMode:          ddbtypes.BillingModePayPerRequest,
		})
		if err != nil {
			t.Fatalf("create table: %v", err)
		}
		return idempotency.NewDynamoDB(client, name, idempotency.WithDynamoClock(clock.Now))
	})
}

// FuzzServe posts arbitrary bodies under any target (or as an SNS query form
// when the target is empty) to a server over the in-memory cloud: every
// request gets an answer, nothing panics.
func FuzzServe(f *testing.F) {
	f.Add("AmazonSQS.GetQueueUrl", `{"QueueName":"a"}`)
	f.Fuzz(func(t *testing.T, target, body string) {
		c := mem.New()
		defer c.Close()
		tables := awswire.NewTables("us-east-1", "123456789012")
		tables.CreateTable("t", "id", "S")
		s := awswire.New(awswire.WithSQS(c), awswire.WithEventBridge(c), awswire.WithSNS(c), awswire.WithDynamoDB(tables))
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if target != "" {
			req.Header.Set("X-Amz-Target", target)
		} else {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == 0 {
			t.Fatal("no status")
		}
	})
}

// TestErrorsAsAWSSendsThem checks the error documents the SDK decodes: SQS's
// legacy query error code (which code written against SQS compares), and
// DynamoDB returning the blocking item with a failed condition.
func TestErrorsAsAWSSendsThem(t *testing.T) {
	c := mem.New()
	defer c.Close()
	tables := awswire.NewTables("us-east-1", "123456789012")
	srv := httptest.NewServer(awswire.New(awswire.WithSQS(c), awswire.WithDynamoDB(tables)))
	defer srv.Close()
	cfg := sdkConfig(srv.URL)
	ctx := context.Background()

	_, err := sqs.NewFromConfig(cfg).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var qdne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &qdne) || qdne.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("GetQueueUrl of a missing queue: %v; want QueueDoesNotExist with code AWS.SimpleQueueService.NonExistentQueue", err)
	}

	tables.CreateTable("t", "id", "S")
	db := dynamodb.NewFromConfig(cfg)
	key := map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "k"}}
	put := &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key, ConditionExpression: aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld}
	if _, err := db.PutItem(ctx, put); err != nil {
		t.Fatal(err)
	}
	_, err = db.PutItem(ctx, put)
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item == nil {
		t.Fatalf("second conditional put: %v; want ConditionalCheckFailedException with the old item", err)
	}
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key,
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":unused": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
	if !strings.Contains(fmt.Sprint(err), "ValidationException") {
		t.Errorf("an unused expression value: %v; want a ValidationException, as DynamoDB answers", err)
	}
	_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("missing"), Key: key})
	var rnf *ddbtypes.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Errorf("GetItem on a missing table: %v; want ResourceNotFoundException", err)
	}
}
