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
// matches. The comparison is constant-time per secret.
func Verify(body []byte, sig string, secrets ...[]byte) bool {
	// A padded base64 HMAC-SHA256 is always 44 characters; anything else is
	// rejected before decoding (and the fixed buffer below cannot overflow).
	if len(sig) != encodedLen {
		return false
	}
	var want [sha256.Size + 1]byte
	// Strict: a signature is accepted only in its one canonical encoding
	// (non-zero padding bits would otherwise decode to the same MAC).
	n, err := base64.StdEncoding.Strict().Decode(want[:], []byte(sig))
	if err != nil || n != sha256.Size {
		return false
	}
	ok := false
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		if hmac.Equal(want[:sha256.Size], sum(s, body)) {
			ok = true
		}
	}
	return ok
}

func sum(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return h.Sum(nil)
}
