package telemetry

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeBackend records what the seam asks of a backend.
type fakeBackend struct {
	mu       sync.Mutex
	started  []string // names of started spans, invocations prefixed "invoke:"
	parents  []Header // the parent each invocation was started with
	flushes  int
	spans    []*fakeSpan
	refuse   bool // Start and StartInvocation report no trace
	header   Header
	flushErr error
}

type fakeSpan struct {
	mu      sync.Mutex
	name    string
	attrs   map[string]any
	indexed map[string]bool
	links   []Header
	status  int
	ended   int
	err     error
	panic   any
	frames  []Frame
}

func (b *fakeBackend) newSpan(name string) *fakeSpan {
	s := &fakeSpan{name: name, attrs: map[string]any{}, indexed: map[string]bool{}}
	b.spans = append(b.spans, s)
	return s
}

func (b *fakeBackend) Start(ctx context.Context, name string, o SpanOptions) (context.Context, BackendSpan, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse {
		return ctx, nil, false
	}
	if o.AWS != nil {
		name += ":" + o.AWS.Operation + "@" + o.AWS.Region
	}
	b.started = append(b.started, name)
	return context.WithValue(ctx, fakeKey{}, name), b.newSpan(name), true
}

type fakeKey struct{}

func (b *fakeBackend) StartInvocation(ctx context.Context, name string, parent Header) (context.Context, BackendSpan, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parents = append(b.parents, parent)
	if b.refuse {
		return ctx, nil, false
	}
	b.started = append(b.started, "invoke:"+name)
	return ctx, b.newSpan(name), true
}

func (b *fakeBackend) Header(ctx context.Context) Header {
	if _, ok := ctx.Value(fakeKey{}).(string); ok {
		return b.header
	}
	return Header{}
}

func (b *fakeBackend) RoundTripper(base http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Fake-Traced", "1")
		return base.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (b *fakeBackend) Flush(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushes++
	return b.flushErr
}

func (b *fakeBackend) Shutdown(context.Context) error { return nil }

func (s *fakeSpan) SetAttribute(key string, v any, indexed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attrs[key], s.indexed[key] = v, indexed
}
func (s *fakeSpan) AddLink(h Header)       { s.mu.Lock(); s.links = append(s.links, h); s.mu.Unlock() }
func (s *fakeSpan) SetHTTPStatus(code int) { s.mu.Lock(); s.status = code; s.mu.Unlock() }
func (s *fakeSpan) End(err error)          { s.mu.Lock(); s.ended++; s.err = err; s.mu.Unlock() }
func (s *fakeSpan) Panic(v any, f []Frame) {
	s.mu.Lock()
	s.ended++
	s.panic, s.frames = v, f
	s.mu.Unlock()
}
func (s *fakeSpan) TraceID() string { return "1-6650a1b2-0123456789abcdef01234567" }
func (s *fakeSpan) ID() string      { return "53995c3f42cd8ad8" }

func TestBackendSelection(t *testing.T) {
	t.Cleanup(func() { SetDefault(nil) })
	def, own := &fakeBackend{}, &fakeBackend{}
	tests := []struct {
		name    string
		setup   func(context.Context) context.Context
		dflt    Backend
		want    *fakeBackend
		traced  bool
		comment string
	}{
		{"no backend at all: nothing recorded", func(c context.Context) context.Context { return c }, nil, nil, false, ""},
		{"process default", func(c context.Context) context.Context { return c }, def, def, true, ""},
		{"context's backend wins over the default", func(c context.Context) context.Context { return WithBackend(c, own) }, def, own, true, ""},
		{"nil WithBackend keeps the default", func(c context.Context) context.Context { return WithBackend(c, nil) }, def, def, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDefault(tt.dflt)
			def.started, own.started = nil, nil
			ctx, s := Start(tt.setup(context.Background()), "work")
			s.End(nil)
			if got := s.ID() != ""; got != tt.traced {
				t.Fatalf("traced = %v, want %v", got, tt.traced)
			}
			for _, b := range []*fakeBackend{def, own} {
				if got := len(b.started) == 1; got != (b == tt.want) {
					t.Errorf("backend %p started %v; want it used: %v", b, b.started, b == tt.want)
				}
			}
			if !tt.traced && ctx.Value(fakeKey{}) != nil {
				t.Error("an untraced Start changed the context")
			}
		})
	}
}

