package linemock

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Paths of the channel's settings, its quota and its token endpoints.
const (
	PathQuota            = "/v2/bot/message/quota"             // GET: the month's target limit
	PathQuotaConsumption = "/v2/bot/message/quota/consumption" // GET: messages sent this month
	PathWebhookEndpoint  = "/v2/bot/channel/webhook/endpoint"  // GET, PUT: the webhook URL
	PathWebhookTest      = "/v2/bot/channel/webhook/test"      // POST: a test delivery
	PathTokenStateless   = "/oauth2/v3/token"                  // POST: issue a stateless channel access token
	PathTokenV21         = "/oauth2/v2.1/token"                // POST: issue a channel access token v2.1
)

// Messages LINE answers with for the quota and tokens.
const (
	// MsgMonthlyLimit: a push beyond the month's limit (429).
	MsgMonthlyLimit = "You have reached your monthly limit."
	// MsgInvalidClient: the token endpoints' error for wrong credentials.
	MsgInvalidClient = "invalid_client"
)

// Token lifetimes as LINE issues them.
const (
	// StatelessTokenTTL is how long a stateless channel access token lives.
	StatelessTokenTTL = 15 * time.Minute
	// maxV21TokenTTL caps a v2.1 token's requested lifetime (30 days).
	maxV21TokenTTL = 30 * 24 * time.Hour
	// assertionAudience is the aud LINE requires in a v2.1 JWT.
	assertionAudience = "https://api.line.me/"
	// jwtBearer is the client_assertion_type of a JWT assertion.
	jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// WebhookTester delivers LINE's test webhook to endpoint and reports what the
// webhook answered (the local runtime signs and posts one to itself).
type WebhookTester func(ctx context.Context, endpoint string) (status int, reason string)

// WithChannel sets the channel's ID and secret, so the stateless token
// endpoint issues tokens to them.
func WithChannel(id, secret string) Option {
	return func(s *Server) { s.def.id, s.def.secret = id, secret }
}

// WithAssertionKey registers the public half of an assertion signing key
// under kid, so the v2.1 token endpoint accepts JWTs signed with it.
func WithAssertionKey(kid string, key *rsa.PublicKey) Option {
	return func(s *Server) {
		if s.assertionKeys == nil {
			s.assertionKeys = map[string]*rsa.PublicKey{}
		}
		s.assertionKeys[kid] = key
	}
}

// WithTokenTTL sets the lifetime of issued stateless tokens (default 15
// minutes, as on LINE; `linegate local` compresses it with its time scale).
func WithTokenTTL(d time.Duration) Option { return func(s *Server) { s.tokenTTL = d } }

// WithWebhookTester sets what the test-delivery endpoint calls.
func WithWebhookTester(t WebhookTester) Option { return func(s *Server) { s.tester = t } }

// Quota is the month's limit and use, as POST /_local/line/quota sets them.
type Quota struct {
	// Limit is the month's target limit; negative means no limit (type
	// "none").
	Limit int64 `json:"limit"`
	// Used is how many messages were pushed this month.
	Used int64 `json:"used"`
}

// Channel is the channel's console settings the Messaging API cannot read
// (webhook redelivery) together with those it can, as the local console
// reports them.
type Channel struct {
	Endpoint   string `json:"endpoint"`
	Active     bool   `json:"active"`
	Redelivery bool   `json:"redelivery"`
}

// SetQuota sets the default channel's month's limit and use. A push is
// refused with LINE's 429 monthly-limit answer once use reaches a
// non-negative limit.
func (s *Server) SetQuota(q Quota) { s.SetChannelQuota("", q) }

// CurrentQuota returns the default channel's month's limit and use.
func (s *Server) CurrentQuota() Quota { return s.ChannelQuota("") }

// SetChannelQuota sets channel ch's month's limit and use: each channel
// has its own quota. An unknown channel changes nothing.
func (s *Server) SetChannelQuota(ch string, q Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accountLocked(ch); a != nil {
		a.quota = q
	}
}

// ChannelQuota returns channel ch's month's limit and use.
func (s *Server) ChannelQuota(ch string) Quota {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountLocked(ch).quota
}

// SetChannel sets the default channel's webhook URL, "Use webhook" and
// webhook redelivery.
func (s *Server) SetChannel(c Channel) { s.SetChannelSettings("", c) }

// ChannelSettings returns the default channel's webhook settings.
func (s *Server) ChannelSettings() Channel { return s.NamedChannelSettings("") }

// SetChannelSettings sets channel ch's webhook settings.
func (s *Server) SetChannelSettings(ch string, c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accountLocked(ch); a != nil {
		a.settings = c
	}
}

// NamedChannelSettings returns channel ch's webhook settings ("" for the
// default channel).
func (s *Server) NamedChannelSettings(ch string) Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountLocked(ch).settings
}

