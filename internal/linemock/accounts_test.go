package linemock

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A Server with a named channel tells the channels apart by their tokens,
// as LINE does: each send is recorded with its channel; a reply token and a
// mark-as-read token work only for the channel whose webhook carried them;
// retry keys, quotas and bot info are per channel; the stateless token
// endpoint issues each channel its own tokens.
func TestNamedChannels(t *testing.T) {
	s := New(WithTokens("test-token"), WithChannel("1000", "default-secret"),
		WithNamedChannel(NamedChannel{Name: "b", ID: "2000", Secret: "b-secret", Tokens: []string{"b-token"}}),
		WithClock(newClock().Now))
	const user = "U0123456789abcdef0123456789abcdef"
	asB := "Bearer b-token"

	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("from b")), auth: asB, retryKey: "6f8a1c2e-0d6b-4b7e-9c3f-1a2b3c4d5e6f"}); r.status != 200 {
		t.Fatalf("b's push: %d %s", r.status, r.raw)
	}
	// The same retry key on the default channel is another channel's: accepted.
	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("from default")), retryKey: "6f8a1c2e-0d6b-4b7e-9c3f-1a2b3c4d5e6f"}); r.status != 200 {
		t.Fatalf("the default's push with b's retry key: %d %s", r.status, r.raw)
	}
	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("again")), auth: asB, retryKey: "6f8a1c2e-0d6b-4b7e-9c3f-1a2b3c4d5e6f"}); r.status != 409 {
		t.Fatalf("b's repeated retry key: %d, want 409", r.status)
	}
	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("x")), auth: "Bearer nobody"}); r.status != 401 {
		t.Fatalf("an unknown token: %d, want 401", r.status)
	}
	msgs := s.Messages()
	if len(msgs) != 2 || msgs[0].Channel != "b" || msgs[1].Channel != "" {
		t.Fatalf("records %+v", msgs)
	}

	s.IssueChannelReplyToken("b", "rt-b", user, newClock().Now())
	if r := call(t, s, request{path: PathReply, body: replyBody("rt-b", text("x"))}); r.status != 400 || r.body["message"] != MsgInvalidReplyToken {
		t.Fatalf("b's reply token used by the default channel: %d %s", r.status, r.raw)
	}
	if r := call(t, s, request{path: PathReply, body: replyBody("rt-b", text("x")), auth: asB}); r.status != 200 {
		t.Fatalf("b's reply token used by b: %d %s", r.status, r.raw)
	}
	s.IssueChannelMarkAsReadToken("b", "mr-b", user, "1")
	if r := call(t, s, request{path: PathMarkAsRead, body: `{"markAsReadToken":"mr-b"}`}); r.status != 400 {
		t.Fatalf("b's read token used by the default channel: %d", r.status)
	}
	if r := call(t, s, request{path: PathMarkAsRead, body: `{"markAsReadToken":"mr-b"}`, auth: asB}); r.status != 200 || s.Reads()[0].Channel != "b" {
		t.Fatalf("b's read token used by b: %d %+v", r.status, s.Reads())
	}

	s.SetChannelQuota("b", Quota{Limit: 1, Used: 1})
	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("x")), auth: asB}); r.status != 429 {
		t.Fatalf("b's push past b's limit: %d, want 429", r.status)
	}
	if r := call(t, s, request{path: PathPush, body: pushBody(user, text("x"))}); r.status != 200 {
		t.Fatalf("the default's push while b's quota is spent: %d", r.status)
	}
	if r := call(t, s, request{method: http.MethodGet, path: PathQuota, auth: asB}); r.body["value"] != 1.0 {
		t.Fatalf("b's quota %s", r.raw)
	}

	b := call(t, s, request{method: http.MethodGet, path: PathBotInfo, auth: asB})
	d := call(t, s, request{method: http.MethodGet, path: PathBotInfo})
	if b.body["userId"] != ChannelBotUserID("b") || d.body["userId"] != DefaultBotInfo.UserID || ChannelBotUserID("b") == DefaultBotInfo.UserID {
		t.Fatalf("bot info: b %v, default %v", b.body["userId"], d.body["userId"])
	}

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"2000"}, "client_secret": {"b-secret"}}
	tok := call(t, s, request{path: PathTokenStateless, body: form.Encode(), contentType: "application/x-www-form-urlencoded", auth: "-"})
	minted, _ := tok.body["access_token"].(string)
	if tok.status != 200 || minted == "" {
		t.Fatalf("stateless token for b: %d %s", tok.status, tok.raw)
	}
	if r := call(t, s, request{method: http.MethodGet, path: PathBotInfo, auth: "Bearer " + minted}); r.body["userId"] != ChannelBotUserID("b") {
		t.Fatalf("a token minted for b's ID is not b's: %s", r.raw)
	}
	form.Set("client_secret", "default-secret")
	if r := call(t, s, request{path: PathTokenStateless, body: form.Encode(), contentType: "application/x-www-form-urlencoded", auth: "-"}); r.status != 400 {
		t.Fatalf("b's ID with the default's secret: %d", r.status)
	}

	// The console's settings: ?channel= picks one, an unknown one is 404.
	set := call(t, s.QuotaHandler(), request{method: http.MethodPost, path: "/_local/line/quota?channel=b", body: `{"limit":5,"used":2}`, auth: "-"})
	if set.status != 200 || s.ChannelQuota("b") != (Quota{Limit: 5, Used: 2}) || s.CurrentQuota().Limit != -1 {
		t.Fatalf("quota of b via the console: %d, b %+v, default %+v", set.status, s.ChannelQuota("b"), s.CurrentQuota())
	}
	if r := call(t, s.ChannelHandler(), request{method: http.MethodGet, path: "/_local/line/channel?channel=c", auth: "-"}); r.status != 404 {
		t.Fatalf("an unknown channel's settings: %d", r.status)
	}
	if got := strings.Join(s.Channels(), ","); got != "b" {
		t.Fatalf("channels %q", got)
	}
}
