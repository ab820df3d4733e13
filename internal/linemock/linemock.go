// Package linemock is a local LINE Messaging API: an http.Handler that answers
// the calls linegate makes (reply, push, loading animation, mark as read, bot
// info, the month's quota and consumption, the webhook endpoint and its test
// delivery, and the channel access token endpoints) the way api.line.me
// does, so the worker, the notifier and the quota governor can be exercised
// in tests and under `linegate local` without a channel.
//
// It keeps the month's quota (SetQuota; a push beyond the limit gets LINE's
// 429 "You have reached your monthly limit.") and issues stateless and v2.1
// tokens that expire (WithTokenTTL, ExpireTokens), so clients refresh.
//
// It keeps LINE's rules that matter for correctness: reply tokens are
// single-use and expire; a push whose X-Line-Retry-Key was accepted in the
// last 24 hours answers 409 with x-line-accepted-request-id; request bodies are
// validated against the Messaging API spec and rejected with LINE's error
// shape; every response carries x-line-request-id. Faults (429, 5xx, slow
// responses, lost responses) can be queued per path. Every accepted send is
// recorded for assertions.
package linemock

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/linegate/linegate/internal/ring"
)

// API paths the Server answers.
const (
	PathReply   = "/v2/bot/message/reply"      // POST: send reply message
	PathPush    = "/v2/bot/message/push"       // POST: send push message
	PathLoading = "/v2/bot/chat/loading/start" // POST: display a loading animation
	// PathMarkAsRead marks a user's messages read up to the one whose
	// markAsReadToken the body names (POST, {"markAsReadToken": "…"}).
	PathMarkAsRead = "/v2/bot/chat/markAsRead"
	PathBotInfo    = "/v2/bot/info" // GET: bot info
	// PathUnknown is the Calls key of every path the Server does not serve.
	PathUnknown = "(unknown)"
)

// Via names the API a recorded message went through.
type Via string

// The two ways a message reaches a chat.
const (
	ViaReply Via = "reply" // sent with a reply token
	ViaPush  Via = "push"  // pushed to a user, group or room
)

const (
	// DefaultReplyTokenTTL is how long LINE accepts a reply token after it
	// issued the webhook carrying it.
	DefaultReplyTokenTTL = time.Minute
	// RetryKeyTTL is how long LINE remembers an accepted X-Line-Retry-Key.
	RetryKeyTTL = 24 * time.Hour
	// maxBodyBytes is LINE's request size limit (413 above it).
	maxBodyBytes = 2 << 20
	// DefaultMaxRecords is how many sends (and, apart, loading animations)
	// a Server keeps for Messages and Loading: the newest ones. A dev server
	// left running all day keeps a bounded history.
	DefaultMaxRecords = 1000
	// sweepEvery bounds how often expired reply tokens and retry keys are
	// forgotten.
	sweepEvery = time.Minute
)

// Header names LINE uses.
const (
	HeaderRequestID         = "X-Line-Request-Id"          // on every response
	HeaderAcceptedRequestID = "X-Line-Accepted-Request-Id" // on a 409: the first accepted request
	HeaderRetryKey          = "X-Line-Retry-Key"           // optional UUID on a push
)

// Error messages LINE answers with; tests and clients match on them.
const (
	// MsgInvalidReplyToken: the reply token is unknown, used or expired.
	MsgInvalidReplyToken = "Invalid reply token"
	// MsgRetryKeyAccepted: a push repeated an accepted X-Line-Retry-Key (409).
	MsgRetryKeyAccepted = "The retry key is already accepted"
	// MsgRateLimited: the default body of an injected 429.
	MsgRateLimited = "The API rate limit has been exceeded. Try again later."
	// MsgInternalServerError: the default body of an injected 5xx.
	MsgInternalServerError = "Internal server error"
	// MsgInvalidReadToken: a mark-as-read token the Server never issued
	// (400), in the words of LINE's spec.
	MsgInvalidReadToken = "An invalid markAsReadToken is specified. Tokens must be used by the bot that received them via Webhook."
	// MsgAuthRequired: no bearer token (401).
	MsgAuthRequired = "Authorization header required. Must follow the scheme, 'Authorization: Bearer <ACCESS TOKEN>'"
	// MsgAuthInvalid: a bearer token not in WithTokens (401).
	MsgAuthInvalid = "Authentication failed due to the following reason: invalid token. Confirm that the access token in the authorization header is valid."
)