// ExpireTokens expires every issued token at once, as if their lifetime had
// passed: the next call with one gets 401, the client refreshes.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, it := range s.issued {
		it.expires = time.Time{}
		s.issued[k] = it
	}
}

// IssuedTokens is how many tokens the token endpoints issued.
func (s *Server) IssuedTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issuedCount
}

// QuotaHandler serves POST /_local/line/quota ({"limit": N, "used": M}) and
// GET (the current values); ?channel=NAME is a named channel's.
func (s *Server) QuotaHandler() http.Handler {
	return settingsHandler(s, s.ChannelQuota, s.SetChannelQuota, func(q Quota) bool { return q.Used >= 0 },
		`want {"limit": N, "used": M} with M >= 0 (a negative limit means none)`)
}

// ChannelHandler serves GET and PUT /_local/line/channel: the channel's
// webhook URL, "Use webhook" and redelivery settings, the console page the
// Messaging API has no read access to (redelivery); ?channel=NAME is a
// named channel's.
func (s *Server) ChannelHandler() http.Handler {
	return settingsHandler(s, s.NamedChannelSettings, s.SetChannelSettings, func(Channel) bool { return true },
		`want {"endpoint": URL, "active": bool, "redelivery": bool}`)
}

// settingsHandler serves one of the local console's settings of the
// channel ?channel= names (the default channel without it): GET reads it,
// POST or PUT replaces it with a JSON body that valid accepts; an unknown
// channel is 404.
func settingsHandler[T any](s *Server, get func(string) T, set func(string, T), valid func(T) bool, usage string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := r.URL.Query().Get("channel")
		if ch == "default" {
			ch = ""
		}
		s.mu.Lock()
		known := s.accountLocked(ch) != nil
		s.mu.Unlock()
		if !known {
			writeJSON(w, http.StatusNotFound, errorBody{Message: "no such channel"})
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, get(ch))
		case http.MethodPost, http.MethodPut:
			var v T
			dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil || !valid(v) {
				writeJSON(w, http.StatusBadRequest, errorBody{Message: usage})
				return
			}
			set(ch, v)
			writeJSON(w, http.StatusOK, v)
		default:
			w.Header().Set("Allow", "GET, POST, PUT")
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{Message: "Method not allowed"})
		}
	})
}

