package otelxray

import (
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/linegate/linegate/internal/telemetry"
)

// RoundTripper returns base traced (telemetry.Backend): a request whose
// context holds a trace becomes a client span named after the host, with the
// method, the URL without its query and the status (the HTTP semantic
// conventions), and carries X-Amzn-Trace-Id naming that span, as the X-Ray
// SDK's round tripper does. Other requests go to base untouched.
func (b *Backend) RoundTripper(base http.RoundTripper) http.RoundTripper {
	return &roundTripper{b: b, base: base}
}

type roundTripper struct {
	b    *Backend
	base http.RoundTripper
}

// RoundTrip traces r when its context is traced.
func (t *roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, sp, ok := t.b.Start(r.Context(), r.URL.Host, telemetry.SpanOptions{Kind: telemetry.KindClient})
	if !ok {
		return t.base.RoundTrip(r)
	}
	s := sp.(*span)
	s.s.SetAttributes(attribute.String(attrHTTPMethod, r.Method), attribute.String(attrURL, redactURL(r.URL)),
		attribute.String(attrServer, r.URL.Hostname()))
	// A RoundTripper must not change the caller's request: the header goes
	// on a copy.
	out := r.Clone(ctx)
	Propagator{}.Inject(trace.ContextWithSpan(ctx, s.s), propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		s.End(err)
		return nil, err
	}
	s.SetHTTPStatus(resp.StatusCode)
	s.End(nil)
	return resp, nil
}

// redactURL is u without its query, fragment and user info: what a trace may
// keep of a URL.
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.RawFragment, c.User = "", "", "", nil
	return c.String()
}
