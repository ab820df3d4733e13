package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/pkg/bot"
)

// counterBot answers "count" with how many times its chat (in the event's
// channel) said it, kept in the chat's session; any other text with the
// channel it came through.
func counterBot(config.Worker) *bot.Router {
	r := bot.NewRouter()
	r.OnText("count", func(ctx context.Context, e *bot.Event, _ string) error {
		var n int
		s, err := e.Session(ctx, &n)
		if err != nil {
			return err
		}
		n++
		if err := s.Save(ctx, n); err != nil {
			return err
		}
		return e.ReplyText(ctx, fmt.Sprintf("count %d in channel %q", n, e.Channel))
	})
	r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
		return e.ReplyText(ctx, fmt.Sprintf("%s (channel %q)", text, e.Channel))
	})
	return r
}

// channelMessage is a message the local LINE API took, with the channel
// whose token sent it.
type channelMessage struct {
	To       string            `json:"to"`
	Via      string            `json:"via"`
	Channel  string            `json:"channel"`
	Messages []json.RawMessage `json:"messages"`
}

// waitChannelMessage waits for a send of channel ch containing contains.
func waitChannelMessage(t *testing.T, rt *Runtime, ch, contains string) channelMessage {
	t.Helper()
	var found channelMessage
	var all []channelMessage
	eventuallySaw(t, 30*time.Second, fmt.Sprintf("a message of channel %q containing %q", ch, contains), func() bool {
		all = nil
		getJSON(t, rt.URL()+"/_local/line/messages", &all)
		for _, m := range all {
			if m.Channel == ch && bytes.Contains(bytes.Join(rawBytes(m.Messages), nil), []byte(contains)) {
				found = m
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%+v", all) })
	return found
}

// postSigned posts body to url signed with secret and returns the status.
func postSigned(t *testing.T, url, secret string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set(signature.Header, signature.Sign([]byte(secret), body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}

// linegate local --channel b: a text to /webhook/b signed with b's secret is
// answered through b's token (the local LINE API records the reply as
// channel b's); the same body on /webhook is refused with 401 and reaches
// no worker; the same user ID in both channels keeps two sessions.
func TestLocalChannels(t *testing.T) {
	rt, def := start(t, Config{Channels: []string{"b"}, Bot: counterBot})
	b := lineplatform.New(rt.ChannelWebhookURL("b"), []byte(ChannelSecret("b")), lineplatform.WithTimeout(deliveryTimeout),
		lineplatform.WithDestination(linemock.ChannelBotUserID("b")))
	const user = "U0000000000000000000000000000user"

	id := deliver(t, b, b.Text(user, "hello b"))
	m := waitChannelMessage(t, rt, "b", `hello b (channel \"b\")`)
	if m.Via != "reply" || m.To != user {
		t.Fatalf("channel b's answer %+v: want a reply to %s", m, user)
	}
	waitEvent(t, rt, 30*time.Second, id, "handled", func(e eventView) bool { return e.Outcome == "ok" })

	// The same signed body on the default channel's path, and a body signed
	// with the default's secret on b's path: refused, nothing handed off.
	body := lineplatform.Body(linemock.ChannelBotUserID("b"), b.Text(user, "misrouted"))
	if got := postSigned(t, rt.WebhookURL(), ChannelSecret("b"), body); got != http.StatusUnauthorized {
		t.Fatalf("b's body on /webhook: %d, want 401", got)
	}
	if got := postSigned(t, rt.ChannelWebhookURL("b"), DefaultSecret, body); got != http.StatusUnauthorized {
		t.Fatalf("a body signed with the default secret on /webhook/b: %d, want 401", got)
	}
	if got := postSigned(t, rt.ChannelWebhookURL("c"), ChannelSecret("b"), body); got != http.StatusNotFound {
		t.Fatalf("a channel not served: %d, want 404", got)
	}

	// One user, two channels, two sessions.
	for _, step := range []struct {
		p    *lineplatform.Platform
		ch   string
		want string
	}{
		{def, "", `count 1 in channel \"\"`},
		{b, "b", `count 1 in channel \"b\"`},
		{b, "b", `count 2 in channel \"b\"`},
		{def, "", `count 2 in channel \"\"`},
	} {
		deliver(t, step.p, step.p.Text(user, "count"))
		waitChannelMessage(t, rt, step.ch, step.want)
	}
	var all []channelMessage
	getJSON(t, rt.URL()+"/_local/line/messages", &all)
	for _, m := range all {
		if strings.Contains(string(bytes.Join(rawBytes(m.Messages), nil)), "misrouted") {
			t.Fatalf("a refused body was answered: %+v", m)
		}
	}

	// The console chats as a user of either channel: its send names the
	// channel, and the transcript keeps each channel's chat apart.
	req, _ := json.Marshal(map[string]any{"channel": "b", "kind": "text", "text": "from the console", "chat": map[string]string{"userId": user}})
	res, err := http.Post(rt.URL()+"/_local/send", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("console send to channel b: %d", res.StatusCode)
	}
	waitChannelMessage(t, rt, "b", `from the console (channel \"b\")`)
	var chats []struct{ ID, Channel string }
	getJSON(t, rt.URL()+"/_local/chats", &chats)
	seen := map[string]bool{}
	for _, c := range chats {
		seen[c.Channel+"/"+c.ID] = true
	}
	if !seen["/"+user] || !seen["b/"+user] {
		t.Fatalf("console chats %+v: want the user's chat in both channels", chats)
	}
	var transcript []struct{ Channel, Kind string }
	getJSON(t, rt.URL()+"/_local/chat?channel=b&chatId="+user, &transcript)
	for _, e := range transcript {
		if e.Channel != "b" {
			t.Fatalf("channel b's transcript holds %+v", e)
		}
	}
	bad, _ := json.Marshal(map[string]any{"channel": "c", "kind": "text", "text": "x", "chat": map[string]string{"userId": user}})
	res, err = http.Post(rt.URL()+"/_local/send", "application/json", bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("console send to a channel not served: %d, want 400", res.StatusCode)
	}
}

// A named channel's secret comes from LINE_CHANNEL_SECRET_<NAME>, its name
// upper-cased with hyphens as underscores; the default secret of the
// channel is then refused.
func TestLocalChannelSecretFromEnvironment(t *testing.T) {
	env := map[string]string{"LINE_CHANNEL_SECRET_BRAND_TW": "tw-secret-from-env"}
	rt, _ := start(t, Config{Channels: []string{"brand-tw"}, Bot: counterBot, Getenv: func(k string) string { return env[k] }})
	body := lineplatform.Body(linemock.ChannelBotUserID("brand-tw"), lineplatform.New("", nil).Text("U0000000000000000000000000000user", "hi tw"))
	if got := postSigned(t, rt.ChannelWebhookURL("brand-tw"), ChannelSecret("brand-tw"), body); got != http.StatusUnauthorized {
		t.Fatalf("the default secret of brand-tw: %d, want 401", got)
	}
	if got := postSigned(t, rt.ChannelWebhookURL("brand-tw"), "tw-secret-from-env", body); got != http.StatusOK {
		t.Fatalf("the secret from LINE_CHANNEL_SECRET_BRAND_TW: %d, want 200", got)
	}
	waitChannelMessage(t, rt, "brand-tw", `hi tw (channel \"brand-tw\")`)
}

func TestLocalChannelNamesChecked(t *testing.T) {
	for _, chs := range [][]string{{"B"}, {"default"}, {"b", "b"}} {
		_, err := Start(context.Background(), Config{Template: testTemplate, Addr: "127.0.0.1:0", Channels: chs,
			Bot: counterBot, Getenv: func(string) string { return "" }})
		if err == nil {
			t.Fatalf("channels %q accepted", chs)
		}
	}
}
