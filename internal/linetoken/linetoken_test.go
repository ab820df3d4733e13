package linetoken_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/linetoken"
	"github.com/linegate/linegate/internal/testclock"
)

const (
	channelID     = "1234567890"
	channelSecret = "channel-secret-for-tests"
)

func mock(t *testing.T, opts ...linemock.Option) (*linemock.Server, string) {
	t.Helper()
	m := linemock.New(opts...)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// A stateless token is minted once, cached while fresh, minted again once
// it is within its refresh margin of expiry, and LINE's credentials check
// decides whether minting works at all.
func TestStatelessTokensCachedAndRefreshedBeforeExpiry(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	m, url := mock(t, linemock.WithClock(clk.Now), linemock.WithChannel(channelID, channelSecret))
	src := linetoken.NewMinted(linetoken.Endpoint{BaseURL: url}.Stateless(channelID, channelSecret), clk.Now)
	ctx := context.Background()
	first, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Expiry().Sub(clk.Now()); got != linemock.StatelessTokenTTL {
		t.Fatalf("token lives %v, want LINE's %v", got, linemock.StatelessTokenTTL)
	}
	clk.Advance(10 * time.Minute)
	if again, _ := src.Token(ctx); again != first || m.IssuedTokens() != 1 {
		t.Fatalf("token re-minted while fresh: %q vs %q, %d issued", again, first, m.IssuedTokens())
	}
	clk.Advance(3 * time.Minute) // 2 minutes before expiry: inside the margin
	second, err := src.Token(ctx)
	if err != nil || second == first || m.IssuedTokens() != 2 {
		t.Fatalf("token not refreshed before expiry: %q (first %q), err %v, %d issued", second, first, err, m.IssuedTokens())
	}

	bad := linetoken.NewMinted(linetoken.Endpoint{BaseURL: url}.Stateless(channelID, "wrong"), clk.Now)
	_, err = bad.Token(ctx)
	var pe interface{ Permanent() bool }
	if !errors.Is(err, linetoken.ErrCredentials) || !errors.As(err, &pe) || !pe.Permanent() {
		t.Fatalf("wrong secret: err %v, want a permanent ErrCredentials", err)
	}
}

// Refresh replaces the token LINE refused, but a client holding an older
// token does not make the source mint twice.
func TestMintedRefreshOnlyReplacesTheStaleToken(t *testing.T) {
	var n atomic.Int32
	src := linetoken.NewMinted(func(context.Context) (string, time.Duration, error) {
		return "t" + string(rune('0'+n.Add(1))), time.Hour, nil
	}, nil)
	ctx := context.Background()
	t1, _ := src.Token(ctx)
	t2, _ := src.Refresh(ctx, t1)
	t3, _ := src.Refresh(ctx, t1) // a second client refused the same old token
	if t1 == t2 || t2 != t3 || n.Load() != 2 {
		t.Fatalf("tokens %q %q %q after %d mints, want one refresh", t1, t2, t3, n.Load())
	}
}

// The long-lived token is read once and read again when LINE refuses it:
// a token rotated in SSM takes effect without a redeploy.
func TestRereadPicksUpARotatedToken(t *testing.T) {
	stored := "old-token"
	reads := 0
	src := linetoken.NewReread(func(context.Context) (string, error) { reads++; return stored, nil })
	ctx := context.Background()
	if tok, _ := src.Token(ctx); tok != "old-token" {
		t.Fatal(tok)
	}
	_, _ = src.Token(ctx)
	stored = "new-token"
	tok, err := src.Refresh(ctx, "old-token")
	if err != nil || tok != "new-token" || reads != 2 {
		t.Fatalf("refresh gave %q, err %v after %d reads; want the rotated token after 2", tok, err, reads)
	}
}

// A v2.1 token is minted with a JWT signed by the assertion key; the mock
// verifies the signature and the claims, and refuses another key.
func TestV21TokensMintedWithSignedAssertion(t *testing.T) {
	key, jwk := newKey(t, "kid-1")
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, url := mock(t, linemock.WithChannel(channelID, channelSecret), linemock.WithAssertionKey("kid-1", &key.PublicKey))
	ak, err := linetoken.ParseAssertionKey(jwk)
	if err != nil {
		t.Fatal(err)
	}
	src := linetoken.NewMinted(linetoken.Endpoint{BaseURL: url}.V21(channelID, ak, 20*time.Minute, nil), nil)
	if _, err := src.Token(context.Background()); err != nil {
		t.Fatalf("v2.1 token: %v", err)
	}
	if got := time.Until(src.Expiry()); got < 19*time.Minute || got > 20*time.Minute {
		t.Fatalf("token lives %v, want the 20 minutes asked for", got)
	}
	forged := &linetoken.AssertionKey{KID: "kid-1", Key: other}
	_, err = linetoken.NewMinted(linetoken.Endpoint{BaseURL: url}.V21(channelID, forged, time.Hour, nil), nil).Token(context.Background())
	if !errors.Is(err, linetoken.ErrCredentials) {
		t.Fatalf("assertion signed by another key: err %v, want ErrCredentials", err)
	}
}

func TestParseAssertionKeyRefusesBadKeys(t *testing.T) {
	_, good := newKey(t, "k")
	var m map[string]any
	_ = json.Unmarshal(good, &m)
	cases := map[string]func(map[string]any){
		"no kid":    func(m map[string]any) { delete(m, "kid") },
		"EC":        func(m map[string]any) { m["kty"] = "EC" },
		"HS256":     func(m map[string]any) { m["alg"] = "HS256" },
		"no d":      func(m map[string]any) { delete(m, "d") },
		"wrong p":   func(m map[string]any) { m["p"] = m["q"] },
		"not b64":   func(m map[string]any) { m["n"] = "!!" },
		"short key": nil,
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			var raw []byte
			if mutate == nil {
				small, _ := rsa.GenerateKey(rand.Reader, 1024)
				raw = jwkOf(small, "k")
			} else {
				c := map[string]any{}
				for k, v := range m {
					c[k] = v
				}
				mutate(c)
				raw, _ = json.Marshal(c)
			}
			if _, err := linetoken.ParseAssertionKey(raw); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := linetoken.ParseAssertionKey(good); err != nil {
		t.Fatalf("good key refused: %v", err)
	}
}

func TestParseTokenResponse(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   time.Duration
		perm   bool
		ok     bool
	}{
		{"stateless", 200, `{"token_type":"Bearer","access_token":"abc","expires_in":899}`, 899 * time.Second, false, true},
		{"invalid client", 400, `{"error":"invalid_client","error_description":"bad"}`, 0, true, false},
		{"server error", 500, `oops`, 0, false, false},
		{"no token", 200, `{"expires_in":899}`, 0, false, false},
		{"mac token", 200, `{"token_type":"MAC","access_token":"a","expires_in":9}`, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, ttl, err := linetoken.ParseTokenResponse(tt.status, []byte(tt.body))
			if (err == nil) != tt.ok || ttl != tt.want || (tt.ok && tok == "") {
				t.Fatalf("got %q %v %v", tok, ttl, err)
			}
			if errors.Is(err, linetoken.ErrCredentials) != tt.perm {
				t.Fatalf("err %v: credentials refusal %v, want %v", err, !tt.perm, tt.perm)
			}
		})
	}
}

// FuzzParseTokenResponse: whatever a token endpoint answers, the parser
// never panics and never returns a token without a positive lifetime.
func FuzzParseTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"token_type":"Bearer","access_token":"abc","expires_in":899}`))
	f.Add(400, []byte(`{"error":"invalid_client"}`))
	f.Add(200, []byte(`{"access_token":"a","expires_in":-1}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		tok, ttl, err := linetoken.ParseTokenResponse(status, body)
		if err == nil && (tok == "" || ttl <= 0) {
			t.Fatalf("token %q lifetime %v without error", tok, ttl)
		}
	})
}

func newKey(t *testing.T, kid string) (*rsa.PrivateKey, []byte) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k, jwkOf(k, kid)
}

func jwkOf(k *rsa.PrivateKey, kid string) []byte {
	enc := func(b *big.Int) string { return base64.RawURLEncoding.EncodeToString(b.Bytes()) }
	b, _ := json.Marshal(map[string]string{
		"kty": "RSA", "alg": "RS256", "kid": kid, "n": enc(k.N), "e": enc(big.NewInt(int64(k.E))),
		"d": enc(k.D), "p": enc(k.Primes[0]), "q": enc(k.Primes[1]),
	})
	return b
}
