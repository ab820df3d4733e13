package config

import (
	"strings"
	"testing"
)

func TestLoadTracing(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Tracing
		wantErr string
	}{
		{"unset is the X-Ray SDK", nil, Tracing{Backend: TracingXRay}, ""},
		{"xray", map[string]string{"TRACING": "xray"}, Tracing{Backend: TracingXRay}, ""},
		{"otel, any case, with Lambda's daemon", map[string]string{"TRACING": " OTel ", "AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129:2000"},
			Tracing{Backend: TracingOTel, DaemonAddress: "169.254.79.129:2000"}, ""},
		{"unknown backend", map[string]string{"TRACING": "jaeger"}, Tracing{}, `TRACING must be xray (the X-Ray SDK, the default) or otel (OpenTelemetry to the X-Ray daemon), got "jaeger"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadTracing(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LoadTracing = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