// The verbs reach the backend's span: annotations indexed, metadata not, a
// link both as the backend's link and as the two annotations, the status,
// and one End however often it is called.
func TestSpanVerbs(t *testing.T) {
	b := &fakeBackend{}
	ctx := WithBackend(context.Background(), b)
	_, s := Start(ctx, "record")
	s.Annotate("eventType", "message")
	s.Annotate("", "ignored")
	s.Metadata("detail", map[string]int{"n": 1})
	up := Header{Root: "1-6650a1b2-fedcba9876543210fedcba98", Parent: "5555666677778888", Sampled: true}
	s.Link(up)
	s.Link(Header{}) // no root: nothing
	s.SetHTTPStatus(502)
	s.End(errors.New("boom"))
	s.End(nil)
	s.Panic("late", nil)

	fs := b.spans[0]
	if fs.attrs["eventType"] != "message" || !fs.indexed["eventType"] || fs.indexed["detail"] || fs.attrs["detail"] == nil {
		t.Errorf("attributes %v indexed %v", fs.attrs, fs.indexed)
	}
	if _, ok := fs.attrs[""]; ok {
		t.Error("an empty key was recorded")
	}
	if !slices.Equal(fs.links, []Header{up}) || fs.attrs[AnnotationUpstreamTraceID] != up.Root ||
		fs.attrs[AnnotationUpstreamParentID] != up.Parent || !fs.indexed[AnnotationUpstreamTraceID] {
		t.Errorf("link: links %v attributes %v", fs.links, fs.attrs)
	}
	if fs.status != 502 || fs.ended != 1 || fs.err == nil || fs.panic != nil {
		t.Errorf("status %d ended %d err %v panic %v", fs.status, fs.ended, fs.err, fs.panic)
	}
	if s.TraceID() == "" || s.ID() == "" {
		t.Error("a traced span has no ids")
	}
}

func TestStartAWSCallNamesTheCall(t *testing.T) {
	b := &fakeBackend{}
	_, s := StartAWSCall(WithBackend(context.Background(), b), "EventBridge", "PutEvents", "ap-northeast-1")
	s.End(nil)
	if !slices.Equal(b.started, []string{"EventBridge:PutEvents@ap-northeast-1"}) {
		t.Fatalf("started %v", b.started)
	}
}

// An invocation's span starts under the invoke's trace header and flushes
// its backend when it ends, also when the backend records the invocation
// itself (no span of ours) and when it ends with a panic.
func TestInvocationFlushes(t *testing.T) {
	invoke := Header{Root: "1-6650a1b2-0123456789abcdef01234567", Parent: "9999aaaabbbbcccc", Sampled: true}
	for _, refuse := range []bool{false, true} {
		b := &fakeBackend{refuse: refuse}
		ctx := WithInvokeHeader(WithBackend(context.Background(), b), invoke)
		_, s := StartInvocation(ctx, "webhook")
		if b.flushes != 0 {
			t.Fatalf("refuse=%v: flushed before the end", refuse)
		}
		s.End(nil)
		s.End(nil)
		if b.flushes != 1 || !slices.Equal(b.parents, []Header{invoke}) {
			t.Errorf("refuse=%v: %d flushes, parents %v", refuse, b.flushes, b.parents)
		}
		_, p := StartInvocation(WithBackend(context.Background(), b), "worker")
		func() {
			defer func() { p.Panic(recover(), debug.Stack()) }()
			panic("handler")
		}()
		if b.flushes != 2 || b.parents[1] != (Header{}) {
			t.Errorf("refuse=%v: after a panicking invocation %d flushes, parent %v", refuse, b.flushes, b.parents[1])
		}
		if !refuse {
			fs := b.spans[1]
			if fs.panic != "handler" || len(fs.frames) == 0 || !strings.HasSuffix(fs.frames[0].File, ".go") {
				t.Errorf("panic %v frames %v", fs.panic, fs.frames)
			}
		}
	}
	// A flush that fails does not fail the invocation's end.
	b := &fakeBackend{flushErr: errors.New("daemon gone")}
	_, s := StartInvocation(WithBackend(context.Background(), b), "notifier")
	s.End(nil)
	if err := Flush(WithBackend(context.Background(), b)); err == nil || b.flushes != 2 {
		t.Errorf("Flush = %v after %d flushes, want the backend's error", err, b.flushes)
	}
}

