//go:build xraylite

package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// traceHeaderName is the HTTP header X-Ray propagates traces in.
const traceHeaderName = "X-Amzn-Trace-Id"

// awsCallKey is the context key of the subsegment the AWS middleware started,
// so its deserialize step finds that call's span and no enclosing one.
type awsCallKey struct{}

// InstrumentAWS makes every call of clients built from cfg (EventBridge, SQS,
// SNS, DynamoDB, SSM, ...) a subsegment of the span in the call's context,
// like the SDK's instrumentor: named for the service, namespace "aws", the
// operation, region, request id and HTTP status recorded, an error returned
// by the call recorded as a fault, and X-Amzn-Trace-Id sent with the call's
// subsegment as Parent. Calls without a trace in their context run untraced
// and silently.
func InstrumentAWS(cfg *aws.Config) {
	if cfg == nil {
		return
	}
	cfg.APIOptions = append(cfg.APIOptions, addAWSTracing)
}

// addAWSTracing adds the tracing middleware to one operation's stack: an
// Initialize step that wraps the whole call (retries included) in a
// subsegment, and a Deserialize step, which runs per attempt after signing,
// that sets the trace header and records the response.
func addAWSTracing(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("LinegateXRayLiteCall", awsCall), middleware.After); err != nil {
		return fmt.Errorf("telemetry: add x-ray initialize middleware: %w", err)
	}
	if err := stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("LinegateXRayLiteAttempt", awsAttempt), middleware.Before); err != nil {
		return fmt.Errorf("telemetry: add x-ray deserialize middleware: %w", err)
	}
	return nil
}

// awsCall wraps one AWS operation in a subsegment when ctx is traced.
func awsCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error) {
	if !hasTrace(ctx) {
		return next.HandleInitialize(ctx, in)
	}
	ctx, sp := StartAWSCall(ctx, awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), awsmiddleware.GetRegion(ctx))
	if sp.id == "" {
		return next.HandleInitialize(ctx, in)
	}
	out, md, err := next.HandleInitialize(context.WithValue(ctx, awsCallKey{}, sp), in)
	sp.End(err)
	return out, md, err
}

// awsAttempt sets X-Amzn-Trace-Id on the outgoing request and records the
// response of one attempt on the call's subsegment.
func awsAttempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error) {
	sp, _ := ctx.Value(awsCallKey{}).(*Span)
	if sp == nil {
		return next.HandleDeserialize(ctx, in)
	}
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		req.Header.Set(traceHeaderName, sp.downstream().String())
	}
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Response != nil {
		requestID, _ := awsmiddleware.GetRequestIDMetadata(md)
		sp.setResponse(resp.ContentLength, requestID)
		sp.SetHTTPStatus(resp.StatusCode)
	}
	return out, md, err
}

// HTTPClient returns a copy of c (http.DefaultClient when nil) whose requests
// become "remote" subsegments named after the host, carrying X-Amzn-Trace-Id
// (with the subsegment as Parent), when their context holds a trace. Requests
// without one go straight to the original transport, unchanged.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *c
	out.Transport = &traceTransport{base: base}
	return &out
}

// traceTransport records traced requests as remote subsegments.
type traceTransport struct {
	base http.RoundTripper
}

// RoundTrip sends r, inside a subsegment when its context is traced. The
// subsegment ends when the response headers arrive (or the request fails).
func (t *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if !hasTrace(ctx) {
		return t.base.RoundTrip(r)
	}
	host := r.URL.Host
	if host == "" {
		host = r.Host
	}
	_, sp := StartSubsegment(ctx, host)
	if sp.id == "" {
		return t.base.RoundTrip(r)
	}
	sp.setRemote(r.Method, redactURL(r.URL))
	// A RoundTripper must not modify the caller's request: send a copy.
	out := r.Clone(ctx)
	out.Header.Set(traceHeaderName, sp.downstream().String())
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		sp.End(err)
		return nil, err
	}
	sp.setResponse(resp.ContentLength, "")
	sp.SetHTTPStatus(resp.StatusCode)
	sp.End(nil)
	return resp, nil
}

// redactURL is u without user info, query or fragment: those may carry
// credentials or user data that must not reach a trace.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}
