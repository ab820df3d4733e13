package secrets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/linegate/linegate/internal/backoff"
)

// SSM makes the one SSM call a function needs at start, GetParameters with
// decryption, signed with the SDK's SigV4 signer. It stands in for the
// SDK's SSM client, whose package builds the schemas of SSM's whole API at
// process start: about 1.3 ms of every function's INIT, and another
// millisecond or two on the first call, for one call a container makes
// once. It is safe for concurrent use.
type SSM struct {
	endpoint string
	region   string
	creds    aws.CredentialsProvider
	http     aws.HTTPClient
	signer   *v4.Signer
	retry    backoff.Policy
	now      func() time.Time
}

// ssmAttempts bounds the attempts of one call (the SDK's default: 3).
const ssmAttempts = 3

// NewSSM returns the client for cfg's region, credentials and HTTP client.
// Its endpoint is cfg.BaseEndpoint (AWS_ENDPOINT_URL: moto_server,
// LocalStack) when set, else SSM's regional endpoint
// (https://ssm.<region>.amazonaws.com, .amazonaws.com.cn in China).
func NewSSM(cfg aws.Config) *SSM {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &SSM{endpoint: ssmEndpoint(cfg), region: cfg.Region, creds: cfg.Credentials, http: hc, signer: v4.NewSigner(),
		retry: backoff.Policy{First: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: backoff.Full}, now: time.Now}
}

func ssmEndpoint(cfg aws.Config) string {
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		return strings.TrimRight(*cfg.BaseEndpoint, "/")
	}
	suffix := "amazonaws.com"
	if strings.HasPrefix(cfg.Region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return "https://ssm." + cfg.Region + "." + suffix
}

// Errors the client returns; callers branch with errors.Is.
var (
	// ErrSSM wraps an error SSM answered with (its type and message in
	// the text): AccessDeniedException, a KMS key that cannot decrypt, ...
	ErrSSM = errors.New("ssm refused the call")
	// ErrNoCredentials means the configuration has no credentials.
	ErrNoCredentials = errors.New("no AWS credentials")
)

type getParametersInput struct {
	Names          []string `json:"Names"`
	WithDecryption bool     `json:"WithDecryption"`
}

type getParametersOutput struct {
	Parameters []struct {
		Name  string `json:"Name"`
		Value string `json:"Value"`
	} `json:"Parameters"`
	InvalidParameters []string `json:"InvalidParameters"`
}

// GetParameters reads the named parameters, SecureStrings decrypted, in one
// call: their values by name, and the names SSM does not know. A throttled
// call, a 5xx or a broken connection is tried again (3 attempts in all,
// with backoff); an error SSM answered with wraps ErrSSM.
func (c *SSM) GetParameters(ctx context.Context, names []string) (map[string]string, []string, error) {
	if c.creds == nil {
		return nil, nil, fmt.Errorf("ssm GetParameters: %w", ErrNoCredentials)
	}
	body, err := json.Marshal(getParametersInput{Names: names, WithDecryption: true})
	if err != nil {
		return nil, nil, fmt.Errorf("ssm GetParameters: %w", err)
	}
	for attempt := 1; ; attempt++ {
		out, retry, err := c.getParameters(ctx, body)
		if err == nil {
			values := make(map[string]string, len(out.Parameters))
			for _, p := range out.Parameters {
				values[p.Name] = p.Value
			}
			return values, out.InvalidParameters, nil
		}
		if !retry || attempt == ssmAttempts {
			return nil, nil, fmt.Errorf("ssm GetParameters (attempt %d): %w", attempt, err)
		}
		if serr := backoff.Sleep(ctx, c.retry.Delay(attempt)); serr != nil {
			return nil, nil, fmt.Errorf("ssm GetParameters (attempt %d): %w", attempt, errors.Join(err, serr))
		}
	}
}

// getParameters makes one attempt; retry says whether another may succeed.
func (c *SSM) getParameters(ctx context.Context, body []byte) (getParametersOutput, bool, error) {
	var out getParametersOutput
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return out, false, fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return out, false, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameters")
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "ssm", c.region, c.now().UTC()); err != nil {
		return out, false, fmt.Errorf("sign: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return out, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, ctx.Err() == nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		typ := e.Type[strings.LastIndexByte(e.Type, '#')+1:]
		retry := resp.StatusCode >= 500 || strings.Contains(typ, "Throttl")
		return out, retry, fmt.Errorf("%w: HTTP %d %s: %s", ErrSSM, resp.StatusCode, typ, e.Message)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, false, fmt.Errorf("%w: an answer that is not GetParameters': %v", ErrSSM, err)
	}
	return out, false, nil
}