// Record is one accepted message send (a reply or a push), as the Server
// recorded it. Messages are the message objects exactly as the client sent
// them.
type Record struct {
	// To is the push recipient, or for a reply the chat the token was issued
	// for (empty when the token was not registered with a recipient).
	To string `json:"to"`
	// Via is "reply" or "push".
	Via Via `json:"via"`
	// RetryKey is the push's X-Line-Retry-Key ("" when none was sent).
	RetryKey string `json:"retryKey"`
	// ReplyToken is the token a reply used ("" for a push). These are the
	// mock's own tokens, not secrets.
	ReplyToken string `json:"replyToken,omitempty"`
	// Messages are the raw message objects in request order.
	Messages []json.RawMessage `json:"messages"`
	// NotificationDisabled is the request's flag.
	NotificationDisabled bool `json:"notificationDisabled,omitempty"`
	// RequestID is the x-line-request-id the Server answered with.
	RequestID string `json:"requestId"`
	// At is when the Server accepted the send (its clock).
	At time.Time `json:"at"`
	// Channel is the channel whose token sent it ("" for the default
	// channel, WithNamedChannel's name otherwise).
	Channel string `json:"channel,omitempty"`
}

// LoadingCall is one accepted loading-animation request.
type LoadingCall struct {
	ChatID    string    `json:"chatId"`
	Seconds   int       `json:"loadingSeconds"`
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	Channel   string    `json:"channel,omitempty"` // whose token asked for it
}

// ReadMark is one accepted mark-as-read request: LINE shows "Read" on the
// user's messages in Chat up to and including MessageID.
type ReadMark struct {
	// Chat is the user, group or room the message was sent in ("" for a
	// token accepted under WithAcceptUnknownReplyTokens).
	Chat string `json:"chat"`
	// MessageID is the id of the message whose token was used.
	MessageID string `json:"messageId,omitempty"`
	// Token is the markAsReadToken (the mock's own, not a secret).
	Token     string    `json:"markAsReadToken"`
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	Channel   string    `json:"channel,omitempty"` // whose token asked for it
}

// Call identifies a request by path and the status it was answered with, the
// key of Calls.
type Call struct {
	Path   string
	Status int
}

// Fault queues an abnormal answer for the next Times requests to Path.
//
// Status 0 with a Delay makes a slow but otherwise normal answer. With Accept
// set the request takes effect first (a message is recorded, a retry key
// remembered) and only then is Status returned: a lost response, the case a
// retry key exists for.
type Fault struct {
	// Path is the request path the fault applies to, e.g. PathPush.
	Path string
	// Status is the HTTP status to answer (e.g. 429, 500, 503); 0 answers
	// normally after Delay.
	Status int
	// Times is how many requests the fault applies to (values < 1 mean 1).
	Times int
	// Delay is waited before answering (cut short if the client goes away).
	Delay time.Duration
	// RetryAfter, when positive, is sent as a Retry-After header in whole
	// seconds (rounded up). LINE does not document one for 429; it is here to
	// test clients that honour it.
	RetryAfter time.Duration
	// Message overrides the error message in the body.
	Message string
	// Accept applies the request before answering Status (lost response).
	Accept bool
}

// BotInfo is the body GET /v2/bot/info answers with.
type BotInfo struct {
	UserID         string `json:"userId"`
	BasicID        string `json:"basicId"`
	PremiumID      string `json:"premiumId,omitempty"`
	DisplayName    string `json:"displayName"`
	PictureURL     string `json:"pictureUrl,omitempty"`
	ChatMode       string `json:"chatMode"`
	MarkAsReadMode string `json:"markAsReadMode"`
}

// DefaultBotInfo is the bot the Server describes unless WithBotInfo is given.
var DefaultBotInfo = BotInfo{
	UserID:         "U0000000000000000000000000000b07",
	BasicID:        "@linegate",
	DisplayName:    "linegate local bot",
	ChatMode:       "bot",
	MarkAsReadMode: "auto",
}

// Option configures a Server.
type Option func(*Server)

// WithTokens sets the channel access tokens the Server accepts. Without it
// any non-empty bearer token is accepted.
func WithTokens(tokens ...string) Option {
	return func(s *Server) {
		s.def.tokens = make(map[string]struct{}, len(tokens))
		for _, t := range tokens {
			s.def.tokens[t] = struct{}{}
		}
	}
}

