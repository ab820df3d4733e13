package config

import "strings"

// Backend names a tracing backend, the value of TRACING (the template's
// Tracing parameter, in every function's environment).
type Backend string

// The tracing backends.
const (
	// TracingXRay is the AWS X-Ray SDK for Go, the default (TRACING unset
	// or "xray"). Its support ends 2027-02-25.
	TracingXRay Backend = "xray"
	// TracingOTel is OpenTelemetry sending OTLP over UDP to the X-Ray
	// daemon Lambda runs in the sandbox (TRACING=otel).
	TracingOTel Backend = "otel"
)

// Tracing is how a function traces, read once at start by compose.Main.
type Tracing struct {
	Backend Backend // TRACING: xray (default) or otel
	// DaemonAddress is AWS_XRAY_DAEMON_ADDRESS, the daemon Lambda runs in
	// every sandbox ("169.254.79.129:2000"); "" outside Lambda, where the
	// daemon's default (127.0.0.1:2000) applies. The X-Ray SDK reads the
	// variable itself; OpenTelemetry's exporter is given this value.
	DaemonAddress string
}

// LoadTracing reads and validates TRACING (case-insensitive) and
// AWS_XRAY_DAEMON_ADDRESS.
func LoadTracing(env Getenv) (Tracing, error) {
	r := reader{env: env}
	c := Tracing{Backend: TracingXRay, DaemonAddress: r.str("AWS_XRAY_DAEMON_ADDRESS", "")}
	if v := r.str("TRACING", ""); v != "" {
		b, err := ParseBackend(v)
		if err != nil {
			r.problem("TRACING %v", err)
		}
		c.Backend = b
	}
	return c, r.err()
}

// ParseBackend parses a backend's name ("xray" or "otel", any case): the
// TRACING variable's and `linegate local --tracing`'s. "" is TracingXRay.
func ParseBackend(v string) (Backend, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", string(TracingXRay):
		return TracingXRay, nil
	case string(TracingOTel):
		return TracingOTel, nil
	}
	return TracingXRay, &backendError{v}
}

type backendError struct{ v string }

func (e *backendError) Error() string {
	return "must be xray (the X-Ray SDK, the default) or otel (OpenTelemetry to the X-Ray daemon), got " + `"` + e.v + `"`
}
