package awswire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

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

// TestDynamoDBResponsesCarryTheirCRC32 checks that every DynamoDB answer, a
// result or an error, carries X-Amz-Crc32 with the CRC32 of its body, as
// DynamoDB sends it, and that the SDK (which checks the body against it)
// then logs nothing: without the header it warns "response did not match
// expected checksum" on every call, a line in the function's log the real
// service never causes.
func TestDynamoDBResponsesCarryTheirCRC32(t *testing.T) {
	tables := awswire.NewTables("us-east-1", "123456789012")
	tables.CreateTable("t", "id", "S")
	s := awswire.New(awswire.WithDynamoDB(tables))
	for _, tt := range []struct {
		name, op, body string
		status         int
	}{
		{"a result", "PutItem", `{"TableName":"t","Item":{"id":{"S":"k"}}}`, 200},
		{"an item", "GetItem", `{"TableName":"t","Key":{"id":{"S":"k"}}}`, 200},
		{"a failed condition", "PutItem", `{"TableName":"t","Item":{"id":{"S":"k"}},"ConditionExpression":"attribute_not_exists(id)"}`, 400},
		{"a missing table", "GetItem", `{"TableName":"nope","Key":{"id":{"S":"k"}}}`, 400},
		{"an unknown operation", "Frobnicate", `{}`, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+tt.op)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.op == "Frobnicate" {
				return // answered as AWS answers an unknown target, before any service
			}
			want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(rec.Body.Bytes())), 10)
			if got := rec.Header().Get("X-Amz-Crc32"); got != want {
				t.Fatalf("X-Amz-Crc32 = %q, want %s (the body's CRC32): %s", got, want, rec.Body)
			}
		})
	}

	srv := httptest.NewServer(s)
	defer srv.Close()
	var logged bytes.Buffer
	cfg := sdkConfig(srv.URL)
	cfg.Logger = logging.NewStandardLogger(&logged)
	db := dynamodb.NewFromConfig(cfg)
	key := map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "k2"}}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key}); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem: %v, %v", out, err)
	}
	if logged.Len() != 0 {
		t.Fatalf("the SDK logged: %s", logged.String())
	}
}
