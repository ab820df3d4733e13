package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/linegate/linegate/internal/lineplatform"
)

func TestAssets(t *testing.T) {
	srv := httptest.NewServer(Assets())
	defer srv.Close()
	tests := []struct {
		path, wantType string
		want           int
	}{
		{"/", "text/html", 200},
		{"/console/main.js", "text/javascript", 200},
		{"/console/console.css", "text/css", 200},
		{"/console/", "", 404},
		{"/console/../console.go", "", 404},
		{"/console/nothing.js", "", 404},
		{"/console/%2e%2e/console.go", "", 404},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.want)
			continue
		}
		if tt.want != 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
			t.Errorf("GET %s: Content-Type %q, want %s", tt.path, ct, tt.wantType)
		}
		// No inline script can run, whatever a message manages to inject.
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP %q", tt.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", tt.path, resp.Header)
		}
	}
}

// The page has no inline script and loads nothing from another origin: it
// works offline, and the CSP would refuse either.
func TestPageIsSelfContained(t *testing.T) {
	for _, name := range []string{"web/index.html", "web/main.js", "web/chat.js", "web/line.js", "web/dom.js", "web/api.js", "web/pipeline.js", "web/events.js", "web/logs.js", "web/console.css"} {
		b, err := web.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, bad := range []string{"http://", "https://", "//cdn", "innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if name == "web/index.html" && strings.Contains(s, "<script>") {
			t.Errorf("index.html has an inline script")
		}
	}
}

func TestIsAsset(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/", true}, {"HEAD", "/console/main.js", true}, {"GET", "/console/x", true},
		{"POST", "/", false}, {"GET", "/_local/chats", false}, {"GET", "/consolex", false}, {"GET", "/webhook", false},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if got := IsAsset(r); got != tt.want {
			t.Errorf("IsAsset(%s %s) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestActionRefusesCrossSiteAndNonJSON(t *testing.T) {
	var ran atomic.Int32
	h := Action(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran.Add(1); w.WriteHeader(204) }))
	tests := []struct {
		name, method, ctype string
		headers             map[string]string
		want                int
	}{
		{"same-origin JSON", "POST", "application/json", map[string]string{"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-origin"}, 204},
		{"no Origin (curl)", "POST", "application/json; charset=utf-8", nil, 204},
		{"GET", "GET", "", nil, 405},
		{"a form post (no preflight)", "POST", "text/plain", nil, 415},
		{"form-encoded", "POST", "application/x-www-form-urlencoded", nil, 415},
		{"another origin", "POST", "application/json", map[string]string{"Origin": "http://evil.example"}, 403},
		{"cross-site fetch", "POST", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site, other port", "POST", "application/json", map[string]string{"Origin": "http://127.0.0.1:8080"}, 403},
	}
	for _, tt := range tests {
		ran.Store(0)
		r := httptest.NewRequest(tt.method, "http://127.0.0.1:3000/_local/send", strings.NewReader(`{}`))
		if tt.ctype != "" {
			r.Header.Set("Content-Type", tt.ctype)
		}
		for k, v := range tt.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || (ran.Load() == 1) != (tt.want == 204) {
			t.Errorf("%s: %d (handler ran: %v), want %d", tt.name, w.Code, ran.Load() == 1, tt.want)
		}
	}
}

func newPlatform() *lineplatform.Platform { return lineplatform.New("http://unused.invalid", nil) }