func TestNoTraceIsNoOp(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no backend":       context.Background(),
		"backend, no span": WithBackend(context.Background(), &fakeBackend{refuse: true}),
	} {
		sctx, sp := Start(ctx, "orphan")
		if sctx != ctx {
			t.Errorf("%s: Start without a trace changed the context", name)
		}
		sp.Annotate("k", "v")
		sp.Metadata("k", map[string]int{"a": 1})
		sp.Link(Header{Root: "1-6650a1b2-0123456789abcdef01234567"})
		sp.SetHTTPStatus(500)
		sp.Panic("x", nil)
		sp.End(errors.New("x"))
		var nilSpan *Span
		nilSpan.Annotate("k", 1)
		nilSpan.Link(Header{Root: "1-6650a1b2-0123456789abcdef01234567"})
		nilSpan.End(nil)
		nilSpan.Panic("x", nil)
		if TraceHeader(sctx) != "" || TraceID(sctx) != "" || sp.TraceID() != "" || sp.ID() != "" || nilSpan.ID() != "" {
			t.Errorf("%s: no-op span reports a trace: header %q id %q", name, TraceHeader(sctx), TraceID(sctx))
		}
	}
}

// The trace id of logs and crash reports comes from the context: the span's,
// else the invoke's header. _X_AMZN_TRACE_ID is never read: with
// concurrent invokes (aws-lambda-go >= v1.51.0) it names another invoke.
func TestTraceIDFromTheContextOnly(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-6650a1b2-000011112222333344445555;Parent=9999aaaabbbbcccc;Sampled=1")
	if got := TraceID(context.Background()); got != "" {
		t.Fatalf("TraceID without a context trace = %q, want \"\" (the variable is not read)", got)
	}
	invoke := Header{Root: "1-6650a1b2-aaaabbbbccccddddeeeeffff", Parent: "9999aaaabbbbcccc", Sampled: true}
	ctx := WithInvokeHeader(context.Background(), invoke)
	if got := TraceID(ctx); got != invoke.Root {
		t.Fatalf("TraceID(invoke ctx) = %q, want %q", got, invoke.Root)
	}
	b := &fakeBackend{header: Header{Root: "1-6650a1b2-111122223333444455556666", Parent: "53995c3f42cd8ad8", Sampled: true}}
	sctx, s := Start(WithBackend(ctx, b), "handle")
	defer s.End(nil)
	if got := TraceID(sctx); got != b.header.Root {
		t.Fatalf("TraceID under a span = %q, want the span's %q", got, b.header.Root)
	}
	if got := TraceHeader(sctx); got != b.header.String() {
		t.Fatalf("TraceHeader under a span = %q, want %q", got, b.header.String())
	}
	//lint:ignore SA1029 the key is aws-lambda-go's own, a plain string
	bad := context.WithValue(context.Background(), "x-amzn-trace-id", "garbage") //nolint:staticcheck
	if h, ok := InvokeHeader(bad); ok || TraceID(bad) != "" {
		t.Fatalf("a bad invoke header gave %+v", h)
	}
}

func TestHTTPClientUsesTheRequestsBackend(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Fake-Traced"))
	}))
	defer srv.Close()
	c := HTTPClient(nil)
	for _, ctx := range []context.Context{context.Background(), WithBackend(context.Background(), &fakeBackend{})} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if !slices.Equal(got, []string{"", "1"}) {
		t.Fatalf("traced markers %q, want only the second request through the backend", got)
	}
	if HTTPClient(&http.Client{}).Transport == nil {
		t.Fatal("a client without a transport got none")
	}
}

func TestStackFrames(t *testing.T) {
	frames := StackFrames(debug.Stack(), MaxStackFrames)
	var found bool
	for _, f := range frames {
		if strings.HasSuffix(f.Function, "TestStackFrames") && strings.HasSuffix(f.File, "trace_test.go") && f.Line > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("frames %+v lack TestStackFrames in trace_test.go", frames)
	}
	if got := StackFrames([]byte("goroutine 1 [running]:\nnot a frame\n\tno line\n"), 32); len(got) != 0 {
		t.Fatalf("garbage parsed as %+v", got)
	}
	if got := StackFrames(debug.Stack(), 2); len(got) != 2 {
		t.Fatalf("limit 2 gave %d frames", len(got))
	}
}

// Packages that merely log import this one: it must do nothing when
// imported. No file of it declares an init function, and it imports no
// tracing SDK (functions/deps_test.go checks the SDKs are not linked).
func TestNoInitFunctions(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range file.Decls {
			if fd, ok := obj.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s declares init()", f)
			}
		}
		for _, imp := range file.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(p, "aws-xray-sdk-go") || strings.HasPrefix(p, "go.opentelemetry.io/") {
				t.Errorf("%s imports %s: the seam's root package links no tracing SDK", f, p)
			}
		}
	}
}
