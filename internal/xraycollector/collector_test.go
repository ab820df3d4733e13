package xraycollector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
)

const (
	webhookTrace = "1-6b0be182-61cc0b9d66d1a77a9e410fab"
	workerTrace  = "1-6b0be182-7c90095270d152d5e7018756"
	lambdaTrace  = "1-6650a1b2-aaaabbbbccccddddeeeeffff"
	otelTrace    = "1-6650a1b2-000011112222333344445555"
)

func TestParseDatagram(t *testing.T) {
	hdr := `{"format": "json", "version": 1}` + "\n"
	tests := []struct {
		name      string
		in        []byte
		wantTrace string
		want      []Segment // compared on ID, Name, ParentID, Type, Fault, Error, InProgress
		wantErr   bool
	}{
		{
			name: "sdk segment with nested subsegments", in: golden.Read(t, "testdata/sdk_segment.datagram"), wantTrace: webhookTrace,
			want: []Segment{
				{ID: "7d4a134a092ed826", Name: "webhook", Type: "segment", Fault: true},
				{ID: "c053aa854fd3e7f5", Name: "verify", ParentID: "7d4a134a092ed826", Type: "subsegment"},
				{ID: "1abd08110be4166c", Name: "publish", ParentID: "7d4a134a092ed826", Type: "subsegment", Fault: true},
			},
		},
		{
			name: "sdk independent subsegment", in: golden.Read(t, "testdata/sdk_lambda_subsegment.datagram"), wantTrace: lambdaTrace,
			want: []Segment{{ID: "e96ef664ca7431b7", Name: "lambda-handler", ParentID: "9999aaaabbbbcccc", Type: "subsegment"}},
		},
		{
			name: "in progress", in: golden.Read(t, "testdata/in_progress.datagram"), wantTrace: lambdaTrace,
			want: []Segment{{ID: "1234123412341234", Name: "slow-handler", ParentID: "9999aaaabbbbcccc", Type: "subsegment", InProgress: true}},
		},
		{
			name: "nested subsegment parent is the enclosing one",
			in:   []byte(hdr + `{"trace_id":"t","id":"a","name":"root","subsegments":[{"id":"b","name":"mid","parent_id":"a","subsegments":[{"id":"c","name":"leaf","parent_id":"a"}]}]}`),
			want: []Segment{
				{ID: "a", Name: "root", Type: "segment"},
				{ID: "b", Name: "mid", ParentID: "a", Type: "subsegment"},
				{ID: "c", Name: "leaf", ParentID: "b", Type: "subsegment"},
			},
			wantTrace: "t",
		},
		{name: "no header line", in: []byte(`{"trace_id":"t","id":"a"}`), wantErr: true},
		{name: "wrong version", in: []byte(`{"format": "json", "version": 2}` + "\n" + `{"trace_id":"t","id":"a"}`), wantErr: true},
		{name: "header not json", in: []byte("hello\n{}"), wantErr: true},
		{name: "body not json", in: []byte(hdr + `{"trace_id":`), wantErr: true},
		{name: "no trace id", in: []byte(hdr + `{"id":"a"}`), wantErr: true},
		{name: "subsegment without id", in: []byte(hdr + `{"trace_id":"t","id":"a","subsegments":[{"name":"x"}]}`), wantErr: true},
		{name: "subsegment not object", in: []byte(hdr + `{"trace_id":"t","id":"a","subsegments":[1]}`), wantErr: true},
		{name: "too deep", in: []byte(hdr + deep(maxDepth+2)), wantErr: true},
		{name: "too big", in: append([]byte(hdr), make([]byte, maxDatagram)...), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace, segs, err := ParseDatagram(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if trace != tt.wantTrace {
				t.Errorf("trace = %q, want %q", trace, tt.wantTrace)
			}
			if len(segs) != len(tt.want) {
				t.Fatalf("got %d segments %+v, want %d", len(segs), segs, len(tt.want))
			}
			for i, w := range tt.want {
				g := segs[i]
				if g.ID != w.ID || g.Name != w.Name || g.ParentID != w.ParentID || g.Type != w.Type ||
					g.Fault != w.Fault || g.Error != w.Error || g.InProgress != w.InProgress {
					t.Errorf("segment %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// deep returns a document nested n subsegments deep.
func deep(n int) string {
	return `{"trace_id":"t","id":"r","subsegments":[` + strings.Repeat(`{"id":"x","subsegments":[`, n) +
		strings.Repeat(`]}`, n) + `]}`
}

func TestIngestReplacesInProgress(t *testing.T) {
	c := New()
	mustIngest(t, c, "in_progress.datagram")
	tr, _ := c.Trace(lambdaTrace)
	if len(tr.Segments) != 1 || !tr.Segments[0].InProgress {
		t.Fatalf("in-progress segment not stored: %+v", tr)
	}
	mustIngest(t, c, "completed.datagram")
	mustIngest(t, c, "in_progress.datagram") // late duplicate must not win
	tr, _ = c.Trace(lambdaTrace)
	if len(tr.Segments) != 1 {
		t.Fatalf("segments = %+v, want the one subsegment", tr.Segments)
	}
	s := tr.Segments[0]
	if s.InProgress || s.End != 1795940739.5 || !s.Error || s.HTTPStatus != 404 {
		t.Fatalf("segment = %+v, want the completed document", s)
	}
}

// A remote call's subsegment keeps its request's method and path, and never
// the query (a token could be there).
func TestIngestKeepsTheRequestPath(t *testing.T) {
	c := New()
	mustIngest(t, c, "remote_call.datagram")
	tr, _ := c.Trace(lambdaTrace)
	if len(tr.Segments) != 1 {
		t.Fatalf("segments = %+v", tr.Segments)
	}
	s := tr.Segments[0]
	if s.Method != "POST" || s.Path != "/v2/bot/message/reply" || s.HTTPStatus != 200 || s.Namespace != "remote" {
		t.Fatalf("segment = %+v, want POST /v2/bot/message/reply 200 without the query", s)
	}
}

func TestLinks(t *testing.T) {
	c := New()
	mustIngest(t, c, "sdk_segment.datagram")
	mustIngest(t, c, "sdk_linked.datagram")
	mustIngest(t, c, "native_links.datagram")
	if wh, _ := c.Trace(webhookTrace); len(wh.Links) != 0 {
		t.Fatalf("webhook links = %+v", wh.Links)
	}
	want := Link{FromID: "dbb0b80f0dc13954", TraceID: webhookTrace, ParentID: "1abd08110be4166c"}
	if w, _ := c.Trace(workerTrace); len(w.Links) != 1 || w.Links[0] != want {
		t.Fatalf("worker links = %+v, want [%+v]", w.Links, want)
	}
	want = Link{FromID: "abcdabcdabcdabcd", TraceID: webhookTrace, ParentID: "1abd08110be4166c"}
	if o, _ := c.Trace(otelTrace); len(o.Links) != 1 || o.Links[0] != want {
		t.Fatalf("native links = %+v, want [%+v]", o.Links, want)
	}
}

func TestMaxTraces(t *testing.T) {
	c := New(WithMaxTraces(2))
	mustIngest(t, c, "sdk_segment.datagram")
	mustIngest(t, c, "sdk_linked.datagram")
	mustIngest(t, c, "sdk_lambda_subsegment.datagram")
	if _, ok := c.Trace(webhookTrace); ok {
		t.Fatal("oldest trace kept beyond the limit")
	}
	if got := len(c.Traces()); got != 2 {
		t.Fatalf("%d traces, want 2", got)
	}
}

func mustIngest(t *testing.T, c *Collector, name string) {
	t.Helper()
	if err := c.Ingest(golden.Read(t, filepath.Join("testdata", name))); err != nil {
		t.Fatalf("Ingest(%s): %v", name, err)
	}
}

func TestHandlerGolden(t *testing.T) {
	c := New()
	for _, f := range []string{"sdk_segment.datagram", "sdk_linked.datagram", "sdk_lambda_subsegment.datagram",
		"in_progress.datagram", "completed.datagram", "native_links.datagram"} {
		mustIngest(t, c, f)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	_, _ = got.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	golden.Check(t, filepath.Join("testdata", "handler.golden.json"), got.Bytes())
	var traces []Trace
	if err := json.Unmarshal(got.Bytes(), &traces); err != nil || len(traces) != 4 {
		t.Fatalf("decoded %d traces, %v", len(traces), err)
	}
}

func TestHandlerFilterAndMethods(t *testing.T) {
	c := New()
	mustIngest(t, c, "sdk_segment.datagram")
	mustIngest(t, c, "sdk_linked.datagram")
	h := c.Handler()
	tests := []struct {
		method, target string
		wantStatus     int
		wantTraces     []string
	}{
		{http.MethodGet, "/", 200, []string{webhookTrace, workerTrace}},
		{http.MethodGet, "/?traceId=" + workerTrace, 200, []string{workerTrace}},
		{http.MethodGet, "/?traceId=1-00000000-000000000000000000000000", 404, nil},
		{http.MethodPost, "/", 405, nil},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.wantStatus {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.target, rec.Code, tt.wantStatus)
			continue
		}
		if tt.wantStatus != 200 {
			continue
		}
		var traces []Trace
		if err := json.Unmarshal(rec.Body.Bytes(), &traces); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tr := range traces {
			ids = append(ids, tr.TraceID)
		}
		if strings.Join(ids, ",") != strings.Join(tt.wantTraces, ",") {
			t.Errorf("%s %s traces = %v, want %v", tt.method, tt.target, ids, tt.wantTraces)
		}
	}
}

func TestListenUDP(t *testing.T) {
	c := New()
	if err := c.Listen(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Listen(context.Background(), "127.0.0.1:0"); err == nil {
		t.Error("second Listen succeeded")
	}
	conn, err := net.Dial("udp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	changed := c.Changed()
	if _, err := conn.Write([]byte("junk")); err != nil { // dropped, not fatal
		t.Fatal(err)
	}
	if _, err := conn.Write(golden.Read(t, "testdata/sdk_linked.datagram")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("datagram not received")
	}
	if tr, ok := c.Trace(workerTrace); !ok || len(tr.Segments) != 2 {
		t.Fatalf("trace = %+v, %v", tr, ok)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if c.Addr() != "" {
		t.Error("Addr after Close")
	}
	if _, ok := c.Trace(workerTrace); !ok {
		t.Error("traces lost on Close")
	}
}

// FuzzParseDatagram checks that any datagram either fails with ErrMalformed
// or yields segments that all have ids, with only the first lacking a
// structural parent when it is a root segment.
func FuzzParseDatagram(f *testing.F) {
	f.Add(golden.Read(f, "testdata/sdk_segment.datagram"))
	f.Fuzz(func(t *testing.T, b []byte) {
		trace, segs, err := ParseDatagram(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if trace == "" || len(segs) == 0 {
			t.Fatalf("success without trace or segments: %q %+v", trace, segs)
		}
		for i, s := range segs {
			if s.ID == "" {
				t.Fatalf("segment %d without id", i)
			}
			if i > 0 && s.ParentID == "" {
				t.Fatalf("nested segment %d without parent", i)
			}
		}
		c := New()
		if err := c.Ingest(b); err != nil {
			t.Fatalf("Ingest rejected what ParseDatagram accepted: %v", err)
		}
		if _, err := json.Marshal(c.Traces()); err != nil {
			t.Fatalf("stored traces do not encode: %v", err)
		}
	})
}

// One trace keeps at most WithMaxSegments (sub)segments: later new ones are
// dropped, while updates of the kept ones (in progress → finished) apply.
func TestMaxSegments(t *testing.T) {
	const trace = "1-5f84c7a1-0123456789abcdef01234567"
	doc := func(id string, inProgress bool) []byte {
		end := `,"end_time":2`
		if inProgress {
			end = `,"in_progress":true`
		}
		return []byte(`{"format":"json","version":1}` + "\n" +
			`{"trace_id":"` + trace + `","id":"` + id + `","name":"s","start_time":1` + end + `}`)
	}
	c := New(WithMaxSegments(2))
	for _, d := range [][]byte{doc("a000000000000001", true), doc("a000000000000002", false), doc("a000000000000003", false), doc("a000000000000001", false)} {
		if err := c.Ingest(d); err != nil {
			t.Fatal(err)
		}
	}
	tr, _ := c.Trace(trace)
	if len(tr.Segments) != 2 || tr.Segments[0].ID != "a000000000000001" || tr.Segments[0].InProgress || tr.Segments[1].ID != "a000000000000002" {
		t.Fatalf("segments %+v: want the first two, the first one finished", tr.Segments)
	}
}
