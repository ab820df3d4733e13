package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-xray-sdk-go/v2/xraylog"

	"github.com/linegate/linegate/internal/xraycollector"
)

// newCollector starts a collector on a loopback port for one test.
func newCollector(t *testing.T) *xraycollector.Collector {
	t.Helper()
	c := xraycollector.New()
	if err := c.Listen(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatalf("collector: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Two Tracers and the process-wide configuration side by side, used at the
// same time: every segment, with its subsegments, AWS calls and HTTP calls,
// reaches the collector of the context it began in and no other, and
// building the Tracers left the process-wide configuration (TestMain's
// collector) as it was.
func TestTracerKeepsSegmentsInItsContext(t *testing.T) {
	ebSrv, _ := fakeEventBridge(t)
	eb := eventBridgeClient(ebSrv.URL)
	lineSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer lineSrv.Close()
	httpc := HTTPClient(nil)

	type run struct {
		name     string
		col      *xraycollector.Collector
		ctx      context.Context
		seg, sub *Span
	}
	runs := []*run{{name: "process-wide", col: col, ctx: context.Background()}}
	for _, name := range []string{"tracer-a", "tracer-b"} {
		c := newCollector(t)
		tr, err := NewTracer(WithDaemonAddress(c.Addr()), WithSampleAll())
		if err != nil {
			t.Fatalf("NewTracer: %v", err)
		}
		runs = append(runs, &run{name: name, col: c, ctx: tr.Context(context.Background())})
	}

	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, seg := StartSegment(r.ctx, r.name, Header{})
			sctx, sub := StartSubsegment(ctx, "publish")
			if err := putEvents(sctx, eb, `{"ok":true}`); err != nil {
				t.Errorf("%s: PutEvents: %v", r.name, err)
			}
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, lineSrv.URL, nil)
			if resp, err := httpc.Do(req); err != nil {
				t.Errorf("%s: HTTP call: %v", r.name, err)
			} else {
				_ = resp.Body.Close()
			}
			sub.End(nil)
			seg.End(nil)
			r.seg, r.sub = seg, sub
		}()
	}
	wg.Wait()

	for _, r := range runs {
		if r.seg.TraceID() == "" {
			t.Fatalf("%s: segment was not sampled", r.name)
		}
		waitUntil(t, r.col, r.seg.TraceID(), r.name+": segment, publish, its AWS call and its HTTP call", func(tr xraycollector.Trace) bool {
			by := segmentByID(tr)
			var aws, remote bool
			for _, s := range childrenOf(tr, r.sub.ID()) {
				aws = aws || s.Namespace == "aws" && s.Operation == "PutEvents"
				remote = remote || s.Namespace == "remote"
			}
			return by[r.seg.ID()].Name == r.name && !by[r.seg.ID()].InProgress && by[r.sub.ID()].Name == "publish" && aws && remote
		})
	}
	// Every trace has arrived where it belongs; none may be anywhere else.
	for _, r := range runs {
		for _, other := range runs {
			if other == r {
				continue
			}
			if _, ok := other.col.Trace(r.seg.TraceID()); ok {
				t.Errorf("%s's trace %s also reached the collector of %s", r.name, r.seg.TraceID(), other.name)
			}
		}
	}
}

func TestNewTracerErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []ConfigOption
		is   error // nil: any error
	}{
		{"sdk logger is process-wide", []ConfigOption{WithSDKLogger(slog.Default())}, ErrProcessWideOption},
		{"bad daemon address", []ConfigOption{WithDaemonAddress("no-port")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTracer(tt.opts...)
			if err == nil || tr != nil {
				t.Fatalf("NewTracer = %v, %v; want an error", tr, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
}

func TestNilTracerLeavesContext(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	if tr.Context(ctx) != ctx {
		t.Fatal("a nil Tracer changed the context")
	}
}

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