func (s *Server) handleQuota(w http.ResponseWriter, r *http.Request, _ string) {
	q := s.ChannelQuota(channelOf(r))
	if q.Limit < 0 {
		writeJSON(w, http.StatusOK, map[string]any{"type": "none"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "limited", "value": q.Limit})
}

func (s *Server) handleConsumption(w http.ResponseWriter, r *http.Request, _ string) {
	writeJSON(w, http.StatusOK, map[string]any{"totalUsage": s.ChannelQuota(channelOf(r)).Used})
}

func (s *Server) handleWebhookEndpoint(w http.ResponseWriter, r *http.Request, _ string) {
	ch := channelOf(r)
	if r.Method == http.MethodGet {
		c := s.NamedChannelSettings(ch)
		if c.Endpoint == "" {
			// LINE answers 404 when no webhook URL is set.
			writeJSON(w, http.StatusNotFound, errorBody{Message: "Not found"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": c.Endpoint, "active": c.Active})
		return
	}
	obj, e := readObject(r)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	var c checker
	ep, _ := c.str(obj, "endpoint", "endpoint", true)
	if ep != "" && (!strings.HasPrefix(ep, "https://") || len(ep) > 500) {
		c.add("endpoint", "must be a valid HTTPS URL of at most 500 characters")
	}
	if err := c.err(); err != nil {
		writeAPIError(w, err)
		return
	}
	s.mu.Lock()
	s.accountLocked(ch).settings.Endpoint = ep
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleWebhookTest(w http.ResponseWriter, r *http.Request, _ string) {
	var req struct {
		Endpoint string `json:"endpoint"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req)
	ch := channelOf(r)
	ep := req.Endpoint
	if ep == "" {
		ep = s.NamedChannelSettings(ch).Endpoint
	}
	if ep == "" {
		writeJSON(w, http.StatusBadRequest, errorBody{Message: "The webhook URL is not set"})
		return
	}
	status, reason := 0, "no webhook tester configured"
	switch {
	case s.chanTester != nil:
		status, reason = s.chanTester(r.Context(), ch, ep)
	case s.tester != nil && ch == "":
		status, reason = s.tester(r.Context(), ep)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": status/100 == 2, "timestamp": s.now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"statusCode": status, "reason": reason, "detail": fmt.Sprint(status),
	})
}

// handleToken issues a stateless token (client_id + client_secret, or a JWT
// assertion) or a v2.1 token (a JWT assertion), answering wrong
// credentials with 400 invalid_client as LINE does.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request, _ string) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "some parameters missed or invalid"})
		return
	}
	f := r.PostForm
	ttl := s.tokenTTL
	ch, stateless := s.statelessClient(f.Get("client_id"), f.Get("client_secret"))
	switch {
	case f.Get("client_assertion") != "":
		life, assertedCh, ok := s.verifyAssertion(f.Get("client_assertion_type"), f.Get("client_assertion"))
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": MsgInvalidClient, "error_description": "invalid client assertion"})
			return
		}
		ch = assertedCh
		if r.URL.Path == PathTokenV21 {
			ttl = life
		}
	case r.URL.Path == PathTokenStateless && stateless:
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": MsgInvalidClient, "error_description": "invalid client_id or client_secret"})
		return
	}
	tok := "lm." + uuid.NewString()
	s.mu.Lock()
	if s.issued == nil {
		s.issued = map[string]issuedToken{}
	}
	now := s.now()
	for k, it := range s.issued {
		if !now.Before(it.expires) {
			delete(s.issued, k)
		}
	}
	s.issued[tok] = issuedToken{expires: now.Add(ttl), channel: ch}
	s.issuedCount++
	s.mu.Unlock()
	body := map[string]any{"token_type": "Bearer", "access_token": tok, "expires_in": int64(ttl / time.Second)}
	if r.URL.Path == PathTokenV21 {
		body["key_id"] = "kid-" + tok[3:11]
	}
	writeJSON(w, http.StatusOK, body)
}

// verifyAssertion checks a v2.1 JWT: RS256 signed by a registered key, iss
// and sub the channel, aud LINE's API, not expired; it returns the token
// lifetime asked for (token_exp, capped at 30 days) and the channel the
// iss names ("" for the default channel, or an ID no channel has).
func (s *Server) verifyAssertion(typ, jwt string) (time.Duration, string, bool) {
	if typ != jwtBearer {
		return 0, "", false
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return 0, "", false
	}
	var h struct{ Alg, Kid string }
	var c struct {
		Iss, Sub, Aud string
		Exp           int64
		TokenExp      int64 `json:"token_exp"`
	}
	if !decodeSegment(parts[0], &h) || !decodeSegment(parts[1], &c) || h.Alg != "RS256" {
		return 0, "", false
	}
	s.mu.Lock()
	key := s.assertionKeys[h.Kid]
	defID := s.def.id
	ch, named := "", false
	for name, a := range s.named {
		if a.id != "" && a.id == c.Iss {
			ch, named = name, true
		}
	}
	s.mu.Unlock()
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if key == nil || err != nil {
		return 0, "", false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		return 0, "", false
	}
	if c.Iss == "" || c.Iss != c.Sub || (defID != "" && c.Iss != defID && !named) || c.Aud != assertionAudience ||
		!s.now().Before(time.Unix(c.Exp, 0)) || c.TokenExp <= 0 {
		return 0, "", false
	}
	return min(time.Duration(c.TokenExp)*time.Second, maxV21TokenTTL), ch, true
}

func decodeSegment(seg string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && json.Unmarshal(b, v) == nil
}

// validIssuedLocked reports whether token was issued and has not expired.
func (s *Server) validIssuedLocked(token string) bool {
	it, ok := s.issued[token]
	return ok && s.now().Before(it.expires)
}
