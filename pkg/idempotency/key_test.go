package idempotency_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/linegate/linegate/pkg/idempotency"
)

func TestKey(t *testing.T) {
	raw := []byte(`{"type":"message","timestamp":1}`)
	sum := sha256.Sum256(raw)
	tests := []struct {
		name string
		id   string
		raw  []byte
		want string
	}{
		{"webhookEventId wins", "01FZ74ASS536FW97EX38NKCZQK", raw, "01FZ74ASS536FW97EX38NKCZQK"},
		{"id ignores body", "01FZ74ASS536FW97EX38NKCZQK", []byte(`{}`), "01FZ74ASS536FW97EX38NKCZQK"},
		{"no id hashes raw", "", raw, "sha256:" + hex.EncodeToString(sum[:])},
		{"empty raw", "", nil, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idempotency.Key(tt.id, tt.raw); got != tt.want {
				t.Fatalf("Key = %q; want %q", got, tt.want)
			}
		})
	}
	if idempotency.Key("", []byte(`{"a":1}`)) == idempotency.Key("", []byte(`{"a":2}`)) {
		t.Fatal("different raw events share a key")
	}
}

// FuzzKey checks Key on arbitrary outside input: deterministic, the id
// verbatim when present, otherwise a well-formed digest of the bytes.
func FuzzKey(f *testing.F) {
	f.Add("", []byte(`{"type":"message"}`))
	f.Add("01FZ74ASS536FW97EX38NKCZQK", []byte(`{"webhookEventId":"01FZ74ASS536FW97EX38NKCZQK"}`))
	f.Add("", []byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, id string, raw []byte) {
		k := idempotency.Key(id, raw)
		if k != idempotency.Key(id, append([]byte(nil), raw...)) {
			t.Fatal("Key is not deterministic")
		}
		if id != "" {
			if k != id {
				t.Fatalf("Key = %q; want the id %q", k, id)
			}
			return
		}
		hexPart, ok := strings.CutPrefix(k, "sha256:")
		if !ok || len(hexPart) != 64 {
			t.Fatalf("Key = %q; want sha256:<64 hex>", k)
		}
		if _, err := hex.DecodeString(hexPart); err != nil {
			t.Fatalf("Key = %q: %v", k, err)
		}
	})
}