// WithClock sets the Server's clock (default time.Now). Reply-token expiry,
// retry-key memory and record times all use it.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithReplyTokenTTL sets how long an issued reply token stays valid (default
// one minute, as on LINE).
func WithReplyTokenTTL(d time.Duration) Option { return func(s *Server) { s.replyTTL = d } }

// WithAcceptUnknownReplyTokens makes reply tokens the Server never issued
// valid once each, so LINE's sample webhook bodies can be replayed.
func WithAcceptUnknownReplyTokens() Option { return func(s *Server) { s.acceptUnknown = true } }

// WithMaxRecords sets how many sends and how many loading animations are
// kept for Messages and Loading (default DefaultMaxRecords each); the oldest
// are dropped first.
func WithMaxRecords(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxRecords = n
		}
	}
}

// WithOnLoading calls f for every accepted loading-animation request (a
// loading animation is otherwise invisible locally), outside the Server's
// lock.
func WithOnLoading(f func(LoadingCall)) Option { return func(s *Server) { s.onLoading = f } }

// WithOnRead calls f for every accepted mark-as-read request, outside the
// Server's lock: the local console shows "Read" under the user's messages.
func WithOnRead(f func(ReadMark)) Option { return func(s *Server) { s.onRead = f } }

// WithOnRecord calls f with every accepted send (a reply or a push), in the
// order the Server accepted them: the local console shows each as the chat
// user would see it. f runs under the Server's lock, so it must be quick and
// must not call the Server.
func WithOnRecord(f func(Record)) Option { return func(s *Server) { s.onRecord = f } }

// WithBotInfo sets the body of GET /v2/bot/info.
func WithBotInfo(b BotInfo) Option { return func(s *Server) { s.def.bot = b } }

// WithRequestIDs sets the generator of x-line-request-id values (default
// random UUIDs), for deterministic records in golden tests.
func WithRequestIDs(next func() string) Option { return func(s *Server) { s.newRequestID = next } }

// Server is a local LINE Messaging API. Build it with New; it is safe for
// concurrent use.
type Server struct {
	now           func() time.Time
	replyTTL      time.Duration
	acceptUnknown bool
	newRequestID  func() string
	maxRecords    int
	onLoading     func(LoadingCall)
	onRead        func(ReadMark)
	onRecord      func(Record)

	assertionKeys map[string]*rsa.PublicKey
	tokenTTL      time.Duration
	tester        WebhookTester
	chanTester    ChannelWebhookTester

	mu          sync.Mutex
	def         *account            // the default channel
	named       map[string]*account // the named channels (WithNamedChannel)
	issued      map[string]issuedToken
	issuedCount int
	replyTokens map[string]*replyToken
	readTokens  map[string]readToken
	readOrder   *ring.Buffer[string] // readTokens' keys, oldest first
	retryKeys   map[string]acceptedPush
	faults      map[string][]*Fault
	records     *ring.Buffer[Record]
	loading     *ring.Buffer[LoadingCall]
	reads       *ring.Buffer[ReadMark]
	calls       map[Call]int
	messageSeq  uint64
	lastSweep   time.Time
}

type replyToken struct {
	to       string
	channel  string // the channel whose webhook carried it: only its token may use it
	issuedAt time.Time
	used     bool
	unknown  bool // accepted under WithAcceptUnknownReplyTokens
}

// readToken is the message a markAsReadToken was issued for. LINE's read
// tokens have no expiry (https://developers.line.biz/en/docs/messaging-api/mark-as-read),
// and using one again marks the same messages: it stays valid.
type readToken struct {
	chat, messageID string
	channel         string // the bot that received it: only its token may use it
}

type acceptedPush struct {
	requestID string
	at        time.Time
	sent      []sentMessage
}

