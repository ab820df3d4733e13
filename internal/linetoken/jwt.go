package linetoken

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Audience is the aud claim LINE expects in an assertion.
const Audience = "https://api.line.me/"

// Limits LINE puts on v2.1 assertions: the JWT itself may live at most 30
// minutes, the token it asks for at most 30 days.
const (
	maxAssertionLife = 30 * time.Minute
	maxTokenLife     = 30 * 24 * time.Hour
)

// AssertionKey is the private half of a channel's assertion signing key: an
// RSA key (2048 bits, RS256) and the kid LINE gave its public half.
type AssertionKey struct {
	KID string
	Key *rsa.PrivateKey
}

// ParseAssertionKey reads the private key as a JSON Web Key (kty RSA with n,
// e, d, p, q and, optionally, dp, dq, qi), as LINE's documentation
// generates it, with the kid LINE issued added to it.
func ParseAssertionKey(jwk []byte) (*AssertionKey, error) {
	var k struct {
		Kty, Alg, Kid string
		N, E, D, P, Q string
		Dp, Dq, Qi    string
	}
	if err := json.Unmarshal(jwk, &k); err != nil {
		return nil, fmt.Errorf("linetoken: assertion key is not a JSON Web Key: %w", err)
	}
	if k.Kty != "RSA" {
		return nil, fmt.Errorf("linetoken: assertion key kty %q, want RSA", k.Kty)
	}
	if k.Alg != "" && k.Alg != "RS256" {
		return nil, fmt.Errorf("linetoken: assertion key alg %q, want RS256", k.Alg)
	}
	if k.Kid == "" {
		return nil, errors.New("linetoken: assertion key has no kid: add the kid LINE issued for its public key")
	}
	ints := map[string]*big.Int{}
	for name, v := range map[string]string{"n": k.N, "e": k.E, "d": k.D, "p": k.P, "q": k.Q} {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("linetoken: assertion key field %s is missing or not base64url", name)
		}
		ints[name] = new(big.Int).SetBytes(b)
	}
	if !ints["e"].IsInt64() || ints["e"].Int64() < 3 || ints["e"].Int64() > 1<<31-1 {
		return nil, errors.New("linetoken: assertion key exponent out of range")
	}
	key := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: ints["n"], E: int(ints["e"].Int64())},
		D:         ints["d"],
		Primes:    []*big.Int{ints["p"], ints["q"]},
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("linetoken: assertion key is not a valid RSA key: %w", err)
	}
	if key.N.BitLen() < 2048 {
		return nil, fmt.Errorf("linetoken: assertion key has %d bits, LINE wants 2048", key.N.BitLen())
	}
	key.Precompute()
	return &AssertionKey{KID: k.Kid, Key: key}, nil
}

// Assertion signs the JWT that asks LINE for a v2.1 token living tokenLife
// (capped at 30 days): iss and sub are the channel ID, aud is LINE's API,
// and the JWT itself expires in 30 minutes.
func (k *AssertionKey) Assertion(channelID string, now time.Time, tokenLife time.Duration) (string, error) {
	if k == nil || k.Key == nil {
		return "", errors.New("linetoken: no assertion key")
	}
	tokenLife = min(max(tokenLife, time.Minute), maxTokenLife)
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.KID})
	claims, _ := json.Marshal(map[string]any{
		"iss": channelID, "sub": channelID, "aud": Audience,
		"exp": now.Add(maxAssertionLife).Unix(), "token_exp": int64(tokenLife / time.Second),
	})
	signing := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.Key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("linetoken: sign assertion: %w", err)
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
