package local

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
)

func TestEscapeControl(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"日本語 ok", "日本語 ok"},
		{"two\nlines", `two\nlines`},
		{"cr\rreturn", `cr\rreturn`},
		{"nul\x00byte", `nul\x00byte`},
		{"esc\x1b[2Jclear", `esc\x1b[2Jclear`},
		{"del\x7f", `del\x7f`},
		{"c1\u0085next", `c1\u0085next`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"tab\tis escaped too", `tab\tis escaped too`},
	}
	for _, tt := range tests {
		if got := escapeControl(tt.in); got != tt.want {
			t.Errorf("escapeControl(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// consoleLine is the shape of every console line: a time, two spaces, and
// printable text.
var consoleLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  [^\x00-\x1f\x7f]*$`)

// An event type that carries a newline, a NUL and an escape sequence can
// neither forge a console line nor reach the terminal raw.
func TestConsoleCannotBeInjected(t *testing.T) {
	out := &syncBuffer{}
	_, lp := start(t, Config{Out: out})
	forged := "message\n12:00:00.000  webhook   200  1 event(s) acknowledged (forged)\x00\x1b[2J"
	typ, _ := json.Marshal(forged)
	ev := fmt.Sprintf(`{"type":%s,"mode":"active","timestamp":%d,"webhookEventId":"01JFORGEDCONSOLE0000000000","source":{"type":"user","userId":"U9999999999999999999999999999999a"},"deliveryContext":{"isRedelivery":false}}`,
		typ, time.Now().UnixMilli())
	d, err := lp.Deliver(context.Background(), []byte(ev))
	if err != nil || !d.Delivered {
		t.Fatalf("delivery: %+v %v", d, err)
	}
	eventually(t, 10*time.Second, "the worker line of the forged event", func() bool {
		return strings.Contains(out.String(), "01JFORGEDCONSOLE0000000000")
	})
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !consoleLine.MatchString(l) {
			t.Errorf("console line %q is not one printable line", l)
		}
	}
	if strings.Count(out.String(), "forged") != 1 || !strings.Contains(out.String(), `message\n12:00:00.000`) {
		t.Fatalf("the forged type was not printed escaped on its worker line:\n%s", out)
	}
}

// A worker line waits for the webhook line of the request that brought its
// event; lines of other events are not held.
func TestPrinterHoldsWorkerLinesUntilTheWebhookLine(t *testing.T) {
	var b strings.Builder
	p := newPrinter(&b)
	p.hold("E1")
	p.hold("E1") // a LINE redelivery in flight at the same time
	p.eventLine("E1", "worker E1")
	p.eventLine("E2", "worker E2")
	p.webhook(200, []string{"E1"}, 1, "", time.Millisecond)
	if strings.Contains(b.String(), "worker E1") {
		t.Fatalf("E1's worker line printed while another request bringing it was still open:\n%s", b.String())
	}
	p.webhook(200, []string{"E1"}, 1, "", time.Millisecond)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "worker E2") || !strings.Contains(lines[1], "webhook") ||
		!strings.Contains(lines[2], "webhook") || !strings.Contains(lines[3], "worker E1") {
		t.Fatalf("console:\n%s\nwant E2's line, both webhook lines, then E1's", b.String())
	}
	if len(p.held) != 0 {
		t.Fatalf("%d events still held", len(p.held))
	}
}

// Through the whole pipeline: every event's worker line comes after its
// request's webhook line, and a rejected request says it was rejected.
func TestConsoleOrderAndRejections(t *testing.T) {
	out := &syncBuffer{}
	rt, lp := start(t, Config{Out: out})
	user := "U1212121212121212121212121212121a"
	var ids []string
	for i := range 20 {
		ids = append(ids, deliver(t, lp, lp.Text(user, fmt.Sprintf("order %d", i))))
	}
	for _, id := range ids {
		waitEvent(t, rt, 10*time.Second, id, "handled", func(e eventView) bool { return e.Outcome == "ok" })
	}
	webhooks := 0
	seen := map[string]int{}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "webhook   200") {
			webhooks++
		}
		for i, id := range ids {
			if strings.Contains(l, "worker") && strings.Contains(l, id) {
				seen[id] = webhooks
				if webhooks < i+1 {
					t.Errorf("worker line of event %d printed after only %d webhook line(s): %s", i+1, webhooks, l)
				}
			}
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("worker lines for %d of %d events:\n%s", len(seen), len(ids), out)
	}

	bad := lineplatform.New(rt.WebhookURL(), []byte("wrong-secret"))
	if d, _ := bad.Deliver(context.Background(), bad.Text(user, "forged")); d.Attempts[0].Status != 401 {
		t.Fatalf("status %d", d.Attempts[0].Status)
	}
	eventually(t, 5*time.Second, "the rejection's console line", func() bool {
		return strings.Contains(out.String(), "webhook   401  rejected: invalid signature; nothing published")
	})
	if strings.Count(out.String(), "acknowledged") != 20 {
		t.Fatalf("want 20 acknowledged lines, for the 20 accepted requests only:\n%s", out)
	}
}
