package coldstart

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// The parameters WithSSM creates, and their values.
const (
	SecretParam = "/linegate/coldstart/channel-secret"
	TokenParam  = "/linegate/coldstart/channel-access-token"
)

// ssmEndpoint is an SSM endpoint (moto_server) behind a proxy that adds up
// how long the SSM calls through it took: the time a starting function
// waited on the endpoint.
type ssmEndpoint struct {
	proxy    *httptest.Server
	mu       sync.Mutex
	wait     time.Duration
	throttle int // SSM calls answered ThrottlingException after each reset
	calls    int // SSM calls since the last reset
}

// startSSM creates the parameters on endpoint and starts the proxy, which
// throttles the first throttle SSM calls of every start as Parameter Store
// does past its throughput (HTTP 400, ThrottlingException).
func startSSM(ctx context.Context, endpoint string, throttle int) (*ssmEndpoint, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("ssm endpoint %q: %w", endpoint, err)
	}
	api := ssm.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("coldstart", "coldstart", "")})
	for name, value := range map[string]string{SecretParam: "coldstart-channel-secret", TokenParam: "coldstart-channel-access-token"} {
		if _, err := api.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value),
			Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
			return nil, fmt.Errorf("create %s on %s: %w", name, endpoint, err)
		}
	}
	// One read first, so the endpoint's own first-call costs are not a
	// function's.
	if _, err := api.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{SecretParam, TokenParam}, WithDecryption: aws.Bool(true)}); err != nil {
		return nil, fmt.Errorf("read the parameters back from %s: %w", endpoint, err)
	}
	e := &ssmEndpoint{throttle: throttle}
	rp := httputil.NewSingleHostReverseProxy(target)
	e.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		ssmCall := strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
		e.mu.Lock()
		throttled := ssmCall && e.calls < e.throttle
		if ssmCall {
			e.calls++
		}
		e.mu.Unlock()
		if throttled {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`))
		} else {
			rp.ServeHTTP(w, r)
		}
		if ssmCall {
			e.mu.Lock()
			e.wait += time.Since(began)
			e.mu.Unlock()
		}
	}))
	return e, nil
}

// env names the parameters and points the function's AWS calls at the
// proxy.
func (e *ssmEndpoint) env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":                e.proxy.URL,
		"LINE_CHANNEL_SECRET_PARAM":       SecretParam,
		"LINE_CHANNEL_SECRET":             "",
		"LINE_CHANNEL_ACCESS_TOKEN_PARAM": TokenParam,
		"LINE_CHANNEL_ACCESS_TOKEN":       "",
	}
}

// reset starts a new start's count (nil: no endpoint).
func (e *ssmEndpoint) reset() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.wait, e.calls = 0, 0
	e.mu.Unlock()
}

// waited is the SSM time since reset (0 for no endpoint).
func (e *ssmEndpoint) waited() time.Duration {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wait
}

func (e *ssmEndpoint) close() { e.proxy.Close() }
