package linetoken

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Endpoint is where tokens are minted: LINE's API base URL (or linemock's)
// and the HTTP client to reach it.
type Endpoint struct {
	BaseURL string
	HTTP    *http.Client
}

// Stateless returns a Minter of stateless channel access tokens from the
// channel ID and secret (POST /oauth2/v3/token, client_secret variant).
func (e Endpoint) Stateless(channelID, channelSecret string) Minter {
	return func(ctx context.Context) (string, time.Duration, error) {
		return e.post(ctx, PathStateless, url.Values{
			"grant_type": {"client_credentials"}, "client_id": {channelID}, "client_secret": {channelSecret},
		})
	}
}

// V21 returns a Minter of channel access tokens v2.1 (POST
// /oauth2/v2.1/token): each mint signs a fresh JWT with key, asking for a
// token that lives tokenLife.
func (e Endpoint) V21(channelID string, key *AssertionKey, tokenLife time.Duration, now func() time.Time) Minter {
	if now == nil {
		now = time.Now
	}
	return func(ctx context.Context) (string, time.Duration, error) {
		jwt, err := key.Assertion(channelID, now(), tokenLife)
		if err != nil {
			return "", 0, err
		}
		return e.post(ctx, PathV21, url.Values{
			"grant_type":            {"client_credentials"},
			"client_assertion_type": {AssertionType},
			"client_assertion":      {jwt},
		})
	}
}

// AssertionType is the client_assertion_type of JWT assertions.
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// maxTokenBody bounds a token endpoint's answer.
const maxTokenBody = 64 << 10

func (e Endpoint) post(ctx context.Context, path string, form url.Values) (string, time.Duration, error) {
	hc := e.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.BaseURL, "/")+path, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("linetoken: %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := hc.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("linetoken: %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxTokenBody))
	if err != nil {
		return "", 0, fmt.Errorf("linetoken: %s: read answer: %w", path, err)
	}
	tok, ttl, err := ParseTokenResponse(res.StatusCode, body)
	if err != nil {
		return "", 0, fmt.Errorf("linetoken: %s: %w", path, err)
	}
	return tok, ttl, nil
}

// ParseTokenResponse reads a token endpoint's answer: on 200 the
// access_token and its lifetime (expires_in seconds), otherwise an *Error
// with LINE's error and error_description.
func ParseTokenResponse(status int, body []byte) (string, time.Duration, error) {
	if status != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		return "", 0, &Error{Status: status, Code: e.Error, Description: e.Description}
	}
	var ok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &ok); err != nil {
		return "", 0, fmt.Errorf("answer is not a token response: %w", err)
	}
	if ok.AccessToken == "" || ok.ExpiresIn <= 0 || ok.ExpiresIn > 366*24*3600 {
		return "", 0, fmt.Errorf("answer has no token or an impossible lifetime (%d s)", ok.ExpiresIn)
	}
	if ok.TokenType != "" && !strings.EqualFold(ok.TokenType, "Bearer") {
		return "", 0, fmt.Errorf("token type %q, want Bearer", ok.TokenType)
	}
	return ok.AccessToken, time.Duration(ok.ExpiresIn) * time.Second, nil
}
