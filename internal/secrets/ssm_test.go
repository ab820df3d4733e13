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

	"github.com/linegate/linegate/internal/backoff"
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

func newTestSSM(t *testing.T, f *fakeSSM, session string) *SSM {
	t.Helper()
	c := NewSSM(aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String("https://ssm.test"), HTTPClient: &http.Client{Transport: f},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", session)})
	c.retry = backoff.Policy{First: time.Millisecond, Max: time.Millisecond}
	c.now = func() time.Time { return signedAt }
	return c
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

func TestSSMRetries(t *testing.T) {
	throttled := answer{400, `{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`}
	denied := answer{400, `{"__type":"AccessDeniedException","message":"not authorized to perform ssm:GetParameters"}`}
	tests := []struct {
		name    string
		answers []answer
		calls   int
		wantErr error
	}{
		{"a 5xx, then fine", []answer{{500, `{}`}, {200, okAnswer}}, 2, nil},
		{"throttled, then fine", []answer{throttled, throttled, {200, okAnswer}}, 3, nil},
		{"denied: no retry", []answer{denied}, 1, ErrSSM},
		{"5xx three times: the last error", []answer{{503, `{"__type":"InternalServerError"}`}}, 3, ErrSSM},
		{"not SSM's answer", []answer{{200, `<html>`}}, 1, ErrSSM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSSM{answers: tt.answers}
			_, _, err := newTestSSM(t, f, "").GetParameters(context.Background(), []string{"/a"})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) || len(f.requests) != tt.calls {
				t.Fatalf("err %v after %d calls; want %v after %d", err, len(f.requests), tt.wantErr, tt.calls)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error names the secret key: %v", err)
			}
		})
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
