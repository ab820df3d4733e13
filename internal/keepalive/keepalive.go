// Package keepalive sizes the connection pools of a function's outbound
// HTTP clients (the LINE Messaging API, the AWS SDK's), built once per
// process and shared by every record. Go's default transport keeps 2 idle
// connections per host: a worker running ten records at once closes eight
// connections to api.line.me after every burst and dials them again, TLS
// handshake included, on the next batch.
package keepalive

import (
	"net"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Conns is how many idle connections per host the pools keep: more than a
// worker ever has in flight to one host (WORKER_CONCURRENCY records, at most
// 10, each with its send and its loading refresher), and enough for
// `linegate local`, whose pollers share one process. An idle connection
// costs a socket until IdleTimeout; a missing one costs a dial and a TLS
// handshake.
const Conns = 64

// IdleTimeout is how long an idle connection is kept (Go's default).
const IdleTimeout = 90 * time.Second

// Transport returns a new HTTP transport keeping up to conns idle
// connections per host (4×conns in all), with Go's default dialer,
// timeouts and HTTP/2. Build one per process and share it.
func Transport(conns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	size(t, conns)
	return t
}

// AWSHTTPClient returns the AWS SDK's own HTTP client (its dialer and
// timeouts) with the same pool as Transport, for aws.Config.HTTPClient.
func AWSHTTPClient(conns int) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { size(t, conns) })
}

func size(t *http.Transport, conns int) {
	conns = max(conns, 2)
	t.MaxIdleConnsPerHost = conns
	t.MaxIdleConns = 4 * conns
	t.IdleConnTimeout = IdleTimeout
	if t.DialContext == nil {
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
}