// New returns a Server with the given options applied.
func New(opts ...Option) *Server {
	s := &Server{
		now:          time.Now,
		replyTTL:     DefaultReplyTokenTTL,
		def:          &account{bot: DefaultBotInfo, quota: Quota{Limit: -1}, settings: Channel{Active: true, Redelivery: true}},
		newRequestID: uuid.NewString,
		replyTokens:  map[string]*replyToken{},
		readTokens:   map[string]readToken{},
		retryKeys:    map[string]acceptedPush{},
		faults:       map[string][]*Fault{},
		calls:        map[Call]int{},
		tokenTTL:     StatelessTokenTTL,
		maxRecords:   DefaultMaxRecords,
	}
	for _, o := range opts {
		o(s)
	}
	s.records = ring.New[Record](s.maxRecords)
	s.loading = ring.New[LoadingCall](s.maxRecords)
	s.reads = ring.New[ReadMark](s.maxRecords)
	s.readOrder = ring.New[string](MaxReadTokens)
	return s
}

// IssueMarkAsReadToken registers the markAsReadToken LINE put in a message
// event: the message messageID sent in chat (a user, group or room ID).
// The local platform calls it for every message event it delivers.
func (s *Server) IssueMarkAsReadToken(token, chat, messageID string) {
	s.IssueChannelMarkAsReadToken("", token, chat, messageID)
}

// IssueChannelMarkAsReadToken is IssueMarkAsReadToken for a message event
// of channel ch: only ch's access tokens may use it.
func (s *Server) IssueChannelMarkAsReadToken(ch, token, chat, messageID string) {
	if token == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.readTokens[token]; known {
		return
	}
	s.readTokens[token] = readToken{chat: chat, messageID: messageID, channel: ch}
	if old, evicted := s.readOrder.Push(token); evicted {
		delete(s.readTokens, old)
	}
}

// MaxReadTokens is how many markAsReadTokens a Server remembers, the
// newest: LINE's never expire, and a dev server left running all day must
// not grow with every message (a token older than that is refused).
const MaxReadTokens = 10000

// Reads returns a copy of the accepted mark-as-read requests still kept
// (the newest WithMaxRecords), oldest first.
func (s *Server) Reads() []ReadMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads.All()
}

// ReadsHandler serves Reads as a JSON array (keys chat, messageId,
// markAsReadToken, requestId, at).
func (s *Server) ReadsHandler() http.Handler { return listHandler(func() any { return s.Reads() }) }

// IssueReplyToken registers a reply token as LINE issued it at issuedAt (the
// local LINE platform calls it when it builds a webhook). The token is valid
// for one reply until issuedAt plus the TTL.
func (s *Server) IssueReplyToken(token string, issuedAt time.Time) {
	s.IssueReplyTokenTo(token, "", issuedAt)
}

// IssueReplyTokenTo is IssueReplyToken that also remembers the chat the token
// answers (a user, group or room ID), so replies are recorded with a To.
func (s *Server) IssueReplyTokenTo(token, to string, issuedAt time.Time) {
	s.IssueChannelReplyToken("", token, to, issuedAt)
}

// IssueChannelReplyToken is IssueReplyTokenTo for a webhook of channel ch:
// as on LINE, only ch's access tokens can reply with it.
func (s *Server) IssueChannelReplyToken(ch, token, to string, issuedAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.now())
	s.replyTokens[token] = &replyToken{to: to, channel: ch, issuedAt: issuedAt}
}

// Inject queues f: the next f.Times requests to f.Path get f's answer. Faults
// for one path are served in the order they were injected.
func (s *Server) Inject(f Fault) {
	if f.Times < 1 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[f.Path] = append(s.faults[f.Path], &f)
}

// Messages returns a copy of the accepted sends still kept (the newest
// WithMaxRecords), oldest first.
func (s *Server) Messages() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.records.All()
	for i := range out {
		out[i].Messages = slices.Clone(out[i].Messages)
	}
	return out
}

// Loading returns a copy of the accepted loading-animation requests still
// kept (the newest WithMaxRecords), oldest first.
func (s *Server) Loading() []LoadingCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loading.All()
}

// Calls returns how many requests were answered, by path and status,
// including rejected and faulted ones.
func (s *Server) Calls() map[Call]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Call]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// MessagesHandler serves Messages as a JSON array (keys to, via, retryKey,
// messages, requestId, at, and replyToken for replies), for the local
// console and for end-to-end tests that talk HTTP.
func (s *Server) MessagesHandler() http.Handler {
	return listHandler(func() any { return s.Messages() })
}

// LoadingHandler serves Loading as a JSON array (keys chatId,
// loadingSeconds, requestId, at): the loading animations a chat user would
// have seen.
func (s *Server) LoadingHandler() http.Handler { return listHandler(func() any { return s.Loading() }) }

