package console_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// safeURL (web/dom.js), the one gate between a URL a message carries and a
// link or window.open, keeps only http and https — also when the scheme is
// spelled in capitals, padded, or broken by characters the URL parser
// drops — and refuses javascript:, data:, vbscript: and file:. Run in the
// page, on the module the console itself loads.
func TestBrowserSafeURLKeepsOnlyHTTPLinks(t *testing.T) {
	p := open(t, "")
	tests := []struct {
		url  string
		want bool
	}{
		{"https://example.com/a", true},
		{"http://example.com/a", true},
		{"HTTPS://EXAMPLE.COM/", true},
		{"/relative/path", true}, // resolves against the console's http origin
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)", false},
		{" javascript:alert(1)", false},
		{"java\tscript:alert(1)", false},
		{"java\nscript:alert(1)", false},
		{"javascript://example.com/%0Aalert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"vbscript:msgbox(1)", false},
		{"file:///etc/passwd", false},
		{"blob:https://example.com/uuid", false},
	}
	urls := make([]string, len(tests))
	for i, tt := range tests {
		urls[i] = tt.url
	}
	list, _ := json.Marshal(urls)
	ctx, cancel := context.WithTimeout(p.ctx, waitFor)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`import('/console/dom.js').then(m => `+string(list)+`.map(u => m.safeURL(u)))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate safeURL in the page: %v", err)
	}
	if len(got) != len(tests) {
		t.Fatalf("%d answers for %d URLs", len(got), len(tests))
	}
	for i, tt := range tests {
		if got[i] != tt.want {
			t.Errorf("safeURL(%q) = %v, want %v", tt.url, got[i], tt.want)
		}
	}
}
