package telemetry

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-xray-sdk-go/v2/instrumentation/awsv2"
	"github.com/aws/aws-xray-sdk-go/v2/xray"
)

// InstrumentAWS makes every call of clients built from cfg (EventBridge, SQS,
// SNS, DynamoDB, SSM, ...) a subsegment of the segment in the call's context.
// Calls without a trace in their context run untraced and silently.
func InstrumentAWS(cfg *aws.Config) {
	if cfg == nil {
		return
	}
	awsv2.AWSV2Instrumentor(&cfg.APIOptions)
}

// HTTPClient returns a copy of c (http.DefaultClient when nil) whose requests
// become subsegments named after the host, carrying X-Amzn-Trace-Id, when
// their context holds a trace. Requests without one go straight to the
// original transport: no header, no SDK warning.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *c
	out.Transport = &traceTransport{base: base, traced: xray.RoundTripper(base)}
	return &out
}

// traceTransport routes a request through the X-Ray round tripper only when
// its context carries a trace.
type traceTransport struct {
	base, traced http.RoundTripper
}

// RoundTrip sends r through X-Ray when its context is traced.
func (t *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if hasTrace(r.Context()) {
		return t.traced.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}
