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
	budget   time.Duration
	attempt  time.Duration
	now      func() time.Time                                 // signing time
	clock    func() time.Time                                 // the budget's clock
	sleep    func(ctx context.Context, d time.Duration) error // between attempts
}

// Parameter Store answers at most 40 GetParameters calls per second per
// account and region by default, shared by every function
// (https://docs.aws.amazon.com/general/latest/gr/ssm.html), and a burst of
// cold starts asks for more at once. A throttled call is therefore tried
// again, with full-jitter exponential backoff, for as long as DefaultBudget
// allows rather than a fixed three times: Lambda gives a function's INIT 10
// seconds, and the budget leaves the rest of the INIT room within them.
const (
	// DefaultBudget bounds one GetParameters call, retries included.
	DefaultBudget = 6 * time.Second
	// attemptTimeout bounds one attempt, so a stalled connection does not
	// spend the budget alone.
	attemptTimeout = 2 * time.Second
)

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
		retry:  backoff.Policy{First: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full},
		budget: DefaultBudget, attempt: attemptTimeout, now: time.Now, clock: time.Now, sleep: backoff.Sleep}
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
	// ErrThrottled means SSM throttled (or failed) every attempt until the
	// call's budget ran out: too many cold starts at once for the account's
	// Parameter Store throughput (see docs/capacity.md).
	ErrThrottled = errors.New("ssm throttled every attempt within the budget")
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
// call, a 5xx or a broken connection is tried again with full-jitter
// exponential backoff (100 ms doubling to 2 s) until the call's budget
// (DefaultBudget, or what is left before ctx's deadline when less: a
// re-read while LINE waits has little) runs out; then the error
// wraps ErrThrottled and the last answer. An error SSM answered with wraps
// ErrSSM and is not tried again.
func (c *SSM) GetParameters(ctx context.Context, names []string) (map[string]string, []string, error) {
	if c.creds == nil {
		return nil, nil, fmt.Errorf("ssm GetParameters: %w", ErrNoCredentials)
	}
	body, err := json.Marshal(getParametersInput{Names: names, WithDecryption: true})
	if err != nil {
		return nil, nil, fmt.Errorf("ssm GetParameters: %w", err)
	}
	budget := c.budget
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	end := c.clock().Add(budget)
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, min(c.attempt, max(end.Sub(c.clock()), time.Millisecond)))
		out, retry, err := c.getParameters(actx, body)
		acancel()
		if err == nil {
			values := make(map[string]string, len(out.Parameters))
			for _, p := range out.Parameters {
				values[p.Name] = p.Value
			}
			return values, out.InvalidParameters, nil
		}
		if !retry {
			return nil, nil, fmt.Errorf("ssm GetParameters (attempt %d): %w", attempt, err)
		}
		wait := c.retry.Delay(attempt)
		if left := end.Sub(c.clock()); wait >= left || ctx.Err() != nil {
			return nil, nil, fmt.Errorf("ssm GetParameters: %w (%d attempts in %v): %w", ErrThrottled, attempt, c.budget, err)
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, nil, fmt.Errorf("ssm GetParameters: %w (%d attempts): %w", ErrThrottled, attempt, errors.Join(err, serr))
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
		// A broken connection or this attempt's own timeout: another may
		// succeed; the call's budget decides.
		return out, true, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, true, fmt.Errorf("read the answer: %w", err)
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