// listHandler answers GET and HEAD with list() as JSON.
func listHandler(list func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{Message: "Method not allowed"})
			return
		}
		writeJSON(w, http.StatusOK, list())
	})
}

// ServeHTTP answers one Messaging API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := s.newRequestID()
	w.Header().Set(HeaderRequestID, reqID)
	sw := &statusWriter{ResponseWriter: w}
	s.serve(sw, r, reqID)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	path := r.URL.Path
	if _, known := routes[path]; !known {
		path = PathUnknown // any number of made-up paths are one key
	}
	s.mu.Lock()
	s.calls[Call{Path: path, Status: sw.status}]++
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, reqID string) {
	if f, ok := s.nextFault(r.URL.Path); ok {
		if f.Delay > 0 {
			// Read the body first: the server only notices a client that went
			// away (and cancels r.Context) once the body has been consumed.
			body, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
			r.Body = io.NopCloser(bytes.NewReader(body))
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				// The client is gone; whatever is written is lost, as on a
				// real network. 499 in Calls marks it.
				w.WriteHeader(499)
				return
			}
		}
		if f.Status == 0 {
			s.route(w, r, reqID)
			return
		}
		if f.Accept {
			s.route(discardWriter{header: http.Header{}}, r, reqID)
		}
		writeFault(w, f)
		return
	}
	s.route(w, r, reqID)
}

func (s *Server) nextFault(path string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[path]
	if len(q) == 0 {
		return Fault{}, false
	}
	f := q[0]
	f.Times--
	if f.Times <= 0 {
		s.faults[path] = q[1:]
	}
	return *f, true
}

func writeFault(w http.ResponseWriter, f Fault) {
	msg := f.Message
	if msg == "" {
		switch {
		case f.Status == http.StatusTooManyRequests:
			msg = MsgRateLimited
		case f.Status >= 500:
			msg = MsgInternalServerError
		default:
			msg = http.StatusText(f.Status)
		}
	}
	if f.RetryAfter > 0 {
		secs := int((f.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	writeJSON(w, f.Status, errorBody{Message: msg})
}

type route struct {
	method string // one method, or several separated by ", "
	handle func(s *Server, w http.ResponseWriter, r *http.Request, reqID string)
	public bool // no channel access token needed (the token endpoints)
}

var routes = map[string]route{
	PathReply:            {method: http.MethodPost, handle: decoded(decodeReply, (*Server).handleReply)},
	PathPush:             {method: http.MethodPost, handle: decoded(decodePush, (*Server).handlePush)},
	PathLoading:          {method: http.MethodPost, handle: decoded(decodeLoading, (*Server).handleLoading)},
	PathMarkAsRead:       {method: http.MethodPost, handle: decoded(decodeMarkAsRead, (*Server).handleMarkAsRead)},
	PathBotInfo:          {method: http.MethodGet, handle: (*Server).handleBotInfo},
	PathQuota:            {method: http.MethodGet, handle: (*Server).handleQuota},
	PathQuotaConsumption: {method: http.MethodGet, handle: (*Server).handleConsumption},
	PathWebhookEndpoint:  {method: "GET, PUT", handle: (*Server).handleWebhookEndpoint},
	PathWebhookTest:      {method: http.MethodPost, handle: (*Server).handleWebhookTest},
	PathTokenStateless:   {method: http.MethodPost, handle: (*Server).handleToken, public: true},
	PathTokenV21:         {method: http.MethodPost, handle: (*Server).handleToken, public: true},
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, reqID string) {
	rt, ok := routes[r.URL.Path]
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody{Message: "Not found"})
		return
	}
	if !slices.Contains(strings.Split(rt.method, ", "), r.Method) {
		w.Header().Set("Allow", rt.method)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Message: "Method not allowed"})
		return
	}
	if rt.public {
		rt.handle(s, w, r, reqID)
		return
	}
	status, msg, ch, ok := s.authorize(r)
	if !ok {
		writeJSON(w, status, errorBody{Message: msg})
		return
	}
	rt.handle(s, w, r.WithContext(context.WithValue(r.Context(), channelKey{}, ch)), reqID)
}

// channelKey carries the channel a request's token belongs to.
type channelKey struct{}

// channelOf is the channel whose token authorized r ("" for the default).
func channelOf(r *http.Request) string {
	ch, _ := r.Context().Value(channelKey{}).(string)
	return ch
}

