//go:build !xraylite

package telemetry

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-xray-sdk-go/v2/xraylog"
)

// Tests of the SDK-based tracer's internals (trace.go); the lightweight
// tracer has no SDK logger.

func TestSDKLoggerFilters(t *testing.T) {
	var buf bytes.Buffer
	l := sdkLogger{log: slog.New(slog.NewJSONHandler(&buf, nil)), min: xraylog.LogLevelWarn}
	l.Log(xraylog.LogLevelError, stringer("Suppressing AWS X-Ray context missing panic: failed to begin subsegment"))
	l.Log(xraylog.LogLevelInfo, stringer("Emitter using address: 127.0.0.1:2000"))
	if buf.Len() != 0 {
		t.Fatalf("logged %s", buf.String())
	}
	l.Log(xraylog.LogLevelError, stringer("Error dialing emitter address"))
	if !strings.Contains(buf.String(), `"level":"ERROR"`) || !strings.Contains(buf.String(), "Error dialing emitter address") {
		t.Fatalf("error not logged as JSON ERROR: %s", buf.String())
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
