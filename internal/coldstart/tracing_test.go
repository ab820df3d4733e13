package coldstart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/coldstart"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/testio"
	"github.com/linegate/linegate/internal/tracetest"
	"github.com/linegate/linegate/internal/xraycollector"
)

// runtimeAPI stands in for Lambda's Runtime API
// (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html): it
// hands the function one invocation, with the invoke's X-Ray trace header in
// Lambda-Runtime-Trace-Id as Lambda does under active tracing, and records
// the answer. It serves the concurrent-invokes case only: with
// AWS_LAMBDA_MAX_CONCURRENCY above 1 in the function's environment the
// Runtime Interface Emulator (which serves the other cases) answered the
// invoke 502 and handed the event to the function twice.
type runtimeAPI struct {
	event, trace string
	mu           sync.Mutex
	served       bool
	answer       chan string // the response or error body
	stop         chan struct{}
}

func (a *runtimeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const base = "/2018-06-01/runtime/"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == base+"invocation/next":
		a.mu.Lock()
		first := !a.served
		a.served = true
		a.mu.Unlock()
		if !first {
			<-a.stop // one invocation only: park the runtime
			return
		}
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", "c6af9ac6-7b61-11e6-9a41-93e8deadbeef")
		h.Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(30*time.Second).UnixMilli()))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:WebhookFunction")
		h.Set("Lambda-Runtime-Trace-Id", a.trace)
		_, _ = io.WriteString(w, a.event)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, base):
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case a.answer <- r.URL.Path + " " + string(b):
		default:
		}
	default:
		http.NotFound(w, r)
	}
}

// The real webhook binary (the Makefile's build) under the Runtime Interface
// Emulator with active tracing (the invoke's trace header in
// Lambda-Runtime-Trace-Id, as Lambda gives it): under either
// TRACING backend its spans reach the daemon at AWS_XRAY_DAEMON_ADDRESS (a
// local collector here) in the invoke's trace, under Lambda's segment (the
// header's Parent). Under OpenTelemetry the invocation is a server span of
// its own, flushed before the answer; under the X-Ray SDK the facade is the
// invocation, and the AWS calls hang under Lambda's segment directly.
func TestLambdaTracesUnderTheInvokesHeader(t *testing.T) {
	requireEmulator(t)
	bin := hostBinary(t, "webhook")
	for _, backend := range []config.Backend{config.TracingXRay, config.TracingOTel} {
		name := string(backend)
		t.Run(name, func(t *testing.T) {
			col := tracetest.NewCollector(t)
			body := `{"destination":"U0","events":[{"type":"message","webhookEventId":"01TRACE","mode":"active","timestamp":1,` +
				`"source":{"type":"user","userId":"U4af4980629a0e3c1b2d5f6e7a8b9c0d1"},"replyToken":"r",` +
				`"deliveryContext":{"isRedelivery":false},"message":{"type":"text","id":"1","text":"hi"}}]}`
			event, _ := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/webhook", Body: body,
				Headers: map[string]string{signature.Header: signature.Sign([]byte("s"), []byte(body))}})
			env := coldstart.OfflineEnv("webhook")
			delete(env, "AWS_XRAY_SDK_DISABLED")
			env["LINE_CHANNEL_SECRET"] = "s"
			env["AWS_SAM_LOCAL"] = "true" // a plain secret, as under sam local
			env["TRACING"] = string(backend)
			env["AWS_XRAY_DAEMON_ADDRESS"] = col.Addr()
			env["PUBLISH_DEADLINE_MS"] = "200" // the endpoint is a closed port: fail fast
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			iv, err := coldstart.Start(ctx, bin, env, coldstart.WithActiveTracing())
			if err != nil {
				t.Fatal(err)
			}
			defer iv.Stop()
			defer func() {
				if t.Failed() {
					t.Logf("the collector holds %+v; the emulator and the function logged:\n%s", col.Traces(), iv.Logs())
				}
			}()
			inv, err := iv.Run(ctx, event)
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			invoke, err := telemetry.ParseTraceHeader(inv.TraceHeader)
			if err != nil || invoke.Root == "" || invoke.Parent == "" {
				t.Fatalf("the invocation's trace header %q has no Root and Parent: %v", inv.TraceHeader, err)
			}
			if !strings.Contains(string(inv.Body), `"statusCode":500`) {
				t.Fatalf("answer %s, want a 500 response: the bus is a closed port", inv.Body)
			}
			if out := strings.Join(inv.Output, "\n"); !strings.Contains(out, `"traceId":"`+invoke.Root+`"`) {
				t.Errorf("the function's lines do not carry the invoke's trace id %s:\n%s", invoke.Root, out)
			}
			checkInvokeTrace(t, col, invoke, backend)
		})
	}
}

