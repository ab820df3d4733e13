package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
)

// answer is one HTTP response of the fake EventBridge endpoint.
type answer struct {
	status int
	body   string
}

// sdkBus serves PutEvents over HTTP the way EventBridge answers (JSON 1.1,
// errors as {"__type": ...}) and returns a real SDK client pointed at it,
// with the SDK's default retryer left in place, so a test sees every HTTP
// attempt the publisher's one retry layer makes.
func sdkBus(t *testing.T, answers ...answer) (*eventbridge.Client, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(hits.Add(1))
		if got := r.Header.Get("X-Amz-Target"); got != "AWSEvents.PutEvents" {
			t.Errorf("X-Amz-Target %q", got)
		}
		a := answers[min(n, len(answers))-1]
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	c := eventbridge.NewFromConfig(aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	return c, &hits
}

var accepted = answer{200, `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`}

// Whole-call errors are classified with the service's own code: a
// misconfiguration fails at once and says what it is; a transient error is
// retried by the publisher alone (the SDK's retryer is off for the call).
func TestWholeCallErrorsClassified(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answers  []answer
		wantErr  bool
		wantCode string
		wantHits int32
	}{
		{"access denied fails at once", []answer{{400, `{"__type":"AccessDeniedException","message":"User is not authorized to perform: events:PutEvents"}`}},
			true, "AccessDeniedException", 1},
		{"missing bus fails at once", []answer{{400, `{"__type":"ResourceNotFoundException","message":"Event bus linegate does not exist."}`}},
			true, "ResourceNotFoundException", 1},
		{"bad credentials fail at once", []answer{{400, `{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`}},
			true, "UnrecognizedClientException", 1},
		{"internal errors then success: retried by the publisher", []answer{{500, `{"__type":"InternalException","message":"oops"}`},
			{500, `{"__type":"InternalException","message":"oops"}`}, accepted}, false, "", 3},
		{"throttled then success", []answer{{400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`}, accepted},
			false, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, hits := sdkBus(t, tc.answers...)
			p := NewPublisher(api, "linegate", WithDeadline(2*time.Second), WithBackoff(time.Millisecond, time.Millisecond))
			start := time.Now()
			res, err := p.Publish(context.Background(), []Entry{{DetailType: "message", Detail: []byte(`{}`), EventID: "ev1"}})
			if took := time.Since(start); tc.wantErr && took > time.Second {
				t.Errorf("a final error took %v: it was retried until the deadline", took)
			}
			if got := hits.Load(); got != tc.wantHits || int32(res.Calls) != got {
				t.Errorf("%d HTTP attempts for %d publisher calls, want %d of each (one retry layer: the SDK's retryer is off)",
					got, res.Calls, tc.wantHits)
			}
			if !tc.wantErr {
				if err != nil || res.Accepted != 1 {
					t.Fatalf("Publish: %v, accepted %d", err, res.Accepted)
				}
				return
			}
			if !errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), tc.wantCode) {
				t.Fatalf("error %v, want ErrNotAccepted naming %s", err, tc.wantCode)
			}
			if len(res.Failed) != 1 || res.Failed[0].Code != tc.wantCode || res.Failed[0].EventID != "ev1" {
				t.Fatalf("failures %+v, want one %s for ev1", res.Failed, tc.wantCode)
			}
		})
	}
}

// An entry still failing with a retryable error when the deadline passes is
// reported with that error's code, not as a bare timeout.
func TestDeadlineReportsTheLastError(t *testing.T) {
	api, hits := sdkBus(t, answer{503, `{"__type":"ServiceUnavailableException","message":"try later"}`})
	p := NewPublisher(api, "linegate", WithDeadline(150*time.Millisecond), WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	res, err := p.Publish(context.Background(), []Entry{{DetailType: "message", Detail: []byte(`{}`), EventID: "ev1"}})
	if !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v", err)
	}
	if hits.Load() < 2 {
		t.Fatalf("%d attempts: a 503 must be retried", hits.Load())
	}
	if len(res.Failed) != 1 || res.Failed[0].Code != "ServiceUnavailableException" || !strings.Contains(res.Failed[0].Message, "deadline") {
		b, _ := json.Marshal(res.Failed)
		t.Fatalf("failures %s, want ServiceUnavailableException after the deadline", b)
	}
}
