package linemock

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The token endpoints issue tokens as LINE does and refuse wrong
// credentials with 400 invalid_client; an issued token is accepted until it
// expires (or ExpireTokens), then answered 401.
func TestTokenEndpoints(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := New(WithClock(func() time.Time { return now }), WithChannel("123", "sec"), WithTokenTTL(time.Minute))
	srv := httptest.NewServer(s)
	defer srv.Close()
	issue := func(form url.Values) (int, map[string]any) {
		res, err := http.PostForm(srv.URL+PathTokenStateless, form)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	if st, body := issue(url.Values{"grant_type": {"client_credentials"}, "client_id": {"123"}, "client_secret": {"wrong"}}); st != 400 || body["error"] != MsgInvalidClient {
		t.Fatalf("wrong secret: %d %v", st, body)
	}
	st, body := issue(url.Values{"grant_type": {"client_credentials"}, "client_id": {"123"}, "client_secret": {"sec"}})
	if st != 200 || body["token_type"] != "Bearer" || body["expires_in"] != float64(60) {
		t.Fatalf("issue: %d %v", st, body)
	}
	tok := body["access_token"].(string)
	call := func() int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+PathBotInfo, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if c := call(); c != 200 {
		t.Fatalf("fresh token: %d", c)
	}
	now = now.Add(time.Minute)
	if c := call(); c != 401 {
		t.Fatalf("expired token: %d", c)
	}
}

// FuzzAssertion: no client assertion verifies without the registered key,
// and none makes the verifier panic.
func FuzzAssertion(f *testing.F) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	s := New(WithAssertionKey("kid", &key.PublicKey))
	f.Add(jwtBearer, "eyJhbGciOiJSUzI1NiIsImtpZCI6ImtpZCJ9.eyJpc3MiOiIxIiwic3ViIjoiMSJ9.AAAA")
	f.Add(jwtBearer, "a.b")
	f.Add("other", "x.y.z")
	f.Fuzz(func(t *testing.T, typ, jwt string) {
		if _, _, ok := s.verifyAssertion(typ, jwt); ok && !strings.Contains(jwt, ".") {
			t.Fatalf("verified %q", jwt)
		} else if ok {
			t.Fatalf("verified an assertion nobody signed: %q", jwt)
		}
	})
}
