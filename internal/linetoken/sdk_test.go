package linetoken_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/channel_access_token"

	"github.com/linegate/linegate/internal/linetoken"
)

// tokenRequest is what a token endpoint received.
type tokenRequest struct {
	path, contentType string
	form              url.Values
}

// capture is a token endpoint that records each request and answers with
// a stateless token.
func capture(t *testing.T) (string, func() []tokenRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []tokenRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("form: %v", err)
		}
		mu.Lock()
		got = append(got, tokenRequest{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), form: r.PostForm})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token_type":"Bearer","access_token":"tok","expires_in":900,"key_id":"k"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []tokenRequest { mu.Lock(); defer mu.Unlock(); return append([]tokenRequest(nil), got...) }
}

// linetoken mints tokens with its own requests; line-bot-sdk-go v8.22.0
// (whose channel-access-token calls were fixed in v8.20.0: snake_case
// parameters, and the stateless-token helpers) is LINE's own client. Both
// must send the same request: the same path and content type, and every
// form field linetoken sends with the value the SDK sends (the SDK also
// sends the other variant's fields, empty).
func TestMintRequestsMatchTheSDK(t *testing.T) {
	_, jwk := newKey(t, "kid-1")
	key, err := linetoken.ParseAssertionKey(jwk)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Unix(1_800_000_000, 0) }
	assertion, err := key.Assertion(channelID, clock(), 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ours func(base string) error
		sdk  func(api *channel_access_token.ChannelAccessTokenAPI) error
	}{
		{"stateless by client secret",
			func(base string) error {
				_, _, err := linetoken.Endpoint{BaseURL: base}.Stateless(channelID, channelSecret)(context.Background())
				return err
			},
			func(api *channel_access_token.ChannelAccessTokenAPI) error {
				_, err := api.IssueStatelessChannelTokenByClientSecret(channelID, channelSecret)
				return err
			}},
		{"v2.1 by JWT assertion",
			func(base string) error {
				_, _, err := linetoken.Endpoint{BaseURL: base}.V21(channelID, key, 30*24*time.Hour, clock)(context.Background())
				return err
			},
			func(api *channel_access_token.ChannelAccessTokenAPI) error {
				_, err := api.IssueChannelTokenByJWT("client_credentials", linetoken.AssertionType, assertion)
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, got := capture(t)
			if err := tt.ours(base); err != nil {
				t.Fatalf("linetoken: %v", err)
			}
			api, err := channel_access_token.NewChannelAccessTokenAPI(channel_access_token.WithEndpoint(base))
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.sdk(api); err != nil {
				t.Fatalf("SDK: %v", err)
			}
			reqs := got()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			ours, sdk := reqs[0], reqs[1]
			if ours.path != sdk.path || ours.contentType != sdk.contentType {
				t.Fatalf("linetoken posts %s (%s); the SDK %s (%s)", ours.path, ours.contentType, sdk.path, sdk.contentType)
			}
			for k, v := range ours.form {
				if sdk.form.Get(k) != v[0] {
					t.Errorf("field %s: linetoken sends %q, the SDK %q", k, v[0], sdk.form.Get(k))
				}
			}
			for k, v := range sdk.form {
				if v[0] != "" && ours.form.Get(k) == "" {
					t.Errorf("the SDK sends %s=%q, linetoken does not", k, v[0])
				}
			}
		})
	}
}