// authorize checks r's bearer token and names the channel it belongs to:
// a token issued by the token endpoints is its channel's until it
// expires; a named channel's (WithNamedChannel) is that channel's; any
// other is the default channel's when WithTokens lists it (or names no
// token at all).
func (s *Server) authorize(r *http.Request) (int, string, string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return http.StatusUnauthorized, MsgAuthRequired, "", false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return http.StatusUnauthorized, MsgAuthRequired, "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.issued[token]; ok {
		// An issued token is valid until it expires, whatever WithTokens says.
		if s.validIssuedLocked(token) {
			return 0, "", it.channel, true
		}
		return http.StatusUnauthorized, MsgAuthInvalid, "", false
	}
	for name, a := range s.named {
		if _, ok := a.tokens[token]; ok {
			return 0, "", name, true
		}
	}
	if s.def.tokens == nil && s.def.id == "" && len(s.assertionKeys) == 0 {
		return 0, "", "", true
	}
	if _, ok := s.def.tokens[token]; !ok {
		return http.StatusUnauthorized, MsgAuthInvalid, "", false
	}
	return 0, "", "", true
}

// decoded adapts the handler of a decoded request to a route: a request
// LINE would refuse is answered with its error and never reaches handle,
// which is told the channel whose token made the request.
func decoded[T any](decode func(*http.Request) (T, *apiError), handle func(s *Server, w http.ResponseWriter, req T, ch, reqID string)) func(*Server, http.ResponseWriter, *http.Request, string) {
	return func(s *Server, w http.ResponseWriter, r *http.Request, reqID string) {
		req, e := decode(r)
		if e != nil {
			writeAPIError(w, e)
			return
		}
		handle(s, w, req, channelOf(r), reqID)
	}
}

func (s *Server) handleReply(w http.ResponseWriter, req replyRequest, ch, reqID string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.replyTokens[req.replyToken]
	switch {
	case !ok && s.acceptUnknown:
		tok = &replyToken{issuedAt: now, unknown: true, channel: ch}
		s.replyTokens[req.replyToken] = tok
	case !ok, tok.used, tok.channel != ch, !now.Before(tok.issuedAt.Add(s.replyTTL)):
		writeJSON(w, http.StatusBadRequest, errorBody{Message: MsgInvalidReplyToken})
		return
	}
	tok.used = true
	if !s.acceptUnknown {
		// Forgotten, a used token is unknown: refused all the same.
		delete(s.replyTokens, req.replyToken)
	}
	sent := s.acceptLocked(Record{
		To: tok.to, Via: ViaReply, ReplyToken: req.replyToken, Messages: req.messages,
		NotificationDisabled: req.notificationDisabled, RequestID: reqID, At: now, Channel: ch,
	}, req.types)
	writeJSON(w, http.StatusOK, sentBody{SentMessages: sent})
}

func (s *Server) handlePush(w http.ResponseWriter, req pushRequest, ch, reqID string) {
	retryKey := req.retryKey
	// A retry key is remembered per channel, as LINE keeps it per channel.
	remembered := ch + "\x00" + retryKey
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accountLocked(ch)
	if retryKey != "" {
		if prev, ok := s.retryKeys[remembered]; ok && now.Sub(prev.at) < RetryKeyTTL {
			w.Header().Set(HeaderAcceptedRequestID, prev.requestID)
			writeJSON(w, http.StatusConflict, errorBody{Message: MsgRetryKeyAccepted, SentMessages: prev.sent})
			return
		}
	}
	if a.quota.Limit >= 0 && a.quota.Used >= a.quota.Limit {
		// LINE processes nothing of a request it answers 429.
		writeJSON(w, http.StatusTooManyRequests, errorBody{Message: MsgMonthlyLimit})
		return
	}
	a.quota.Used++ // a push counts once per recipient, whatever its message count
	sent := s.acceptLocked(Record{
		To: req.to, Via: ViaPush, RetryKey: retryKey, Messages: req.messages,
		NotificationDisabled: req.notificationDisabled, RequestID: reqID, At: now, Channel: ch,
	}, req.types)
	if retryKey != "" {
		s.sweepLocked(now)
		s.retryKeys[remembered] = acceptedPush{requestID: reqID, at: now, sent: sent}
	}
	writeJSON(w, http.StatusOK, sentBody{SentMessages: sent})
}

