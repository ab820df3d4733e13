package coldstart

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Lambda's Runtime API headers the tracing proxy reads and writes
// (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html#runtimes-api-next).
const (
	requestIDHeader = "Lambda-Runtime-Aws-Request-Id"
	traceIDHeader   = "Lambda-Runtime-Trace-Id"
	nextPath        = "/2018-06-01/runtime/invocation/next"
)

// tracer is what WithActiveTracing adds to an Invoker: a reverse proxy in
// front of the emulator's Runtime API that gives each event the function
// takes a sampled X-Ray trace header of its own in Lambda-Runtime-Trace-Id,
// as Lambda does for a function with active tracing
// (https://docs.aws.amazon.com/lambda/latest/dg/services-xray.html). The
// emulator's tracer is a no-op: it sends no such header, whatever the invoke
// carried. Everything else passes through untouched.
type tracer struct {
	srv  *http.Server
	addr string

	mu     sync.Mutex
	traces map[string]string // the header handed out, by request id, until taken
}

// startTracer serves the proxy to runtimeAddr on a free loopback port.
func startTracer(runtimeAddr string) (*tracer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tracing proxy: %w", err)
	}
	target := &url.URL{Scheme: "http", Host: runtimeAddr}
	tr := &tracer{addr: l.Addr().String(), traces: map[string]string{}}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:      &http.Transport{Proxy: nil},
		ModifyResponse: tr.modify,
		// The function's long poll for the next event is cut when the
		// emulator stops: it sees the 502, nobody else needs a log line.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	tr.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = tr.srv.Serve(l) }()
	return tr, nil
}

// modify adds the trace header to an event the runtime takes.
func (tr *tracer) modify(resp *http.Response) error {
	id := resp.Header.Get(requestIDHeader)
	if resp.Request.URL.Path != nextPath || id == "" || resp.Header.Get(traceIDHeader) != "" {
		return nil
	}
	h, err := newTraceHeader(time.Now())
	if err != nil {
		return err
	}
	resp.Header.Set(traceIDHeader, h)
	tr.mu.Lock()
	tr.traces[id] = h
	tr.mu.Unlock()
	return nil
}

// take returns (and forgets) the header the invocation requestID got.
func (tr *tracer) take(requestID string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	h := tr.traces[requestID]
	delete(tr.traces, requestID)
	return h
}

// close stops the proxy.
func (tr *tracer) close() { _ = tr.srv.Close() }

// command is the emulator's bootstrap command for bootstrap: env(1) pointing
// AWS_LAMBDA_RUNTIME_API at the proxy (the emulator sets that variable
// itself, over anything Start's env says), then exec of bootstrap, so the
// function's process is bootstrap's as without the proxy.
func (tr *tracer) command(bootstrap string) ([]string, error) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		return nil, fmt.Errorf("tracing proxy: %w", err)
	}
	return []string{envBin, "AWS_LAMBDA_RUNTIME_API=" + tr.addr, bootstrap}, nil
}

// newTraceHeader is a new sampled root trace header as Lambda's active
// tracing starts one: Root=1-<epoch seconds, hex>-<96 random bits>;
// Parent=<the Lambda segment's id>;Sampled=1
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-concepts.html#xray-concepts-tracingheader).
func newTraceHeader(now time.Time) (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("trace header: %w", err)
	}
	return fmt.Sprintf("Root=1-%08x-%x;Parent=%x;Sampled=1", now.Unix(), b[:12], b[12:]), nil
}

// traceRoot is the Root of an X-Ray trace header, or "".
func traceRoot(header string) string {
	for _, part := range strings.Split(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "Root="); ok {
			return v
		}
	}
	return ""
}
