package secrets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// fakeSSM is SSM's transport: it answers each call with the next of
// answers (the last one repeats) and keeps the requests.
type fakeSSM struct {
	answers  []answer
	requests []*http.Request
	bodies   [][]byte
}

type answer struct {
	status int
	body   string
}

func (f *fakeSSM) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, body)
	a := f.answers[min(len(f.requests), len(f.answers))-1]
	return &http.Response{StatusCode: a.status, Body: io.NopCloser(strings.NewReader(a.body)), Header: http.Header{}, Request: r}, nil
}

var signedAt = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// fakeTime is the budget's clock for a test: sleeping advances it, so a
// test of the retry schedule takes no wall time.
type fakeTime struct {
	now   time.Time
	slept []time.Duration
}

func (f *fakeTime) clock() time.Time { return f.now }

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) error {
	f.slept = append(f.slept, d)
	f.now = f.now.Add(d)
	return ctx.Err()
}

func (f *fakeTime) total() time.Duration {
	var sum time.Duration
	for _, d := range f.slept {
		sum += d
	}
	return sum
}

func newTestSSM(t *testing.T, f *fakeSSM, session string) *SSM {
	t.Helper()
	c, _ := newTimedSSM(t, f, session)
	return c
}

func newTimedSSM(t *testing.T, f *fakeSSM, session string) (*SSM, *fakeTime) {
	t.Helper()
	c := NewSSM(aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String("https://ssm.test"), HTTPClient: &http.Client{Transport: f},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", session)})
	ft := &fakeTime{now: signedAt}
	c.now = func() time.Time { return signedAt }
	c.clock, c.sleep = ft.clock, ft.sleep
	return c, ft
}

const okAnswer = `{"InvalidParameters":["/nope"],"Parameters":[{"ARN":"arn:aws:ssm:x","DataType":"text","Name":"/a","Type":"SecureString","Value":"va","Version":1},{"Name":"/b","Value":"vb"}]}`

// The request is SSM's JSON protocol, signed with SigV4 for ssm in the
// client's region over exactly the body sent, with the session token.
func TestSSMRequest(t *testing.T) {
	f := &fakeSSM{answers: []answer{{200, okAnswer}}}
	c := newTestSSM(t, f, "session-token")
	values, invalid, err := c.GetParameters(context.Background(), []string{"/a", "/b", "/nope"})
	if err != nil {
		t.Fatal(err)
	}
	if values["/a"] != "va" || values["/b"] != "vb" || len(values) != 2 || len(invalid) != 1 || invalid[0] != "/nope" {
		t.Fatalf("values %v, invalid %v", values, invalid)
	}
	r, body := f.requests[0], f.bodies[0]
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameters" ||
		r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || r.Header.Get("X-Amz-Security-Token") != "session-token" {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	var in struct {
		Names          []string
		WithDecryption bool
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Names) != 3 || !in.WithDecryption {
		t.Fatalf("body %s (%v)", body, err)
	}
	// The same request signed independently over the body received.
	again, _ := http.NewRequest(http.MethodPost, "http://"+r.Host+"/", strings.NewReader(string(body)))
	for _, h := range []string{"Content-Type", "X-Amz-Target"} {
		again.Header.Set(h, r.Header.Get(h))
	}
	hash := sha256Hex(body)
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "session-token"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hash, "ssm", "ap-northeast-1", signedAt); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Header.Get("Authorization"), again.Header.Get("Authorization"); got != want || !strings.Contains(got, "/ap-northeast-1/ssm/aws4_request") {
		t.Fatalf("Authorization %q, want %q", got, want)
	}
}

var throttled = answer{400, `{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`}

// A throttled call, a 5xx or a broken answer is tried again within the
// call's budget, with full-jitter exponential backoff; SSM's refusals are
// not.
func TestSSMRetries(t *testing.T) {
	denied := answer{400, `{"__type":"AccessDeniedException","message":"not authorized to perform ssm:GetParameters"}`}
	tests := []struct {
		name    string
		answers []answer
		calls   int // 0: as many as the budget allows
		wantErr []error
	}{
		{"a 5xx, then fine", []answer{{500, `{}`}, {200, okAnswer}}, 2, nil},
		{"throttled five times, then fine", []answer{throttled, throttled, throttled, throttled, throttled, {200, okAnswer}}, 6, nil},
		{"denied: no retry", []answer{denied}, 1, []error{ErrSSM}},
		{"not SSM's answer", []answer{{200, `<html>`}}, 1, []error{ErrSSM}},
		{"throttled for the whole budget", []answer{throttled}, 0, []error{ErrThrottled, ErrSSM}},
		{"5xx for the whole budget", []answer{{503, `{"__type":"InternalServerError"}`}}, 0, []error{ErrThrottled, ErrSSM}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSSM{answers: tt.answers}
			c, ft := newTimedSSM(t, f, "")
			_, _, err := c.GetParameters(context.Background(), []string{"/a"})
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err %v, want it to wrap %v", err, want)
				}
			}
			if (len(tt.wantErr) == 0) != (err == nil) {
				t.Fatalf("err %v, want errors %v", err, tt.wantErr)
			}
			if tt.calls > 0 && len(f.requests) != tt.calls {
				t.Fatalf("%d calls, want %d", len(f.requests), tt.calls)
			}
			if tt.calls == 0 && len(f.requests) <= 3 {
				t.Fatalf("%d calls for a %v budget: more than the SDK's fixed 3 fit", len(f.requests), DefaultBudget)
			}
			if got := ft.total(); got >= DefaultBudget {
				t.Fatalf("waited %v between attempts, beyond the %v budget", got, DefaultBudget)
			}
			for i, d := range ft.slept {
				if d < 0 || d > c.retry.Ceiling(i+1) {
					t.Fatalf("wait %d was %v, outside [0, %v]", i+1, d, c.retry.Ceiling(i+1))
				}
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error names the secret key: %v", err)
			}
		})
	}
}

