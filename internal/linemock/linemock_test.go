package linemock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/golden"
	"github.com/linegate/linegate/internal/testclock"
)

// newClock is the tests' clock, stopped at a fixed instant.
func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

// seqIDs returns deterministic request IDs req-0001, req-0002, ...
func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("req-%04d", n)
	}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

type request struct {
	method      string
	path        string
	body        string
	auth        string // "" means "Bearer test-token"; "-" means no header
	contentType string // "" means application/json
	retryKey    string
}

func call(t testing.TB, h http.Handler, r request) response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	switch r.auth {
	case "":
		req.Header.Set("Authorization", "Bearer test-token")
	case "-":
	default:
		req.Header.Set("Authorization", r.auth)
	}
	if r.contentType == "" {
		r.contentType = "application/json; charset=UTF-8"
	}
	req.Header.Set("Content-Type", r.contentType)
	if r.retryKey != "" {
		req.Header.Set(HeaderRetryKey, r.retryKey)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	out := response{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	if len(out.raw) > 0 {
		if err := json.Unmarshal(out.raw, &out.body); err != nil {
			t.Errorf("%s %s: body is not a JSON object: %v: %s", r.method, r.path, err, out.raw)
		}
	}
	return out
}

func text(s string) string { return fmt.Sprintf(`{"type":"text","text":%q}`, s) }

func pushBody(to string, msgs ...string) string {
	return fmt.Sprintf(`{"to":%q,"messages":[%s]}`, to, strings.Join(msgs, ","))
}

func replyBody(token string, msgs ...string) string {
	return fmt.Sprintf(`{"replyToken":%q,"messages":[%s]}`, token, strings.Join(msgs, ","))
}

func properties(body map[string]any) []string {
	var out []string
	details, _ := body["details"].([]any)
	for _, d := range details {
		m, _ := d.(map[string]any)
		p, _ := m["property"].(string)
		out = append(out, p)
	}
	return out
}

func TestValidation(t *testing.T) {
	const user = "U0123456789abcdef0123456789abcdef"
	long := strings.Repeat("a", 5001)
	// A string of 2501 emoji is 5002 UTF-16 code units: LINE's count, not runes.
	wideLong := strings.Repeat("😀", 2501)
	flex := func(alt, contents string) string {
		return fmt.Sprintf(`{"type":"flex","altText":%q,"contents":%s}`, alt, contents)
	}
	six := strings.TrimSuffix(strings.Repeat(text("x")+",", 6), ",")
	cases := []struct {
		name    string
		req     request
		status  int
		message string   // exact message, or prefix when it ends with "*"
		props   []string // expected detail properties, in order
	}{
		{"push ok", request{path: PathPush, body: pushBody(user, text("hi"))}, 200, "", nil},
		{"push missing to", request{path: PathPush, body: `{"messages":[` + text("hi") + `]}`}, 400, "The request body has 1 error(s)", []string{"to"}},
		{"push empty to", request{path: PathPush, body: pushBody("", text("hi"))}, 400, "The request body has 1 error(s)", []string{"to"}},
		{"push to not a string", request{path: PathPush, body: `{"to":1,"messages":[` + text("hi") + `]}`}, 400, "The request body has 1 error(s)", []string{"to"}},
		{"push missing messages", request{path: PathPush, body: `{"to":"` + user + `"}`}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"push null messages", request{path: PathPush, body: `{"to":"` + user + `","messages":null}`}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"push zero messages", request{path: PathPush, body: pushBody(user)}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"push six messages", request{path: PathPush, body: `{"to":"` + user + `","messages":[` + six + `]}`}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"push messages not array", request{path: PathPush, body: `{"to":"` + user + `","messages":{}}`}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"message not object", request{path: PathPush, body: pushBody(user, `"hi"`)}, 400, "The request body has 1 error(s)", []string{"messages[0]"}},
		{"message without type", request{path: PathPush, body: pushBody(user, `{"text":"hi"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].type"}},
		{"message unknown type", request{path: PathPush, body: pushBody(user, `{"type":"hologram"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].type"}},
		{"text missing", request{path: PathPush, body: pushBody(user, `{"type":"text"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].text"}},
		{"text empty", request{path: PathPush, body: pushBody(user, text(""))}, 400, "The request body has 1 error(s)", []string{"messages[0].text"}},
		{"text 5000 ok", request{path: PathPush, body: pushBody(user, text(long[:5000]))}, 200, "", nil},
		{"text 5001", request{path: PathPush, body: pushBody(user, text(long))}, 400, "The request body has 1 error(s)", []string{"messages[0].text"}},
		{"text 5002 utf16 units", request{path: PathPush, body: pushBody(user, text(wideLong))}, 400, "The request body has 1 error(s)", []string{"messages[0].text"}},
		{"second message bad", request{path: PathPush, body: pushBody(user, text("ok"), `{"type":"sticker","packageId":"446"}`)}, 400, "The request body has 1 error(s)", []string{"messages[1].stickerId"}},
		{"two errors", request{path: PathPush, body: `{"messages":[{"type":"text"}]}`}, 400, "The request body has 2 error(s)", []string{"to", "messages[0].text"}},
		{"sticker ok", request{path: PathPush, body: pushBody(user, `{"type":"sticker","packageId":"446","stickerId":"1988"}`)}, 200, "", nil},
		{"image ok", request{path: PathPush, body: pushBody(user, `{"type":"image","originalContentUrl":"https://example.com/a.jpg","previewImageUrl":"https://example.com/p.jpg"}`)}, 200, "", nil},
		{"image http", request{path: PathPush, body: pushBody(user, `{"type":"image","originalContentUrl":"http://example.com/a.jpg","previewImageUrl":"https://example.com/p.jpg"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].originalContentUrl"}},
		{"image no preview", request{path: PathPush, body: pushBody(user, `{"type":"image","originalContentUrl":"https://example.com/a.jpg"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].previewImageUrl"}},
		{"flex ok", request{path: PathPush, body: pushBody(user, flex("alt", `{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[]}}`))}, 200, "", nil},
		{"flex no altText", request{path: PathPush, body: pushBody(user, `{"type":"flex","contents":{"type":"bubble"}}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].altText"}},
		{"flex altText 1501", request{path: PathPush, body: pushBody(user, flex(long[:1501], `{"type":"bubble"}`))}, 400, "The request body has 1 error(s)", []string{"messages[0].altText"}},
		{"flex no contents", request{path: PathPush, body: pushBody(user, `{"type":"flex","altText":"alt"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].contents"}},
		{"flex bad container", request{path: PathPush, body: pushBody(user, flex("alt", `{"type":"box"}`))}, 400, "The request body has 1 error(s)", []string{"messages[0].contents.type"}},
		{"location ok", request{path: PathPush, body: pushBody(user, `{"type":"location","title":"t","address":"a","latitude":35.6,"longitude":139.7}`)}, 200, "", nil},
		{"location no latitude", request{path: PathPush, body: pushBody(user, `{"type":"location","title":"t","address":"a","longitude":139.7}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].latitude"}},
		{"template no template", request{path: PathPush, body: pushBody(user, `{"type":"template","altText":"a"}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].template"}},
		{"quick reply 14 items", request{path: PathPush, body: pushBody(user, `{"type":"text","text":"q","quickReply":{"items":[`+strings.TrimSuffix(strings.Repeat(`{},`, 14), ",")+`]}}`)}, 400, "The request body has 1 error(s)", []string{"messages[0].quickReply.items"}},
		{"notificationDisabled not bool", request{path: PathPush, body: `{"to":"` + user + `","messages":[` + text("hi") + `],"notificationDisabled":"yes"}`}, 400, "The request body has 1 error(s)", []string{"notificationDisabled"}},
		{"SDK shape with null units", request{path: PathPush, body: `{"to":"` + user + `","messages":[` + text("hi") + `],"notificationDisabled":false,"customAggregationUnits":null}`}, 200, "", nil},
		{"reply missing token", request{path: PathReply, body: `{"messages":[` + text("hi") + `]}`}, 400, "The request body has 1 error(s)", []string{"replyToken"}},
		{"reply no messages", request{path: PathReply, body: replyBody("tok")}, 400, "The request body has 1 error(s)", []string{"messages"}},
		{"reply unknown token", request{path: PathReply, body: replyBody("never-issued", text("hi"))}, 400, MsgInvalidReplyToken, nil},
		{"not JSON", request{path: PathPush, body: "{\n  \"to\": oops}"}, 400, "The request body could not be parsed as JSON (line: 2, column: 9)", nil},
		{"JSON array", request{path: PathPush, body: `  []`}, 400, "The request body could not be parsed as JSON (line: 1, column: 3)", nil},
		{"JSON null", request{path: PathPush, body: `null`}, 400, "The request body could not be parsed as JSON*", nil},
		{"empty body", request{path: PathPush, body: ``}, 400, "The request body could not be parsed as JSON*", nil},
		{"wrong content type", request{path: PathPush, body: pushBody(user, text("hi")), contentType: "text/plain"}, 415, "The content type, 'text/plain', is not supported", nil},
		{"too large", request{path: PathPush, body: pushBody(user, text(strings.Repeat("a", maxBodyBytes)))}, 413, "Request entity too large", nil},
		{"retry key not UUID", request{path: PathPush, body: pushBody(user, text("hi")), retryKey: "abc"}, 400, "The value of the 'X-Line-Retry-Key' header is invalid", nil},
		{"no auth", request{path: PathPush, body: pushBody(user, text("hi")), auth: "-"}, 401, MsgAuthRequired, nil},
		{"empty bearer", request{path: PathPush, body: pushBody(user, text("hi")), auth: "Bearer "}, 401, MsgAuthRequired, nil},
		{"basic auth", request{path: PathPush, body: pushBody(user, text("hi")), auth: "Basic dXNlcjpwYXNz"}, 401, MsgAuthRequired, nil},
		{"unknown path", request{path: "/v2/bot/message/teleport", body: `{}`}, 404, "Not found", nil},
		{"wrong method", request{method: http.MethodGet, path: PathPush}, 405, "Method not allowed", nil},
		{"loading ok", request{path: PathLoading, body: `{"chatId":"` + user + `","loadingSeconds":10}`}, 202, "", nil},
		{"loading default seconds", request{path: PathLoading, body: `{"chatId":"` + user + `"}`}, 202, "", nil},
		{"loading no chat", request{path: PathLoading, body: `{"loadingSeconds":10}`}, 400, "The request body has 1 error(s)", []string{"chatId"}},
		{"loading 7 s", request{path: PathLoading, body: `{"chatId":"` + user + `","loadingSeconds":7}`}, 400, "The request body has 1 error(s)", []string{"loadingSeconds"}},
		{"loading 65 s", request{path: PathLoading, body: `{"chatId":"` + user + `","loadingSeconds":65}`}, 400, "The request body has 1 error(s)", []string{"loadingSeconds"}},
		{"loading 0 s", request{path: PathLoading, body: `{"chatId":"` + user + `","loadingSeconds":0}`}, 400, "The request body has 1 error(s)", []string{"loadingSeconds"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			res := call(t, s, tc.req)
			if res.status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", res.status, tc.status, res.raw)
			}
			if res.header.Get(HeaderRequestID) == "" {
				t.Error("no x-line-request-id header")
			}
			if tc.message != "" {
				got, _ := res.body["message"].(string)
				if prefix, ok := strings.CutSuffix(tc.message, "*"); ok {
					if !strings.HasPrefix(got, prefix) {
						t.Errorf("message = %q, want prefix %q", got, prefix)
					}
				} else if got != tc.message {
					t.Errorf("message = %q, want %q", got, tc.message)
				}
			}
			if got := properties(res.body); strings.Join(got, ",") != strings.Join(tc.props, ",") {
				t.Errorf("detail properties = %v, want %v", got, tc.props)
			}
			wantRecords := 0
			if tc.status == 200 {
				wantRecords = 1
			}
			if got := len(s.Messages()); got != wantRecords {
				t.Errorf("records = %d, want %d", got, wantRecords)
			}
			path := tc.req.path
			if tc.status == 404 {
				path = PathUnknown // made-up paths share one key
			}
			if got := s.Calls()[Call{Path: path, Status: tc.status}]; got != 1 {
				t.Errorf("Calls[%s %d] = %d, want 1", path, tc.status, got)
			}
		})
	}
}

func TestWithTokens(t *testing.T) {
	s := New(WithTokens("good"))
	body := pushBody("U1", text("hi"))
	if res := call(t, s, request{path: PathPush, body: body, auth: "Bearer bad"}); res.status != 401 || res.body["message"] != MsgAuthInvalid {
		t.Fatalf("bad token: %d %s", res.status, res.raw)
	}
	if res := call(t, s, request{path: PathPush, body: body, auth: "Bearer good"}); res.status != 200 {
		t.Fatalf("good token: %d %s", res.status, res.raw)
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("records = %d, want 1", n)
	}
}

func TestReplyTokens(t *testing.T) {
	clk := newClock()
	issued := clk.Now()
	s := New(WithClock(clk.Now))
	s.IssueReplyTokenTo("fresh", "Ufresh", issued)
	s.IssueReplyToken("edge", issued)
	s.IssueReplyToken("late", issued)
	s.IssueReplyToken("badbody", issued)

	reply := func(token string) response {
		return call(t, s, request{path: PathReply, body: replyBody(token, text("hi"))})
	}

	clk.Advance(59*time.Second + 999*time.Millisecond)
	if res := reply("fresh"); res.status != 200 {
		t.Fatalf("fresh token: %d %s", res.status, res.raw)
	}
	if res := reply("fresh"); res.status != 400 || res.body["message"] != MsgInvalidReplyToken {
		t.Fatalf("reused token: %d %s", res.status, res.raw)
	}
	if res := reply("edge"); res.status != 200 {
		t.Fatalf("token just inside TTL: %d %s", res.status, res.raw)
	}
	// An invalid body must not use up the token.
	if res := call(t, s, request{path: PathReply, body: replyBody("badbody")}); res.status != 400 {
		t.Fatalf("bad body: %d", res.status)
	}
	clk.Advance(time.Millisecond) // exactly one minute after issue
	if res := reply("late"); res.status != 400 || res.body["message"] != MsgInvalidReplyToken {
		t.Fatalf("expired token: %d %s", res.status, res.raw)
	}
	if res := reply("badbody"); res.status != 400 {
		t.Fatalf("badbody token after expiry: %d", res.status)
	}

	recs := s.Messages()
	if len(recs) != 2 {
		t.Fatalf("records = %d, want 2", len(recs))
	}
	if recs[0].Via != ViaReply || recs[0].To != "Ufresh" || recs[0].ReplyToken != "fresh" || recs[0].RetryKey != "" {
		t.Errorf("record 0 = %+v", recs[0])
	}
	if recs[1].To != "" || recs[1].ReplyToken != "edge" {
		t.Errorf("record 1 = %+v", recs[1])
	}

	t.Run("custom TTL", func(t *testing.T) {
		clk := newClock()
		s := New(WithClock(clk.Now), WithReplyTokenTTL(5*time.Second))
		s.IssueReplyToken("t", clk.Now())
		clk.Advance(5 * time.Second)
		if res := call(t, s, request{path: PathReply, body: replyBody("t", text("hi"))}); res.status != 400 {
			t.Fatalf("status %d, want 400 after custom TTL", res.status)
		}
	})

	t.Run("accept unknown once", func(t *testing.T) {
		s := New(WithAcceptUnknownReplyTokens())
		body := replyBody("nHuyWiB7yP5Zw52FIkcQobQuGDXCTA", text("hi"))
		if res := call(t, s, request{path: PathReply, body: body}); res.status != 200 {
			t.Fatalf("first use: %d %s", res.status, res.raw)
		}
		if res := call(t, s, request{path: PathReply, body: body}); res.status != 400 || res.body["message"] != MsgInvalidReplyToken {
			t.Fatalf("second use: %d %s", res.status, res.raw)
		}
	})
}

func TestReplyResponseShape(t *testing.T) {
	s := New()
	s.IssueReplyToken("t", time.Now())
	res := call(t, s, request{path: PathReply, body: replyBody("t", text("a"), `{"type":"flex","altText":"x","contents":{"type":"bubble"}}`)})
	if res.status != 200 {
		t.Fatalf("status %d", res.status)
	}
	sent, _ := res.body["sentMessages"].([]any)
	if len(sent) != 2 {
		t.Fatalf("sentMessages = %v", res.body)
	}
	first, _ := sent[0].(map[string]any)
	second, _ := sent[1].(map[string]any)
	if first["id"] == "" || first["quoteToken"] == nil {
		t.Errorf("text sent message lacks id or quoteToken: %v", first)
	}
	if _, ok := second["quoteToken"]; ok {
		t.Errorf("flex sent message has a quoteToken: %v", second)
	}
	if first["id"] == second["id"] {
		t.Error("message IDs repeat")
	}
}

func TestRetryKey(t *testing.T) {
	clk := newClock()
	s := New(WithClock(clk.Now))
	const key = "123e4567-e89b-12d3-a456-426614174000"
	body := pushBody("U1", text("hi"))

	first := call(t, s, request{path: PathPush, body: body, retryKey: key})
	if first.status != 200 {
		t.Fatalf("first push: %d %s", first.status, first.raw)
	}
	firstID := first.header.Get(HeaderRequestID)

	clk.Advance(RetryKeyTTL - time.Second)
	again := call(t, s, request{path: PathPush, body: body, retryKey: strings.ToUpper(key)})
	if again.status != http.StatusConflict {
		t.Fatalf("repeat push: %d %s", again.status, again.raw)
	}
	if got := again.header.Get(HeaderAcceptedRequestID); got != firstID {
		t.Errorf("x-line-accepted-request-id = %q, want %q", got, firstID)
	}
	if again.header.Get(HeaderRequestID) == firstID || again.header.Get(HeaderRequestID) == "" {
		t.Errorf("409 request id %q must be new", again.header.Get(HeaderRequestID))
	}
	if again.body["message"] != MsgRetryKeyAccepted {
		t.Errorf("409 message = %v", again.body["message"])
	}
	firstSent, _ := json.Marshal(first.body["sentMessages"])
	againSent, _ := json.Marshal(again.body["sentMessages"])
	if !bytes.Equal(firstSent, againSent) {
		t.Errorf("409 sentMessages %s, want the accepted ones %s", againSent, firstSent)
	}

	// A different key, and no key, are independent sends.
	if res := call(t, s, request{path: PathPush, body: body, retryKey: "123e4567-e89b-12d3-a456-426614174001"}); res.status != 200 {
		t.Fatalf("other key: %d", res.status)
	}
	for range 2 {
		if res := call(t, s, request{path: PathPush, body: body}); res.status != 200 {
			t.Fatalf("no key: %d", res.status)
		}
	}

	clk.Advance(time.Second) // 24 h after the first acceptance: forgotten
	if res := call(t, s, request{path: PathPush, body: body, retryKey: key}); res.status != 200 {
		t.Fatalf("after 24 h: %d %s", res.status, res.raw)
	}
	if n := len(s.Messages()); n != 5 {
		t.Fatalf("records = %d, want 5", n)
	}
	if got := s.Messages()[0].RetryKey; got != key {
		t.Errorf("recorded retry key %q", got)
	}
}

func TestFaults(t *testing.T) {
	body := pushBody("U1", text("hi"))

	t.Run("queued statuses then normal", func(t *testing.T) {
		s := New()
		s.Inject(Fault{Path: PathPush, Status: 429, Times: 2, RetryAfter: 1500 * time.Millisecond})
		s.Inject(Fault{Path: PathPush, Status: 503})
		want := []int{429, 429, 503, 200}
		for i, w := range want {
			res := call(t, s, request{path: PathPush, body: body})
			if res.status != w {
				t.Fatalf("call %d: status %d, want %d", i, res.status, w)
			}
			if w == 429 {
				if res.header.Get("Retry-After") != "2" || res.body["message"] != MsgRateLimited {
					t.Errorf("429: Retry-After %q body %s", res.header.Get("Retry-After"), res.raw)
				}
			}
			if w == 503 && res.body["message"] != MsgInternalServerError {
				t.Errorf("503 body %s", res.raw)
			}
		}
		if n := len(s.Messages()); n != 1 {
			t.Fatalf("records = %d, want 1 (faults must not record)", n)
		}
		calls := s.Calls()
		if calls[Call{PathPush, 429}] != 2 || calls[Call{PathPush, 503}] != 1 || calls[Call{PathPush, 200}] != 1 {
			t.Errorf("calls = %v", calls)
		}
	})

	t.Run("other paths unaffected", func(t *testing.T) {
		s := New()
		s.Inject(Fault{Path: PathReply, Status: 500, Times: 3})
		if res := call(t, s, request{path: PathPush, body: body}); res.status != 200 {
			t.Fatalf("push got %d", res.status)
		}
		if res := call(t, s, request{path: PathReply, body: replyBody("x", text("hi"))}); res.status != 500 {
			t.Fatalf("reply got %d", res.status)
		}
	})

	t.Run("accept then lose the answer", func(t *testing.T) {
		s := New()
		const key = "123e4567-e89b-12d3-a456-426614174000"
		s.Inject(Fault{Path: PathPush, Status: 500, Accept: true})
		lost := call(t, s, request{path: PathPush, body: body, retryKey: key})
		if lost.status != 500 {
			t.Fatalf("status %d", lost.status)
		}
		recs := s.Messages()
		if len(recs) != 1 || recs[0].RequestID != lost.header.Get(HeaderRequestID) {
			t.Fatalf("records = %+v, want the lost request recorded", recs)
		}
		retry := call(t, s, request{path: PathPush, body: body, retryKey: key})
		if retry.status != 409 || retry.header.Get(HeaderAcceptedRequestID) != recs[0].RequestID {
			t.Fatalf("retry: %d accepted=%q", retry.status, retry.header.Get(HeaderAcceptedRequestID))
		}
	})

	t.Run("delay then normal", func(t *testing.T) {
		s := New()
		s.Inject(Fault{Path: PathBotInfo, Delay: 30 * time.Millisecond})
		start := time.Now()
		res := call(t, s, request{method: http.MethodGet, path: PathBotInfo})
		if res.status != 200 || time.Since(start) < 30*time.Millisecond {
			t.Fatalf("status %d after %v", res.status, time.Since(start))
		}
	})

	t.Run("delay cut short by client", func(t *testing.T) {
		s := New()
		s.Inject(Fault{Path: PathPush, Status: 500, Delay: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest(http.MethodPost, PathPush, strings.NewReader(body)).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer x")
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() { s.ServeHTTP(httptest.NewRecorder(), req); close(done) }()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("delay did not end when the client went away")
		}
		if got := s.Calls()[Call{PathPush, 499}]; got != 1 {
			t.Errorf("calls = %v, want one 499", s.Calls())
		}
	})
}

func TestBotInfoAndLoading(t *testing.T) {
	clk := newClock()
	s := New(WithClock(clk.Now), WithRequestIDs(seqIDs()))
	res := call(t, s, request{method: http.MethodGet, path: PathBotInfo})
	if res.status != 200 {
		t.Fatalf("bot info: %d", res.status)
	}
	for _, k := range []string{"userId", "basicId", "displayName", "chatMode", "markAsReadMode"} {
		if s, _ := res.body[k].(string); s == "" {
			t.Errorf("bot info lacks %s: %s", k, res.raw)
		}
	}
	custom := New(WithBotInfo(BotInfo{UserID: "Ux", BasicID: "@x", DisplayName: "X", ChatMode: "chat", MarkAsReadMode: "manual"}))
	if res := call(t, custom, request{method: http.MethodGet, path: PathBotInfo}); res.body["chatMode"] != "chat" {
		t.Errorf("custom bot info: %s", res.raw)
	}

	call(t, s, request{path: PathLoading, body: `{"chatId":"U1","loadingSeconds":30}`})
	call(t, s, request{path: PathLoading, body: `{"chatId":"U2"}`})
	got := s.Loading()
	want := []LoadingCall{
		{ChatID: "U1", Seconds: 30, RequestID: "req-0002", At: clk.Now()},
		{ChatID: "U2", Seconds: 20, RequestID: "req-0003", At: clk.Now()},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Loading() = %+v, want %+v", got, want)
	}
}

func TestConcurrency(t *testing.T) {
	s := New()
	const keys, repeats = 10, 5
	var wg sync.WaitGroup
	for k := range keys {
		for range repeats {
			wg.Go(func() {
				key := fmt.Sprintf("123e4567-e89b-12d3-a456-4266141740%02d", k)
				call(t, s, request{path: PathPush, body: pushBody("U1", text("hi")), retryKey: key})
			})
		}
	}
	const tokens = 20
	for i := range tokens {
		s.IssueReplyToken(fmt.Sprintf("tok-%d", i), time.Now())
	}
	for range 4 {
		wg.Go(func() {
			for i := range tokens {
				call(t, s, request{path: PathReply, body: replyBody(fmt.Sprintf("tok-%d", i), text("hi"))})
				_ = s.Messages()
				_ = s.Calls()
			}
		})
	}
	wg.Wait()
	calls := s.Calls()
	if calls[Call{PathPush, 200}] != keys || calls[Call{PathPush, 409}] != keys*(repeats-1) {
		t.Errorf("push calls = %v, want %d accepted and %d conflicts", calls, keys, keys*(repeats-1))
	}
	if calls[Call{PathReply, 200}] != tokens || calls[Call{PathReply, 400}] != tokens*3 {
		t.Errorf("reply calls = %v, want each token used exactly once", calls)
	}
	if n := len(s.Messages()); n != keys+tokens {
		t.Errorf("records = %d, want %d", n, keys+tokens)
	}
}

func TestMessagesHandlerGolden(t *testing.T) {
	clk := newClock()
	s := New(WithClock(clk.Now), WithRequestIDs(seqIDs()))
	s.IssueReplyTokenTo("reply-token-1", "U4af4980629", clk.Now())
	clk.Advance(2 * time.Second)
	call(t, s, request{path: PathReply, body: replyBody("reply-token-1", text("Hello, world"), `{"type":"sticker","packageId":"446","stickerId":"1988"}`)})
	clk.Advance(time.Minute)
	call(t, s, request{path: PathPush, retryKey: "123e4567-e89b-12d3-a456-426614174000",
		body: `{"to":"C4af4980629","messages":[{"type":"flex","altText":"Alarm","contents":{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[{"type":"text","text":"ALARM"}]}}}],"notificationDisabled":true}`})
	call(t, s, request{path: PathPush, body: pushBody("U4af4980629", text("no retry key"))})

	rec := httptest.NewRecorder()
	s.MessagesHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/messages", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, rec.Body.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "messages.golden.json"), pretty.Bytes())

	post := httptest.NewRecorder()
	s.MessagesHandler().ServeHTTP(post, httptest.NewRequest(http.MethodPost, "/messages", nil))
	if post.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /messages = %d, want 405", post.Code)
	}
}

func TestMessagesReturnsCopy(t *testing.T) {
	s := New()
	call(t, s, request{path: PathPush, body: pushBody("U1", text("hi"))})
	got := s.Messages()
	got[0].To = "mutated"
	got[0].Messages[0] = json.RawMessage(`{}`)
	again := s.Messages()
	if again[0].To != "U1" || string(again[0].Messages[0]) != text("hi") {
		t.Fatalf("Messages() exposed internal state: %+v", again[0])
	}
}

// FuzzRequest feeds arbitrary bodies and headers to every endpoint: the
// Server must never panic and never answer 5xx on its own, and a 2xx send must
// be recorded.
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		path, body, retryKey string
	}{
		{PathPush, pushBody("U1", text("hi")), ""},
		{PathPush, pushBody("U1", text("hi")), "123e4567-e89b-12d3-a456-426614174000"},
		{PathReply, replyBody("tok", text("hi")), ""},
		{PathLoading, `{"chatId":"U1","loadingSeconds":5}`, ""},
		{PathPush, `{"to":"U1","messages":[{"type":"flex","altText":"a","contents":{"type":"carousel","contents":[]}}]}`, ""},
		{PathPush, `{"to":"U1","messages":[{"type":"image","originalContentUrl":"https://x/a","previewImageUrl":"https://x/b"}]}`, ""},
		{PathPush, `{"to":"U1","messages":[{"type":"text","text":"q","quickReply":{"items":[]}}]}`, ""},
		{PathReply, `{"replyToken":null,"messages":[null]}`, "zz"},
		{PathPush, `[{"to":1}]`, ""},
		{"/v2/bot/info", ``, ""},
		{PathMarkAsRead, `{"markAsReadToken":"t"}`, ""},
		{PathMarkAsRead, `{"markAsReadToken":7}`, ""},
	}
	for _, sd := range seeds {
		f.Add(sd.path, []byte(sd.body), sd.retryKey)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte, retryKey string) {
		paths := []string{PathPush, PathReply, PathLoading, PathBotInfo, PathMarkAsRead}
		p := paths[len(path)%len(paths)]
		if strings.HasPrefix(path, "/") {
			p = path
		}
		s := New(WithAcceptUnknownReplyTokens())
		req, err := http.NewRequest(http.MethodPost, "http://api.line.me/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Path = p
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		req.Header[HeaderRetryKey] = []string{retryKey}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %s %q", rec.Code, p, body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("response is not JSON: %q", rec.Body.Bytes())
		}
		if rec.Header().Get(HeaderRequestID) == "" {
			t.Fatal("no request id")
		}
		sent := rec.Code == 200 && (p == PathPush || p == PathReply)
		if got := len(s.Messages()); (got == 1) != sent || got > 1 {
			t.Fatalf("status %d on %s but %d records", rec.Code, p, got)
		}
	})
}

// A Server left running keeps a bounded history: the newest sends and
// loading animations, expired reply tokens forgotten, and one Calls key for
// any number of made-up paths.
func TestLongRunBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var loadings []LoadingCall
	s := New(WithClock(func() time.Time { return now }), WithMaxRecords(3), WithOnLoading(func(c LoadingCall) { loadings = append(loadings, c) }))
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		tok := fmt.Sprintf("token-%d", i)
		s.IssueReplyTokenTo(tok, "U1", now)
		if st := post(PathReply, fmt.Sprintf(`{"replyToken":%q,"messages":[{"type":"text","text":"m%d"}]}`, tok, i)); st != 200 {
			t.Fatalf("reply %d: %d", i, st)
		}
		if st := post(PathLoading, `{"chatId":"U1","loadingSeconds":5}`); st != 202 {
			t.Fatalf("loading %d: %d", i, st)
		}
		post(fmt.Sprintf("/v2/bot/made-up-%d", i), `{}`)
	}
	var texts []string
	for _, m := range s.Messages() {
		texts = append(texts, string(m.Messages[0]))
	}
	if got := strings.Join(texts, " "); !strings.Contains(got, `"m2"`) || !strings.Contains(got, `"m4"`) || len(texts) != 3 {
		t.Fatalf("kept %d sends %s, want the newest 3 (m2..m4)", len(texts), got)
	}
	if len(s.Loading()) != 3 || len(loadings) != 5 {
		t.Fatalf("kept %d loading calls and observed %d, want 3 kept and 5 observed", len(s.Loading()), len(loadings))
	}
	if got := s.Calls()[Call{Path: PathUnknown, Status: 404}]; got != 5 || len(s.Calls()) != 3 {
		t.Fatalf("calls %v: want 5 unknown-path 404s under one key among 3 keys", s.Calls())
	}
	// Past the tokens' TTL and a sweep interval, issuing one more forgets
	// the expired ones: an expired token is refused just the same.
	now = now.Add(DefaultReplyTokenTTL + sweepEvery)
	s.IssueReplyTokenTo("fresh", "U1", now)
	s.mu.Lock()
	left := len(s.replyTokens)
	s.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d reply tokens held after the sweep, want only the fresh one", left)
	}
	if st := post(PathReply, `{"replyToken":"token-0","messages":[{"type":"text","text":"late"}]}`); st != 400 {
		t.Fatalf("an expired, forgotten token answered %d, want 400", st)
	}
}

// WithOnRecord sees every accepted send once, in the order Messages keeps
// them; a refused send (a used reply token) and a repeated retry key (409)
// are not sends.
func TestOnRecordSeesAcceptedSendsInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []Record
	s := New(WithOnRecord(func(r Record) { mu.Lock(); seen = append(seen, r); mu.Unlock() }))
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path, body, retryKey string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		if retryKey != "" {
			req.Header.Set(HeaderRetryKey, retryKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	s.IssueReplyTokenTo("tok", "U1", time.Now())
	key := "123e4567-e89b-12d3-a456-426614174000"
	steps := []struct {
		path, body, key string
		want            int
	}{
		{PathReply, `{"replyToken":"tok","messages":[{"type":"text","text":"first"}]}`, "", 200},
		{PathReply, `{"replyToken":"tok","messages":[{"type":"text","text":"again"}]}`, "", 400},
		{PathPush, `{"to":"U2","messages":[{"type":"text","text":"second"}]}`, key, 200},
		{PathPush, `{"to":"U2","messages":[{"type":"text","text":"second"}]}`, key, 409},
	}
	for i, st := range steps {
		if got := post(st.path, st.body, st.key); got != st.want {
			t.Fatalf("step %d: %d, want %d", i, got, st.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].Via != ViaReply || seen[0].To != "U1" || seen[1].Via != ViaPush || seen[1].RetryKey != key {
		t.Fatalf("observed %+v; want the reply to U1, then the push to U2 with its retry key", seen)
	}
	if !strings.Contains(string(seen[0].Messages[0]), "first") || !strings.Contains(string(seen[1].Messages[0]), "second") {
		t.Fatalf("observed messages %s, %s", seen[0].Messages[0], seen[1].Messages[0])
	}
}

// Mark as read (POST /v2/bot/chat/markAsRead, messaging-api.yml's
// markMessagesAsReadByToken): an issued token marks its chat read, as
// often as it is used (LINE's read tokens have no expiry); a token never
// issued, or a body without one, is refused with LINE's 400.
func TestMarkAsRead(t *testing.T) {
	clk := newClock()
	var seen []ReadMark
	s := New(WithClock(clk.Now), WithRequestIDs(seqIDs()), WithOnRead(func(m ReadMark) { seen = append(seen, m) }))
	s.IssueMarkAsReadToken("rt-1", "U1", "1001")
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantMsg    string
		wantProps  []string
	}{
		{"issued token", `{"markAsReadToken":"rt-1"}`, 200, "", nil},
		{"again: still valid", `{"markAsReadToken":"rt-1"}`, 200, "", nil},
		{"unknown token", `{"markAsReadToken":"nope"}`, 400, MsgInvalidReadToken, nil},
		{"no token", `{}`, 400, "The request body has 1 error(s)", []string{"markAsReadToken"}},
		{"empty token", `{"markAsReadToken":""}`, 400, "The request body has 1 error(s)", []string{"markAsReadToken"}},
		{"not an object", `[1]`, 400, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, s, request{path: PathMarkAsRead, body: tt.body})
			if res.status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", res.status, tt.wantStatus, res.raw)
			}
			if tt.wantMsg != "" && res.body["message"] != tt.wantMsg {
				t.Errorf("message %v, want %q", res.body["message"], tt.wantMsg)
			}
			if tt.wantProps != nil && fmt.Sprint(properties(res.body)) != fmt.Sprint(tt.wantProps) {
				t.Errorf("details %v, want %v", properties(res.body), tt.wantProps)
			}
		})
	}
	want := []ReadMark{
		{Chat: "U1", MessageID: "1001", Token: "rt-1", RequestID: "req-0001", At: clk.Now()},
		{Chat: "U1", MessageID: "1001", Token: "rt-1", RequestID: "req-0002", At: clk.Now()},
	}
	if got := s.Reads(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Reads() = %+v, want %+v", got, want)
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("WithOnRead saw %+v, want %+v", seen, want)
	}
	if n := s.Calls()[Call{Path: PathMarkAsRead, Status: 400}]; n != 4 {
		t.Errorf("400s counted %d, want 4", n)
	}
	// LINE's samples replay: any token is accepted, without a chat.
	open := New(WithAcceptUnknownReplyTokens())
	if res := call(t, open, request{path: PathMarkAsRead, body: `{"markAsReadToken":"30yhdy232..."}`}); res.status != 200 {
		t.Fatalf("unknown token under WithAcceptUnknownReplyTokens: %d %s", res.status, res.raw)
	}
	if r := open.Reads(); len(r) != 1 || r[0].Chat != "" {
		t.Fatalf("Reads() = %+v", r)
	}
}

// The Server remembers the newest MaxReadTokens read tokens: a long-running
// dev server does not grow with every message, and the oldest token is
// the one forgotten.
func TestReadTokensBounded(t *testing.T) {
	s := New()
	for i := range MaxReadTokens + 1 {
		s.IssueMarkAsReadToken(fmt.Sprintf("rt-%d", i), "U1", fmt.Sprint(i))
	}
	s.IssueMarkAsReadToken("rt-1", "U1", "1") // known: not issued twice
	if res := call(t, s, request{path: PathMarkAsRead, body: `{"markAsReadToken":"rt-0"}`}); res.status != 400 {
		t.Fatalf("the oldest token: %d, want forgotten (400)", res.status)
	}
	for _, tok := range []string{"rt-1", fmt.Sprintf("rt-%d", MaxReadTokens)} {
		if res := call(t, s, request{path: PathMarkAsRead, body: `{"markAsReadToken":"` + tok + `"}`}); res.status != 200 {
			t.Fatalf("%s: %d, want remembered", tok, res.status)
		}
	}
	s.mu.Lock()
	n := len(s.readTokens)
	s.mu.Unlock()
	if n != MaxReadTokens {
		t.Fatalf("%d tokens kept, want %d", n, MaxReadTokens)
	}
}
