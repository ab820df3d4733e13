package ingress

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestServeHTTP(t *testing.T) {
	body := sample(t, "message-text-user.json")
	tests := []struct {
		name    string
		method  string
		headers map[string][]string
		body    []byte
		limit   int64
		want    int
		allow   bool
	}{
		{name: "signed", method: "POST", headers: map[string][]string{"X-Line-Signature": {sign(body)}}, body: body, want: 200},
		{name: "lower-case header", method: "POST", headers: map[string][]string{"x-line-signature": {sign(body)}}, body: body, want: 200},
		{name: "duplicated header", method: "POST", headers: map[string][]string{"X-Line-Signature": {sign(body), sign(body)}}, body: body, want: 401},
		{name: "no header", method: "POST", body: body, want: 401},
		{name: "huge body refused without reading it all", method: "POST", headers: map[string][]string{"X-Line-Signature": {sign(body)}}, body: bytes.Repeat([]byte("a"), 4<<20), limit: 1 << 20, want: 413},
		{name: "PUT", method: "PUT", body: body, want: 405, allow: true},
		{name: "GET", method: "GET", want: 405, allow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			var opts []Option
			if tt.limit > 0 {
				opts = append(opts, WithMaxBodyBytes(tt.limit))
			}
			srv := httptest.NewServer(newHandler(t, pub, opts...))
			defer srv.Close()
			req, _ := http.NewRequest(tt.method, srv.URL+"/webhook", bytes.NewReader(tt.body))
			for k, vs := range tt.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.want, got)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			if tt.allow && resp.Header.Get("Allow") != "POST" {
				t.Fatalf("405 without Allow: POST")
			}
			if tt.want != 200 && len(pub.sent) != 0 {
				t.Fatal("published on a rejected request")
			}
		})
	}
}

func TestAPIGateway(t *testing.T) {
	body := sample(t, "message-text-user.json")
	b64 := base64.StdEncoding.EncodeToString(body)
	tests := []struct {
		name string
		req  events.APIGatewayProxyRequest
		want int
	}{
		{name: "plain body, canonical header", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: string(body), Headers: map[string]string{"X-Line-Signature": sign(body)}}, want: 200},
		{name: "header in any case", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: string(body), Headers: map[string]string{"X-LINE-SIGNATURE": sign(body)}}, want: 200},
		{name: "multi-value headers only", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: string(body), MultiValueHeaders: map[string][]string{"x-line-signature": {sign(body)}}}, want: 200},
		{name: "duplicated in multi-value", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: string(body), MultiValueHeaders: map[string][]string{"x-line-signature": {sign(body), sign(body)}}}, want: 401},
		{name: "two spellings in headers", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: string(body), Headers: map[string]string{"x-line-signature": sign(body), "X-Line-Signature": sign(body)}}, want: 401},
		{name: "base64 body is decoded before verifying", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: b64, IsBase64Encoded: true, Headers: map[string]string{"x-line-signature": sign(body)}}, want: 200},
		{name: "base64 body signed as encoded text fails", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: b64, IsBase64Encoded: true, Headers: map[string]string{"x-line-signature": sign([]byte(b64))}}, want: 401},
		{name: "broken base64", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: "%%%", IsBase64Encoded: true, Headers: map[string]string{"x-line-signature": sign(body)}}, want: 400},
		{name: "huge base64 refused before decoding", req: events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: strings.Repeat("QUFB", 1<<19), IsBase64Encoded: true}, want: 413},
		{name: "lower-case method", req: events.APIGatewayProxyRequest{HTTPMethod: "post", Body: string(body), Headers: map[string]string{"x-line-signature": sign(body)}}, want: 200},
		{name: "GET", req: events.APIGatewayProxyRequest{HTTPMethod: "GET"}, want: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			h := newHandler(t, pub)
			resp, err := h.APIGateway(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("adapter returned an error: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.want, resp.Body)
			}
			if tt.want == 200 && len(pub.sent) != 1 {
				t.Fatalf("published %d", len(pub.sent))
			}
			if tt.want != 200 && len(pub.sent) != 0 {
				t.Fatal("published on a rejected request")
			}
			if tt.want == 405 && resp.Headers["Allow"] != "POST" {
				t.Fatal("405 without Allow")
			}
		})
	}
}

// countingReader is an endless request body that counts what was read of it.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// The net/http adapter reads at most the limit plus one byte of a body, so a
// client streaming gigabytes costs no more memory than the limit.
func TestServeHTTPReadsNoMoreThanTheLimit(t *testing.T) {
	const limit = 64 << 10
	pub := &fakePublisher{}
	h := newHandler(t, pub, WithMaxBodyBytes(limit))
	body := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, "/webhook", body)
	req.Header.Set("X-Line-Signature", sign([]byte("x")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", rec.Code)
	}
	// io.LimitReader asks for at most limit+1 bytes; a read buffer may be
	// filled once past it, never more.
	if body.n > limit+1+32<<10 {
		t.Fatalf("read %d bytes of the body for a %d-byte limit", body.n, limit)
	}
	if pub.calls != 0 {
		t.Fatal("an oversized body was published")
	}
}

// The API Gateway adapter refuses a base64 body that cannot fit once decoded
// before decoding it: an oversized body that is not even valid base64 is a
// 413 (had it been decoded first, it would be a 400).
func TestAPIGatewayRefusesBeforeDecoding(t *testing.T) {
	const limit = 1 << 10
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"oversized and not base64", strings.Repeat("!", 4*limit), 413},
		{"oversized base64", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("a"), 2*limit)), 413},
		{"small and not base64", "!!!!", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(t, &fakePublisher{}, WithMaxBodyBytes(limit))
			resp, err := h.APIGateway(context.Background(), events.APIGatewayProxyRequest{
				HTTPMethod: "POST", Body: tc.body, IsBase64Encoded: true,
				Headers: map[string]string{"x-line-signature": sign([]byte(tc.body))},
			})
			if err != nil || resp.StatusCode != tc.want {
				t.Fatalf("status %d (%v), want %d: %s", resp.StatusCode, err, tc.want, resp.Body)
			}
		})
	}
}