// TestLambdaTracesUnderTheInvokesHeader's concurrent case, under a Runtime
// API of our own (runtimeAPI) that hands the real webhook binary an invoke
// with an active-tracing trace header: under either
// TRACING backend its spans reach the daemon at AWS_XRAY_DAEMON_ADDRESS (a
// local collector here) in the invoke's trace, under Lambda's segment (the
// header's Parent). Under OpenTelemetry the invocation is a server span of
// its own, flushed before the answer; under the X-Ray SDK the facade is the
// invocation, and the AWS calls hang under Lambda's segment directly. With
// concurrent invokes (AWS_LAMBDA_MAX_CONCURRENCY > 1) aws-lambda-go leaves
// _X_AMZN_TRACE_ID alone, so a stale one (another invoke's) is in the
// environment: the spans still follow the invoke's own header, from its
// context.
func TestLambdaTracesUnderConcurrentInvokes(t *testing.T) {
	bin := hostBinary(t, "webhook")
	const stale = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=1111222233334444;Sampled=1"
	for _, tt := range []struct {
		backend    config.Backend
		concurrent bool
	}{{config.TracingXRay, true}, {config.TracingOTel, true}} {
		backend := tt.backend
		name := string(backend)
		if tt.concurrent {
			name += "/concurrent invokes"
		}
		t.Run(name, func(t *testing.T) {
			col := tracetest.NewCollector(t)
			body := `{"destination":"U0","events":[{"type":"message","webhookEventId":"01TRACE","mode":"active","timestamp":1,` +
				`"source":{"type":"user","userId":"U4af4980629a0e3c1b2d5f6e7a8b9c0d1"},"replyToken":"r",` +
				`"deliveryContext":{"isRedelivery":false},"message":{"type":"text","id":"1","text":"hi"}}]}`
			event, _ := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/webhook", Body: body,
				Headers: map[string]string{signature.Header: signature.Sign([]byte("s"), []byte(body))}})
			invoke := telemetry.Header{Root: fmt.Sprintf("1-%08x-0123456789abcdef01234567", time.Now().Unix()), Parent: "53995c3f42cd8ad8", Sampled: true}
			api := &runtimeAPI{event: string(event), trace: invoke.String(), answer: make(chan string, 1), stop: make(chan struct{})}
			srv := httptest.NewServer(api)
			defer srv.Close()
			defer close(api.stop)

			env := coldstart.OfflineEnv("webhook")
			delete(env, "AWS_XRAY_SDK_DISABLED")
			env["LINE_CHANNEL_SECRET"] = "s"
			env["AWS_SAM_LOCAL"] = "true" // a plain secret, as under sam local
			env["TRACING"] = string(backend)
			env["AWS_XRAY_DAEMON_ADDRESS"] = col.Addr()
			env["PUBLISH_DEADLINE_MS"] = "200" // the endpoint is a closed port: fail fast
			env["AWS_LAMBDA_RUNTIME_API"] = strings.TrimPrefix(srv.URL, "http://")
			env["LAMBDA_TASK_ROOT"] = t.TempDir()
			if tt.concurrent {
				env["AWS_LAMBDA_MAX_CONCURRENCY"] = "2"
				env["_X_AMZN_TRACE_ID"] = stale
			}
			logs := &testio.Buffer{}
			cmd := exec.Command(bin.Path)
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
				<-exited
			}()
			defer func() {
				if t.Failed() {
					t.Logf("the collector holds %+v; the function logged:\n%s", col.Traces(), logs.String())
				}
			}()

			var answer string
			select {
			case answer = <-api.answer:
			case err := <-exited:
				exited <- err
				t.Fatalf("the function exited (%v) before it answered", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the function answered nothing within 30 s")
			}
			if !strings.Contains(answer, "/response ") || !strings.Contains(answer, `"statusCode":500`) {
				t.Fatalf("answer %q, want a 500 response: the bus is a closed port", answer)
			}
			// The logs reach the buffer through a pipe, after the answer
			// maybe: wait for the line.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"traceId":"`+invoke.Root+`"`); {
				if time.Now().After(deadline) {
					t.Errorf("the function's logs do not carry the invoke's trace id %s within 10 s", invoke.Root)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			checkInvokeTrace(t, col, invoke, backend)
			if _, ok := col.Trace("1-5759e988-bd862e3fe1be46a994272793"); ok {
				t.Error("spans went to the stale _X_AMZN_TRACE_ID's trace")
			}
		})
	}
}

// checkInvokeTrace waits for the webhook's EventBridge and SQS calls in the
// invoke's trace and checks where its spans hang: every one under Lambda's
// segment (the header's Parent), directly or through the invocation's span
// (OpenTelemetry's, with the 500), each sent by backend, the calls to a
// closed port faults.
func checkInvokeTrace(t *testing.T, col *xraycollector.Collector, invoke telemetry.Header, backend config.Backend) {
	t.Helper()
	tr := tracetest.WaitUntil(t, col, invoke.Root, "the webhook's EventBridge and SQS calls in the invoke's trace", func(tr xraycollector.Trace) bool {
		var names []string
		for _, s := range tr.Segments {
			if s.Namespace == "aws" && !s.InProgress {
				names = append(names, s.Name)
			}
		}
		return slices.Contains(names, "EventBridge") && slices.Contains(names, "SQS")
	})
	byID := map[string]xraycollector.Segment{}
	for _, s := range tr.Segments {
		byID[s.ID] = s
		if s.OTLP != (backend == config.TracingOTel) {
			t.Errorf("segment %q arrived with otlp=%v under %s", s.Name, s.OTLP, backend)
		}
	}
	if backend == config.TracingOTel {
		var inv *xraycollector.Segment
		for _, s := range tr.Segments {
			if s.ParentID == invoke.Parent && s.Type == "segment" {
				inv = &s
			}
		}
		if inv == nil || inv.Name != coldstart.LogicalID("webhook") || inv.HTTPStatus != 500 || !inv.Fault {
			t.Fatalf("no invocation span with the 500 under Lambda's %s: %+v", invoke.Parent, tr.Segments)
		}
	}
	// Every span is under Lambda's segment, directly or through the
	// invocation's span; the calls to a closed port are faults.
	for _, s := range tr.Segments {
		for p := s; p.ParentID != invoke.Parent; {
			up, ok := byID[p.ParentID]
			if !ok {
				t.Fatalf("span %q hangs under %s, neither Lambda's segment nor in the trace: %+v", s.Name, p.ParentID, tr.Segments)
			}
			p = up
		}
		if s.Namespace == "aws" && !s.Fault {
			t.Errorf("the call %s to a closed port is not a fault: %+v", s.Name, s)
		}
	}
}
