package compose

import (
	"io"
	"log/slog"
	"testing"

	"github.com/linegate/linegate/internal/testio"
)

// Every client a process builds for LINE calls shares one keep-alive pool:
// a burst of 10 calls dials 10 connections once, and the next burst, from
// another function's client too, dials none.
func TestClientsShareOneKeepAlivePool(t *testing.T) {
	const n = 10
	d := testio.NewDials(t, n)
	first := Common{}.WithDefaults().HTTPClient
	other := NewObservability(slog.New(slog.DiscardHandler), io.Discard, "ns", "fn").HTTPClient
	if got := d.Burst(t, first); got != n {
		t.Fatalf("first burst: %d connections, want %d", got, n)
	}
	for _, c := range []struct {
		name  string
		burst func() int
	}{{"same client", func() int { return d.Burst(t, first) }}, {"another function's client", func() int { return d.Burst(t, other) }}} {
		if got := c.burst(); got != 0 {
			t.Fatalf("%s: %d new connections, want 0 (the pool keeps them)", c.name, got)
		}
	}
}
