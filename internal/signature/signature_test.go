package signature

import (
	"strings"
	"testing"
)

// LINE's documented example shape: base64 of HMAC-SHA256, 44 characters.
func TestSignAndVerify(t *testing.T) {
	body := []byte(`{"destination":"U1","events":[]}`)
	cur, prev := []byte("current-secret"), []byte("previous-secret")
	sig := Sign(cur, body)
	if len(sig) != 44 || !strings.HasSuffix(sig, "=") {
		t.Fatalf("signature %q is not base64 of 32 bytes", sig)
	}
	tests := []struct {
		name    string
		sig     string
		body    []byte
		secrets [][]byte
		want    bool
	}{
		{"current secret", sig, body, [][]byte{cur}, true},
		{"previous secret accepted too", Sign(prev, body), body, [][]byte{cur, prev}, true},
		{"empty secrets ignored", sig, body, [][]byte{nil, {}, cur}, true},
		{"no secret", sig, body, nil, false},
		{"only empty secrets", Sign(nil, body), body, [][]byte{{}}, false},
		{"other secret", Sign([]byte("x"), body), body, [][]byte{cur, prev}, false},
		{"other body", sig, []byte(`{}`), [][]byte{cur}, false},
		{"empty signature", "", body, [][]byte{cur}, false},
		{"not base64", strings.Repeat("!", 44), body, [][]byte{cur}, false},
		{"too short", sig[:43], body, [][]byte{cur}, false},
		{"too long", sig + "AAAA", body, [][]byte{cur}, false},
		{"decodes to 33 bytes", strings.Repeat("A", 44), body, [][]byte{cur}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.body, tt.sig, tt.secrets...); got != tt.want {
				t.Fatalf("Verify = %v, want %v", got, tt.want)
			}
			v := NewVerifier(tt.secrets...)
			for range 3 { // the kept HMAC state is reset between checks
				if got := v.Verify(tt.body, tt.sig); got != tt.want {
					t.Fatalf("Verifier.Verify = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// FuzzVerify: arbitrary signatures never panic and never verify unless they
// are the real signature.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"events":[]}`), "")
	f.Add([]byte(`{}`), Sign([]byte("s"), []byte(`{}`)))
	f.Add([]byte(`x`), strings.Repeat("=", 44))
	v := NewVerifier([]byte("other"), []byte("s"))
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		ok := Verify(body, sig, []byte("s"))
		if ok != (sig == Sign([]byte("s"), body)) {
			t.Fatalf("Verify(%q, %q) = %v", body, sig, ok)
		}
		if v.Verify(body, sig) != ok {
			t.Fatalf("Verifier.Verify(%q, %q) = %v, Verify %v", body, sig, !ok, ok)
		}
	})
}

// WellFormed tells a signature any key could have made from a header that
// is missing or garbled.
func TestWellFormed(t *testing.T) {
	sig := Sign([]byte("any key"), []byte(`{}`))
	for _, tt := range []struct {
		sig  string
		want bool
	}{
		{sig, true},
		{Sign([]byte("another key"), []byte(`{"events":[]}`)), true},
		{"", false},
		{sig[:43], false},
		{sig + "=", false},
		{strings.Repeat("!", 44), false},
		{strings.Repeat("A", 44), false}, // 33 bytes
		{sig[:42] + "B=", false},         // non-zero padding bits: not the canonical encoding
	} {
		if got := WellFormed(tt.sig); got != tt.want {
			t.Errorf("WellFormed(%q) = %v, want %v", tt.sig, got, tt.want)
		}
	}
}
