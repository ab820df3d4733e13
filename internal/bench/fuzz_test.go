package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// The handler reads the text LINE delivers: whatever it accepts must be the
// canonical "<kind>:<n>" of exactly one event, so no two texts count as
// the same event.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{"bench:0", "flaky:17", "poison:3", "bench:007", "bench:-1", "hello", "bench:", ":1", "bench:1:2", "bench: 1", "BENCH:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		kind, n, ok := parseText(text)
		if !ok {
			return
		}
		if n < 0 || eventText(kind, n) != text {
			t.Fatalf("%q parsed as %s/%d, which formats as %q", text, kind, n, eventText(kind, n))
		}
	})
}

// The accounting reads the messages each LINE mock recorded: only the
// handler's exact "done <n>" text object counts, once, for event n.
func FuzzParseDone(f *testing.F) {
	for _, s := range []string{`{"type":"text","text":"done 1"}`, `{"type":"text","text":"done 01"}`, `{"type":"flex","text":"done 1"}`,
		`{"type":"text","text":"done -2"}`, `{"text":"done 3"}`, `[]`, `{"type":"text","text":"done 9999999999999999999999"}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, ok := parseDone(raw)
		if !ok {
			return
		}
		var m struct{ Type, Text string }
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		if n < 0 || m.Type != "text" || m.Text != doneText(n) || !strings.HasPrefix(m.Text, "done ") {
			t.Fatalf("%q parsed as %d", raw, n)
		}
	})
}
