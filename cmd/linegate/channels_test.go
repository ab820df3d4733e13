package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/signature"
)

// channelSaid reports whether the local LINE API recorded a message of
// channel ch ("" the default) to user whose JSON holds text.
func channelSaid(t *testing.T, p *process, ch, user, text string) (bool, string) {
	t.Helper()
	resp, err := http.Get(p.url + "/_local/line/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var ms []struct {
		To, Via, Channel string
		Messages         []json.RawMessage
	}
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatalf("/_local/line/messages: %v\n%s", err, raw)
	}
	for _, m := range ms {
		for _, body := range m.Messages {
			if m.Channel == ch && m.To == user && strings.Contains(string(body), text) {
				return true, ""
			}
		}
	}
	return false, string(raw)
}

// The brief's "done when", through the real processes: `linegate local
// --channel b` (the project's worker built and run as the bot's own
// process) answers a text sent with `linegate send --channel b` through
// b's token (the LINE mock records the reply as channel b's); the same
// signed body on /webhook is refused with 401; and one user ID keeps a
// session in each channel: an order started in the default channel is not
// b's (b's answer to its button is "another order"), and is still the
// default channel's afterwards.
func TestLocalChannelProcess(t *testing.T) {
	p := startProcess(t, "--channel", "b", "--time-scale", "30")
	const user, wait = "U0000000000000000000000000000user", 60 * time.Second
	hookB := strings.TrimSuffix(p.webhook, "/webhook") + "/webhook/b"
	waitUntil(t, 10*time.Second, "the banner's line of channel b's webhook "+hookB, func() (bool, string) {
		return strings.Contains(p.console.String(), "channel b: webhook "+hookB), p.console.String()
	})
	send := func(url string, args ...string) (int, string, string) {
		t.Helper()
		return runCLI(append([]string{"send", "--channel", "b", "--url", url, "--user", user}, args...)...)
	}

	if code, out, errOut := send(hookB, "--text", "hello b"); code != 0 || !strings.HasPrefix(out, "200 OK in ") {
		t.Fatalf("send --channel b: exit %d, out %q, err %q", code, out, errOut)
	}
	waitUntil(t, wait, "channel b's reply to hello b", func() (bool, string) { return channelSaid(t, p, "b", user, `"hello b"`) })
	if ok, _ := channelSaid(t, p, "", user, `"hello b"`); ok {
		t.Fatal("the default channel answered a text sent to channel b")
	}

	// b's body, signed with b's secret, on the default channel's path.
	code, out, errOut := send(p.webhook, "--text", "misrouted")
	if code != 1 || !strings.HasPrefix(out, "401 ") || !strings.Contains(errOut, "401") {
		t.Fatalf("b's body on /webhook: exit %d, out %q, err %q; want 401", code, out, errOut)
	}

	// One user, two sessions.
	if code, out, errOut := runCLI("send", "--url", p.webhook, "--user", user, "--text", "order"); code != 0 {
		t.Fatalf("order on the default channel: exit %d, out %q, err %q", code, out, errOut)
	}
	waitUntil(t, wait, "the default channel's first order question", func() (bool, string) {
		return channelSaid(t, p, "", user, "What would you like?")
	})
	if code, out, errOut := send(hookB, "--event", "postback", "--data", "order:drink=tea"); code != 0 {
		t.Fatalf("the order's button on channel b: exit %d, out %q, err %q", code, out, errOut)
	}
	waitUntil(t, wait, "channel b's answer: no order of its own", func() (bool, string) {
		return channelSaid(t, p, "b", user, "That button belongs to another order.")
	})
	if code, out, errOut := runCLI("send", "--url", p.webhook, "--user", user, "--event", "postback", "--data", "order:drink=tea"); code != 0 {
		t.Fatalf("the order's button on the default channel: exit %d, out %q, err %q", code, out, errOut)
	}
	waitUntil(t, wait, "the default channel's order going on", func() (bool, string) {
		return channelSaid(t, p, "", user, "Which size?")
	})
	if ok, _ := channelSaid(t, p, "", user, "another order"); ok {
		t.Fatal("the default channel's session was lost to channel b's")
	}
	if ok, raw := channelSaid(t, p, "b", user, "misrouted"); ok {
		t.Fatalf("a refused body was answered: %s", raw)
	}
}

// send --channel NAME posts to NAME's webhook signed with NAME's secret
// ($LINE_CHANNEL_SECRET_<NAME>, else linegate local's local-channel-secret-NAME),
// its destination NAME's bot user ID; a bad name is a usage error ("default"
// is the default channel).
func TestSendChannel(t *testing.T) {
	var paths, dests []string
	secret := local.ChannelSecret("brand-tw")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signature.Verify(body, r.Header.Get(signature.Header), []byte(secret)) {
			w.WriteHeader(401)
			return
		}
		var b struct{ Destination string }
		_ = json.Unmarshal(body, &b)
		paths, dests = append(paths, r.URL.Path), append(dests, b.Destination)
		_, _ = w.Write([]byte(`{"accepted":1}`))
	}))
	defer srv.Close()
	t.Setenv("LINE_CHANNEL_SECRET_BRAND_TW", "")
	if code, out, errOut := runCLI("send", "--channel", "brand-tw", "--url", srv.URL+"/webhook/brand-tw", "--text", "hi"); code != 0 {
		t.Fatalf("send --channel brand-tw: exit %d, out %q, err %q", code, out, errOut)
	}
	secret = "tw-from-env"
	t.Setenv("LINE_CHANNEL_SECRET_BRAND_TW", secret)
	if code, out, errOut := runCLI("send", "--channel", "brand-tw", "--url", srv.URL+"/webhook/brand-tw", "--text", "hi"); code != 0 {
		t.Fatalf("send --channel brand-tw with its secret from the environment: exit %d, out %q, err %q", code, out, errOut)
	}
	if want := linemock.ChannelBotUserID("brand-tw"); len(dests) != 2 || dests[0] != want || dests[1] != want {
		t.Fatalf("destinations %q, want %s twice", dests, want)
	}
	code, _, errOut := runCLI("send", "--channel", "brand-tw", "--url", srv.URL, "--secret", "wrong", "--text", "x")
	if code != 1 || !strings.Contains(errOut, "LINE_CHANNEL_SECRET_BRAND_TW") {
		t.Fatalf("a refused channel send: exit %d, err %q; want 1 and the channel's secret named", code, errOut)
	}
	for _, bad := range []string{"B", "a_b", "-b", strings.Repeat("x", 40)} {
		if code, _, _ := runCLI("send", "--channel", bad, "--text", "x"); code != 2 {
			t.Errorf("send --channel %q: exit %d, want 2", bad, code)
		}
	}
}