// The waits are spread (full jitter), so the cold starts SSM throttled at
// once do not come back at once.
func TestSSMRetriesAreJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		f := &fakeSSM{answers: []answer{throttled, {200, okAnswer}}}
		c, ft := newTimedSSM(t, f, "")
		if _, _, err := c.GetParameters(context.Background(), []string{"/a"}); err != nil {
			t.Fatal(err)
		}
		seen[ft.slept[0]] = true
	}
	if len(seen) < 5 {
		t.Fatalf("20 first retries waited only %d distinct delays: %v", len(seen), seen)
	}
}

// A context deadline shorter than the budget bounds the retries.
func TestSSMBudgetFollowsContext(t *testing.T) {
	f := &fakeSSM{answers: []answer{throttled}}
	c, ft := newTimedSSM(t, f, "")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := c.GetParameters(ctx, []string{"/a"})
	if !errors.Is(err, ErrThrottled) || ft.total() >= 300*time.Millisecond {
		t.Fatalf("err %v after waiting %v, want ErrThrottled within 300ms", err, ft.total())
	}
}

func TestSSMEndpoint(t *testing.T) {
	tests := []struct {
		cfg  aws.Config
		want string
	}{
		{aws.Config{Region: "ap-northeast-1"}, "https://ssm.ap-northeast-1.amazonaws.com"},
		{aws.Config{Region: "cn-north-1"}, "https://ssm.cn-north-1.amazonaws.com.cn"},
		{aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:5000/")}, "http://127.0.0.1:5000"},
	}
	for _, tt := range tests {
		if got := NewSSM(tt.cfg).endpoint; got != tt.want {
			t.Errorf("endpoint for %s = %q, want %q", tt.cfg.Region, got, tt.want)
		}
	}
	if _, _, err := NewSSM(aws.Config{Region: "us-east-1"}).GetParameters(context.Background(), []string{"/a"}); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("no credentials: %v", err)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
