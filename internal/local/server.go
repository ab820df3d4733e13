package local

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/linegate/linegate/internal/channel"
)

// Limits are the local HTTP server's timeouts and body limits: a dev server
// left running all day must not be held open by a slow client nor made to
// buffer whatever a client sends.
type Limits struct {
	// ReadHeaderTimeout closes a connection whose request headers have not
	// all arrived (a slowloris client).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (LINE
	// itself gives up on a webhook after 2 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its response: above the webhook function's timeout and SQS's 20 s
	// long poll.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxBodyBytes bounds the body on every path but the webhook's (the
	// AWS endpoints, the LINE API mock, /_local); the webhook reads through
	// its function's own MAX_BODY_BYTES.
	MaxBodyBytes int64
}

// DefaultLimits are the limits `linegate local` serves with.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       120 * time.Second,
	MaxHeaderBytes:    64 << 10,
	MaxBodyBytes:      4 << 20,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	return Limits{
		ReadHeaderTimeout: positiveOr(l.ReadHeaderTimeout, d.ReadHeaderTimeout),
		ReadTimeout:       positiveOr(l.ReadTimeout, d.ReadTimeout),
		WriteTimeout:      positiveOr(l.WriteTimeout, d.WriteTimeout),
		IdleTimeout:       positiveOr(l.IdleTimeout, d.IdleTimeout),
		MaxHeaderBytes:    positiveOr(l.MaxHeaderBytes, d.MaxHeaderBytes),
		MaxBodyBytes:      positiveOr(l.MaxBodyBytes, d.MaxBodyBytes),
	}
}

// positiveOr is v when positive, else def.
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// ErrRemoteNotAllowed is returned by Start for an address beyond loopback
// without Config.AllowRemote.
var ErrRemoteNotAllowed = errors.New("refusing to listen beyond loopback")

// ErrAddrInUse is returned by Start when another process holds the address.
var ErrAddrInUse = errors.New("address already in use")

// listen binds cfg.Addr: loopback unless cfg.AllowRemote, with errors that
// say what to do.
func listen(cfg Config) (net.Listener, error) {
	loop, err := isLoopback(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %s: %w", cfg.Addr, err)
	}
	if !loop && !cfg.AllowRemote {
		return nil, fmt.Errorf("%w: %s would expose /_local, the AWS endpoints and the LINE API mock to the network; "+
			"use 127.0.0.1:PORT, or pass --allow-remote (every path but the webhook then needs the token printed at start)", ErrRemoteNotAllowed, cfg.Addr)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: %w (another linegate local?): stop it, or pick another port with --addr 127.0.0.1:3001", cfg.Addr, ErrAddrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && !cfg.AllowRemote {
		_ = ln.Close()
		return nil, fmt.Errorf("%w: %s resolved to %s", ErrRemoteNotAllowed, cfg.Addr, a.IP)
	}
	return ln, nil
}

// isLoopback reports whether every address addr's host names is loopback.
// An empty host (":3000") is every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	switch {
	case host == "":
		return false, nil
	case strings.EqualFold(host, "localhost"):
		return true, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// newToken is a random token for a server reachable beyond loopback.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// guard wraps every handler of the server:
//   - a request a web page in the developer's browser made from another
//     origin is refused on every path but the console's page and assets
//     (crossOrigin): a page open in the same browser must not subscribe a
//     queue to the ops topic, publish a forged event, spend the quota or
//     switch redelivery off;
//   - the AWS endpoint (POST /) takes only requests signed with AWS
//     Signature Version 4, as every SDK and the AWS CLI sends them: a form a
//     page posts carries no such header, and a page cannot add one without
//     a CORS preflight, which nothing here answers;
//   - bodies are read through Limits.MaxBodyBytes (a declared larger length
//     is refused at once) on every path but the webhook's, which reads
//     through its own limit;
//   - with a token, every path but the webhook's needs it: the webhook stays
//     open as API Gateway's does, protected by the LINE signature;
//   - without one (loopback), requests must name a loopback host, so a web
//     page cannot reach the inspect and AWS endpoints by DNS rebinding.
type guard struct {
	next    http.Handler
	limits  Limits
	token   string
	webhook func(path string) bool
	// public requests hold no data and need no token (the console's page
	// and scripts, which then send the token on every data request); a
	// link on another site may open them.
	public func(r *http.Request) bool
}

