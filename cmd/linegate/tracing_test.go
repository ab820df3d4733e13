package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/testio"
)

// `linegate local --tracing otel` runs the functions under OpenTelemetry
// and says so; a backend it does not know is a usage error.
func TestLocalTracingFlag(t *testing.T) {
	if code, _, errOut := runCLI("local", "--tracing", "jaeger"); code != 2 || !strings.Contains(errOut, "--tracing must be xray") {
		t.Fatalf("--tracing jaeger: exit %d, stderr %q; want 2 and what it must be", code, errOut)
	}
	tmpl, err := filepath.Abs("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ flag, want string }{
		{"otel", "tracing: otel: OpenTelemetry"},
		{"", "tracing: xray: the X-Ray SDK"}, // the template's Tracing parameter defaults to xray
	} {
		ctx, cancel := context.WithCancel(context.Background())
		out, errOut := &testio.Buffer{}, &testio.Buffer{}
		args := []string{"local", "--template", tmpl, "--addr", "127.0.0.1:0"}
		if tt.flag != "" {
			args = append(args, "--tracing", tt.flag)
		}
		done := make(chan int, 1)
		go func() { done <- run(ctx, args, out, errOut) }()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "linegate local ready") {
			select {
			case code := <-done:
				cancel()
				t.Fatalf("--tracing %q: exited %d before ready; stdout %s stderr %s", tt.flag, code, out.String(), errOut.String())
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("--tracing %q: not ready within 30 s; stdout %s", tt.flag, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("--tracing %q: exit %d after the stop; stderr %s", tt.flag, code, errOut.String())
		}
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("--tracing %q: the banner does not say %q:\n%s", tt.flag, tt.want, out.String())
		}
	}
}
