// Package console is the browser side of `linegate local`: a page served at
// "/" where a bot author chats with the bot as a LINE user, watches the
// operator's phone, the queues, DLQs and alarms, opens each webhook event's
// timeline and X-Ray waterfall, reads the logs, and acts on failures
// (redrive, replay, LINE faults, a worker crash).
//
// The page is plain HTML, CSS and JavaScript modules embedded with go:embed:
// no build step, no framework, nothing fetched from the network. Everything
// it shows comes from JSON endpoints under /_local/ (internal/local serves
// them); this package holds the parts that do not need the runtime: the
// assets, the server-sent event stream that tells the page what changed,
// the chat transcript and per-event activity, the log ring, the parsing of
// what the page asks to send, and the event timeline.
package console

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed web
var web embed.FS

// AssetPrefix is the path the page's scripts and styles are served under.
const AssetPrefix = "/console/"

// securityHeaders are sent with the page and every asset: scripts, styles,
// images and connections only from this origin (no inline script, so an
// injected tag cannot run), no framing, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-cache",
}

// Assets serves the page: GET / is index.html, GET /console/NAME the
// scripts and styles. The assets hold no data (every datum comes from
// /_local/), so they may be served without the token a remote console needs.
func Assets() http.Handler {
	sub, _ := fs.Sub(web, "web") // "web" is a valid path: Sub cannot fail
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			name = strings.TrimPrefix(r.URL.Path, AssetPrefix)
		}
		if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(b)
	})
}

// IsAsset reports whether a request is for the page or one of its assets:
// the requests a remote console may make before it has sent the token.
func IsAsset(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, AssetPrefix)
}

// Action guards a handler the page calls to change something (send,
// redrive, replay, faults, crash): a POST with a JSON body, and when the
// browser names the page's origin, this server's own. A cross-site page
// cannot make such a request without a CORS preflight, which nothing here
// answers, so another site open in the same browser cannot act on a
// loopback console (the token guards a remote one).
func Action(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "send Content-Type: application/json"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
			WriteJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused"})
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			WriteJSON(w, http.StatusForbidden, map[string]string{"error": "cross-site request refused"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
