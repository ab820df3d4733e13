package idempotency_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/idempotency"
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
		for _, stored := range []string{idempotency.StorageKey(k), idempotency.StorageKey(idempotency.StepKey(k, "s")), idempotency.StorageKey(idempotency.CrashKey(k)),
			idempotency.StorageKey(idempotency.EditKey("", id, k)), idempotency.StorageKey(idempotency.DebounceKey("", id, k)),
			idempotency.StorageKey(idempotency.EventKey("brand-tw", id, raw)), idempotency.StorageKey(idempotency.SessionKey("b", id))} {
			if len(stored) > idempotency.MaxKeyBytes || stored == "" {
				t.Fatalf("stored key of a %d-byte id is %d bytes; want 1 to %d", len(id), len(stored), idempotency.MaxKeyBytes)
			}
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

func TestStorageKey(t *testing.T) {
	atLimit := strings.Repeat("k", idempotency.MaxKeyBytes)
	over := atLimit + "x"
	sum := sha256.Sum256([]byte(over))
	tests := []struct {
		name, key, want string
	}{
		{"short key verbatim", "01FZ74ASS536FW97EX38NKCZQK", "01FZ74ASS536FW97EX38NKCZQK"},
		{"at the limit verbatim", atLimit, atLimit},
		{"one byte over hashed", over, "hashed:" + hex.EncodeToString(sum[:])},
		// DynamoDB counts UTF-8 bytes, not characters: 683 three-byte runes are 2049 bytes.
		{"multi-byte over hashed", strings.Repeat("日", 683), idempotency.StorageKey(strings.Repeat("日", 683))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := idempotency.StorageKey(tt.key)
			if got != tt.want {
				t.Fatalf("StorageKey = %.80q; want %.80q", got, tt.want)
			}
			if len(got) > idempotency.MaxKeyBytes {
				t.Fatalf("stored key is %d bytes", len(got))
			}
		})
	}
	if k := idempotency.StorageKey(strings.Repeat("日", 683)); !strings.HasPrefix(k, "hashed:") {
		t.Fatalf("a 2049-byte key of multi-byte runes was stored as %.40q…; want it hashed", k)
	}
	if idempotency.StorageKey(over) == idempotency.StorageKey(atLimit+"y") {
		t.Fatal("two long keys differing in their last byte share a stored key")
	}
}

func TestKeyBuildersKeepKindsApart(t *testing.T) {
	ev := "01FZ74ASS536FW97EX38NKCZQK"
	keys := []string{
		idempotency.Key(ev, nil),
		idempotency.StepKey(ev, "charge"),
		idempotency.StepKey(ev, "reply"),
		idempotency.SessionKey("", "U4af4980629a0e3c1b2d5f6e7a8b9c0d1"),
		idempotency.CrashKey(ev),
		idempotency.EditKey("", "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f", "325708"),
		idempotency.DebounceKey("", "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f", "text:ask"),
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("two kinds of item share the key %q", k)
		}
		seen[k] = true
	}
	if got := idempotency.CrashKey(ev); got != "crash#"+ev {
		t.Fatalf("CrashKey = %q; want crash#<webhookEventId> (ADR 3)", got)
	}
}

// Every key is scoped by channel, and the default channel's are the keys a
// stack without channels wrote (golden: an upgrade keeps its sessions,
// completed markers, steps, edits and debounce buffers). Two channels'
// keys of the same event or chat never meet, nor meet the default's.
func TestKeysAreScopedByChannel(t *testing.T) {
	const ev, user, group = "01FZ74ASS536FW97EX38NKCZQK", "U4af4980629a0e3c1b2d5f6e7a8b9c0d1", "Ca56f94637c1d5e6b2a7f4e9c0d1b2a3f"
	raw := []byte(`{"type":"unfollow"}`)
	kinds := func(ch string) map[string]string {
		k := idempotency.EventKey(ch, ev, nil)
		return map[string]string{
			"event":       k,
			"event no id": idempotency.EventKey(ch, "", raw),
			"step":        idempotency.StepKey(k, "charge"),
			"crash":       idempotency.CrashKey(k),
			"reply":       idempotency.ReplyKey(k),
			"session":     idempotency.SessionKey(ch, user),
			"edit":        idempotency.EditKey(ch, group, "325708"),
			"debounce":    idempotency.DebounceKey(ch, group, "text:ask"),
		}
	}
	sum := sha256.Sum256(raw)
	golden := map[string]string{
		"event":       ev,
		"event no id": "sha256:" + hex.EncodeToString(sum[:]),
		"step":        "step#" + ev + "#charge",
		"crash":       "crash#" + ev,
		"reply":       "reply#" + ev,
		"session":     "session#" + user,
		"edit":        "edit#" + group + "#325708",
		"debounce":    "debounce#" + group + "#text:ask",
	}
	for kind, k := range kinds("") {
		if k != golden[kind] {
			t.Errorf("default channel %s key %q, want %q (what a stack without channels wrote)", kind, k, golden[kind])
		}
	}
	seen := map[string]string{}
	for _, ch := range []string{"", "b", "brand-tw", "b2"} {
		for kind, k := range kinds(ch) {
			if prev, dup := seen[k]; dup {
				t.Errorf("channel %q %s key %q is also %s's", ch, kind, k, prev)
			}
			seen[k] = ch + " " + kind
		}
	}
	if got := idempotency.SessionKey("b", user); got != "session#ch:b/"+user {
		t.Errorf("channel b's session key %q", got)
	}
}
