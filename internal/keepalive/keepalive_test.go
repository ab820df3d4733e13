package keepalive

import (
	"net/http"
	"testing"

	"github.com/linegate/linegate/internal/testio"
)

// A burst of n concurrent calls dials n connections once; the next burst
// reuses them all. Go's default transport keeps 2 and dials the rest again.
func TestBurstsReuseConnections(t *testing.T) {
	const n = 10
	tests := []struct {
		name      string
		transport http.RoundTripper
		redials   int // new connections in the second burst
	}{
		{"pool sized for the burst", Transport(n), 0},
		{"Go's default keeps 2", http.DefaultTransport.(*http.Transport).Clone(), n - 2},
		{"the AWS SDK's client", AWSHTTPClient(n).GetTransport(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testio.NewDials(t, n)
			c := &http.Client{Transport: tt.transport}
			if first := d.Burst(t, c); first != n {
				t.Fatalf("first burst: %d connections, want %d", first, n)
			}
			if again := d.Burst(t, c); again != tt.redials {
				t.Fatalf("second burst: %d new connections, want %d", again, tt.redials)
			}
		})
	}
}

func TestPoolSizes(t *testing.T) {
	tr := Transport(Conns)
	aws := AWSHTTPClient(Conns).GetTransport()
	for _, x := range []*http.Transport{tr, aws} {
		if x.MaxIdleConnsPerHost != Conns || x.MaxIdleConns != 4*Conns || x.IdleConnTimeout != IdleTimeout {
			t.Fatalf("per host %d, in all %d, idle %v", x.MaxIdleConnsPerHost, x.MaxIdleConns, x.IdleConnTimeout)
		}
	}
	if !tr.ForceAttemptHTTP2 || tr.Proxy == nil {
		t.Fatal("the transport lost Go's defaults (HTTP/2, proxy from the environment)")
	}
}
