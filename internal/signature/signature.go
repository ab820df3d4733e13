// Package signature signs and verifies LINE webhook bodies.
//
// LINE puts base64(HMAC-SHA256(channel secret, raw body)) in the
// x-line-signature header. Verification accepts any of several secrets so a
// channel secret can be rotated without dropping traffic: deploy the new
// secret as current and keep the old one as previous until LINE uses the new.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"
)

// Header is the HTTP header LINE puts the signature in. Look it up
// case-insensitively: API Gateway passes header names as the client sent them.
const Header = "x-line-signature"

var encodedLen = base64.StdEncoding.EncodedLen(sha256.Size)

// Sign returns the signature LINE would send for body under secret.
func Sign(secret, body []byte) string {
	return base64.StdEncoding.EncodeToString(sum(secret, body))
}

// Verify reports whether sig is a valid signature of body under any of the
// secrets. Empty secrets are ignored, so an unset "previous" secret never
// matches. The secrets are tried in order and the first match ends the
// check: with the current secret first, a body costs one HMAC unless it was
// signed with the previous one. The comparison is constant-time per secret
// (which secret matched is not a secret).
func Verify(body []byte, sig string, secrets ...[]byte) bool {
	want, ok := decode(sig)
	if !ok {
		return false
	}
	for _, s := range secrets {
		if len(s) != 0 && hmac.Equal(want[:], sum(s, body)) {
			return true
		}
	}
	return false
}

// WellFormed reports whether sig has the shape of a LINE signature (a
// canonical, padded base64 HMAC-SHA256, 44 characters), whatever key made
// it. A webhook re-reads its secret only for a well-formed signature that
// does not verify: a missing or garbled header is no sign of a rotation.
func WellFormed(sig string) bool {
	_, ok := decode(sig)
	return ok
}

// decode reads a signature: a padded base64 HMAC-SHA256 is always 44
// characters and is accepted only in its one canonical encoding (non-zero
// padding bits would otherwise decode to the same MAC).
func decode(sig string) ([sha256.Size]byte, bool) {
	var want [sha256.Size + 1]byte
	if len(sig) != encodedLen {
		return [sha256.Size]byte{}, false
	}
	n, err := base64.StdEncoding.Strict().Decode(want[:], []byte(sig))
	if err != nil || n != sha256.Size {
		return [sha256.Size]byte{}, false
	}
	return [sha256.Size]byte(want[:sha256.Size]), true
}

func sum(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return h.Sum(nil)
}

// Verifier is Verify for a fixed list of secrets, for a webhook that checks
// every request against the same ones: each secret's keyed HMAC is kept and
// reset instead of built per request, so a check costs the body's SHA-256
// blocks and two more, and allocates nothing. It is safe for concurrent use.
type Verifier struct {
	keys []*sync.Pool // one per non-empty secret, in order; each holds hash.Hash
}

// NewVerifier returns a Verifier for secrets, tried in order (the current
// secret first); empty ones are ignored.
func NewVerifier(secrets ...[]byte) *Verifier {
	v := &Verifier{}
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		key := append([]byte(nil), s...)
		v.keys = append(v.keys, &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }})
	}
	return v
}

// Verify reports whether sig is a valid signature of body under one of the
// Verifier's secrets, as the package's Verify does.
func (v *Verifier) Verify(body []byte, sig string) bool {
	want, ok := decode(sig)
	if !ok {
		return false
	}
	for _, p := range v.keys {
		h := p.Get().(hash.Hash)
		h.Reset()
		h.Write(body)
		var got [sha256.Size]byte
		match := hmac.Equal(want[:], h.Sum(got[:0]))
		p.Put(h)
		if match {
			return true
		}
	}
	return false
}