func (g guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	isPublic := g.public != nil && g.public(r)
	if why := crossOrigin(r); why != "" && !isPublic {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "refused: a request from a web page of another origin (" + why +
			"): linegate local acts only for its own console, the SDKs and the command line"})
		return
	}
	if g.webhook(r.URL.Path) {
		g.next.ServeHTTP(w, r)
		return
	}
	switch {
	case g.token != "" && !hasToken(r, g.token) && !isPublic:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "this linegate local is reachable beyond loopback: " +
			"send the token printed at start (Authorization: Bearer TOKEN, X-Linegate-Token: TOKEN, ?token=TOKEN, or TOKEN as the AWS access key id)"})
		return
	case g.token == "" && !loopbackHost(r.Host):
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "Host is not a loopback name: refused (DNS rebinding guard)"})
		return
	case isAWSEndpoint(r) && !sigV4Shaped(r.Header.Get("Authorization")):
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "the AWS endpoint takes requests signed with AWS Signature Version 4 " +
			"(Authorization: AWS4-HMAC-SHA256 Credential=…): an SDK or the AWS CLI with any credentials signs every request"})
		return
	case r.ContentLength > g.limits.MaxBodyBytes:
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body too large"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, g.limits.MaxBodyBytes)
	g.next.ServeHTTP(w, r)
}

// crossOrigin says why r was made by a web page of another origin than this
// server's, or "" when it was not: a browser names the page's origin in
// Origin (on every cross-origin request but a plain GET) and says in
// Sec-Fetch-Site where the request comes from ("same-origin", or "none"
// for an address typed or opened from a bookmark; "same-site" is another
// port of the same host, e.g. another dev server). The SDKs, the CLI, curl
// and LINE send neither header.
func crossOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "http://"+r.Host) && !strings.EqualFold(o, "https://"+r.Host) {
		return "Origin " + o
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return ""
	default:
		return "Sec-Fetch-Site " + site
	}
}

// isAWSEndpoint reports whether r is for the AWS endpoint: the SDKs post
// every call of the JSON and query protocols to "/".
func isAWSEndpoint(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/"
}

// sigV4Shaped reports whether auth has the shape of a Signature Version 4
// Authorization header: AWS4-HMAC-SHA256 Credential=KEY/YYYYMMDD/REGION/
// SERVICE/aws4_request, SignedHeaders=…;host;…, Signature=<64 hex digits>
// (docs/security.md cites AWS's reference). The signature is not checked:
// the access key id is the only secret a local client has (the token, when
// one is set), and it travels in the header anyway.
func sigV4Shaped(auth string) bool {
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return false
	}
	var cred, signed, sig string
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return false
		}
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		default:
			return false
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[0] == "" || !allIn(scope[1], "0123456789") || len(scope[1]) != 8 ||
		scope[2] == "" || scope[3] == "" || scope[4] != "aws4_request" {
		return false
	}
	if !slices.Contains(strings.Split(signed, ";"), "host") {
		return false
	}
	return len(sig) == 64 && allIn(sig, "0123456789abcdef")
}

// allIn reports whether every byte of s is one of chars.
func allIn(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(chars, rune(s[i])) {
			return false
		}
	}
	return true
}

// hasToken reports whether r carries token: as a bearer token (the LINE API
// mock's clients send the channel access token, which is the token when one
// is set, or for a named channel the token and ":NAME"), in X-Linegate-Token, in ?token=, or as the access key id of an
// AWS SigV4 Authorization header (the SDKs' and the CLI's way to send it).
func hasToken(r *http.Request, token string) bool {
	auth := r.Header.Get("Authorization")
	candidates := []string{r.Header.Get("X-Linegate-Token"), r.URL.Query().Get("token")}
	if scheme, rest, ok := strings.Cut(auth, " "); ok {
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			bearer := strings.TrimSpace(rest)
			// A named channel's access token is the token, a colon and the
			// channel's name (ChannelToken): the local LINE API tells the
			// channels apart by it, and it still holds the token.
			if i := strings.LastIndexByte(bearer, ':'); i > 0 && channel.Valid(bearer[i+1:]) == nil {
				candidates = append(candidates, bearer[:i])
			}
			candidates = append(candidates, bearer)
		case scheme == "AWS4-HMAC-SHA256":
			if _, cred, ok := strings.Cut(rest, "Credential="); ok {
				id, _, _ := strings.Cut(cred, "/")
				candidates = append(candidates, id)
			}
		}
	}
	for _, c := range candidates {
		if c != "" && subtle.ConstantTimeCompare([]byte(c), []byte(token)) == 1 {
			return true
		}
	}
	return false
}

// loopbackHost reports whether a Host header names this machine: localhost
// (and *.localhost), a loopback IP, or host.docker.internal (a container of
// `sam local invoke` reaching the host).
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || host == "host.docker.internal" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
