package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/linegate/linegate/internal/config"
)

// throttlingSSM stands in for Parameter Store at its default throughput: a
// token bucket of rate calls per second holding at most burst, shared by
// every caller as SSM's account-wide quota is; a call that finds the bucket
// empty gets SSM's ThrottlingException (HTTP 400, "Rate exceeded").
type throttlingSSM struct {
	mu        sync.Mutex
	tokens    float64
	rate      float64
	burst     float64
	last      time.Time
	values    map[string]string
	served    atomic.Int64
	throttled atomic.Int64
}

func newThrottlingSSM(t *testing.T, rate, burst float64, values map[string]string) (*throttlingSSM, *httptest.Server) {
	s := &throttlingSSM{tokens: burst, rate: rate, burst: burst, last: time.Now(), values: values}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *throttlingSSM) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.tokens = min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.rate)
	s.last = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

func (s *throttlingSSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameters" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"UnknownOperationException"}`)
		return
	}
	if !s.take() {
		s.throttled.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`)
		return
	}
	var in struct{ Names []string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	var out getParametersOutput
	for _, n := range in.Names {
		if v, ok := s.values[n]; ok {
			out.Parameters = append(out.Parameters, struct {
				Name  string `json:"Name"`
				Value string `json:"Value"`
			}{n, v})
		} else {
			out.InvalidParameters = append(out.InvalidParameters, n)
		}
	}
	s.served.Add(1)
	_ = json.NewEncoder(w).Encode(out)
}

// A burst of cold starts larger than Parameter Store's 40 calls per second
// all get their secrets: each start's GetParameters is throttled, backs off
// with jitter and tries again within its INIT budget, instead of failing
// its INIT after three quick attempts. The stand-in throttles at the
// default quota (40/s, the burst of 40 already there), 100 functions start
// at once, each with its own client as each Lambda sandbox has.
func TestColdStartBurstSurvivesSSMThrottling(t *testing.T) {
	const starts = 100
	stand, srv := newThrottlingSSM(t, 40, 40, map[string]string{"/linegate/channel-secret": "s3cret"})
	var wg sync.WaitGroup
	errs := make([]error, starts)
	began := time.Now()
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewSSM(aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
			vals, err := Resolve(context.Background(), c, config.Secret{Param: "/linegate/channel-secret"})
			if err == nil && vals[0] != "s3cret" {
				err = fmt.Errorf("got %q", vals[0])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("cold starts failed: %v", err)
	}
	if stand.throttled.Load() == 0 {
		t.Fatal("the stand-in throttled nothing: the burst did not exceed the quota, the test proves nothing")
	}
	t.Logf("%d cold starts, %d calls throttled, all served within %v (budget %v each)", starts, stand.throttled.Load(), time.Since(began).Round(time.Millisecond), DefaultBudget)
	if stand.served.Load() != starts {
		t.Fatalf("%d calls served for %d starts", stand.served.Load(), starts)
	}
}

// A start the quota cannot serve within its budget fails its INIT with an
// error that says so (ErrThrottled), rather than waiting past Lambda's INIT
// limit.
func TestColdStartThrottledBeyondBudget(t *testing.T) {
	_, srv := newThrottlingSSM(t, 0, 0, nil)
	c := NewSSM(aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	c.budget = 400 * time.Millisecond
	_, err := Resolve(context.Background(), c, config.Secret{Param: "/linegate/channel-secret"})
	if !errors.Is(err, ErrThrottled) {
		t.Fatalf("err %v, want ErrThrottled", err)
	}
}