// sweepLocked forgets, at most once per sweepEvery, retry keys older than
// RetryKeyTTL and reply tokens past their TTL (LINE refuses both alike once
// expired, known or not), so a long-running local server does not grow
// without bound. Under WithAcceptUnknownReplyTokens reply tokens are kept:
// forgetting one would make it unknown, hence valid again.
func (s *Server) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < sweepEvery {
		return
	}
	s.lastSweep = now
	for k, v := range s.retryKeys {
		if now.Sub(v.at) >= RetryKeyTTL {
			delete(s.retryKeys, k)
		}
	}
	if s.acceptUnknown {
		return
	}
	for k, t := range s.replyTokens {
		if !now.Before(t.issuedAt.Add(s.replyTTL)) {
			delete(s.replyTokens, k)
		}
	}
}

// acceptLocked records rec and returns the sentMessages LINE would answer.
func (s *Server) acceptLocked(rec Record, types []string) []sentMessage {
	sent := make([]sentMessage, len(rec.Messages))
	for i := range rec.Messages {
		s.messageSeq++
		id := strconv.FormatUint(500000000000000000+s.messageSeq, 10)
		sent[i] = sentMessage{ID: id}
		if quotable(types[i]) {
			sent[i].QuoteToken = "q" + id
		}
	}
	s.records.Push(rec)
	if s.onRecord != nil {
		c := rec
		c.Messages = slices.Clone(rec.Messages)
		s.onRecord(c)
	}
	return sent
}

// quotable reports whether LINE returns a quote token for a sent message of
// type t (text, textV2, sticker, image, video per the spec's SentMessage).
func quotable(t string) bool {
	switch t {
	case "text", "textV2", "sticker", "image", "video":
		return true
	}
	return false
}

func (s *Server) handleLoading(w http.ResponseWriter, req loadingRequest, ch, reqID string) {
	c := LoadingCall{ChatID: req.chatID, Seconds: req.seconds, RequestID: reqID, At: s.now(), Channel: ch}
	s.mu.Lock()
	s.loading.Push(c)
	s.mu.Unlock()
	if s.onLoading != nil {
		s.onLoading(c)
	}
	writeJSON(w, http.StatusAccepted, struct{}{})
}

// handleMarkAsRead accepts a token the Server issued (any token under
// WithAcceptUnknownReplyTokens, so LINE's samples replay) with 200 and an
// empty object, and refuses others with LINE's 400.
func (s *Server) handleMarkAsRead(w http.ResponseWriter, req markAsReadRequest, ch, reqID string) {
	s.mu.Lock()
	tok, ok := s.readTokens[req.token]
	if (!ok && !s.acceptUnknown) || (ok && tok.channel != ch) {
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, errorBody{Message: MsgInvalidReadToken})
		return
	}
	m := ReadMark{Chat: tok.chat, MessageID: tok.messageID, Token: req.token, RequestID: reqID, At: s.now(), Channel: ch}
	s.reads.Push(m)
	s.mu.Unlock()
	if s.onRead != nil {
		s.onRead(m)
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleBotInfo(w http.ResponseWriter, r *http.Request, _ string) {
	s.mu.Lock()
	b := s.accountLocked(channelOf(r)).bot
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, b)
}

type sentMessage struct {
	ID         string `json:"id"`
	QuoteToken string `json:"quoteToken,omitempty"`
}

type sentBody struct {
	SentMessages []sentMessage `json:"sentMessages"`
}

// errorBody is LINE's ErrorResponse.
type errorBody struct {
	Message      string        `json:"message"`
	Details      []ErrorDetail `json:"details,omitempty"`
	SentMessages []sentMessage `json:"sentMessages,omitempty"`
}

// ErrorDetail is one entry of an error response's details: what is wrong
// and where (a JSON property path such as "messages[0].text").
type ErrorDetail struct {
	Message  string `json:"message"`
	Property string `json:"property"`
}

// apiError is a rejection decided while decoding a request.
type apiError struct {
	status  int
	message string
	details []ErrorDetail
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorBody{Message: e.message, Details: e.details})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the Server's own types are marshalled; this cannot happen.
		b = []byte(fmt.Sprintf(`{"message":%q}`, err.Error()))
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// discardWriter swallows a response (Fault.Accept: the effect happens, the
// answer is lost).
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
