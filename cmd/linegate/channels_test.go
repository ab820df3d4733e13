package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/stack"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/pkg/bot"
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

// doctor --channel b checks channel b of a linegate local: its webhook
// setting, test delivery, redelivery, bot info (b's bot), secret and quota
// through b's token; b's broken setting fails b's report and not the
// default channel's; a channel not served fails; a bad name is a usage
// error.
func TestDoctorChannelAgainstLocal(t *testing.T) {
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 300,
		Channels: []string{"b"}, Getenv: func(string) string { return "" }, Bot: func(config.Worker) *bot.Router { return testbot.New() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	t.Setenv("LINE_CHANNEL_SECRET_B", "")
	t.Setenv("LINE_CHANNEL_ACCESS_TOKEN_B", "")

	code, out, errOut := runCLI("doctor", "--endpoint-url", rt.URL(), "--channel", "b")
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("healthy channel b: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"linegate doctor: linegate local at " + rt.URL() + ", channel b", "PASS  webhook endpoint", rt.ChannelWebhookURL("b") + ", in use",
		"PASS  bot info", linemock.ChannelBotUserID("b"), "PASS  channel secret", "PASS  test delivery", "PASS  webhook redelivery", "PASS  push quota"} {
		if !strings.Contains(out, want) {
			t.Errorf("channel b's report lacks %q:\n%s", want, out)
		}
	}

	rt.LINE().SetChannelSettings("b", linemock.Channel{Active: true, Redelivery: true})
	code, out, _ = runCLI("doctor", "--endpoint-url", rt.URL(), "--channel", "b")
	if code != 1 || !strings.Contains(out, "FAIL  webhook endpoint") || !strings.Contains(out, "fix: set the webhook URL to "+rt.ChannelWebhookURL("b")) {
		t.Fatalf("b's webhook URL unset: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI("doctor", "--endpoint-url", rt.URL()); code != 0 {
		t.Fatalf("b's setting failed the default channel's report: exit %d\n%s", code, out)
	}
	rt.LINE().SetChannelSettings("b", linemock.Channel{Endpoint: rt.ChannelWebhookURL("b"), Active: true, Redelivery: true})

	t.Setenv("LINE_CHANNEL_SECRET_B", "not-b-secret")
	code, out, _ = runCLI("doctor", "--endpoint-url", rt.URL(), "--channel", "b")
	if code != 1 || !strings.Contains(out, "FAIL  channel secret") {
		t.Fatalf("a wrong secret for b: exit %d\n%s", code, out)
	}
	t.Setenv("LINE_CHANNEL_SECRET_B", "")

	if code, out, _ := runCLI("doctor", "--endpoint-url", rt.URL(), "--channel", "c"); code != 1 || !strings.Contains(out, "FAIL  bot info") {
		t.Fatalf("a channel linegate local does not serve: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI("doctor", "--endpoint-url", rt.URL(), "--channel", "B"); code != 2 {
		t.Fatalf("doctor --channel B exited %d, want 2", code)
	}
}

// Against a stack, doctor --channel NAME reads NAME's credentials under the
// stack's ChannelParameterPath (here on moto's SSM), and refuses a channel
// the stack's Channels parameter does not name.
func TestDoctorNamedChannelOfAStack(t *testing.T) {
	d := &deployment{stack: &stack.Stack{Name: "prod", Parameters: map[string]string{"Channels": "staging,brand-tw", "ChannelParameterPath": "/p"}}}
	if _, _, err := d.namedChannel(context.Background(), "other"); !errors.Is(err, errNoChannel) || !strings.Contains(err.Error(), "staging,brand-tw") {
		t.Fatalf("a channel the stack does not serve: %v", err)
	}

	ep := motoserver.Start(t)
	d.aws = motoserver.Config(ep)
	ctx := context.Background()
	c := ssm.NewFromConfig(d.aws)
	for name, v := range map[string]string{"/p/brand-tw/secret": "tw-secret", "/p/brand-tw/token": "tw-token"} {
		if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(v), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
			t.Fatal(err)
		}
	}
	_, secret, err := d.namedChannel(ctx, "brand-tw")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := secret(ctx); err != nil || got != "tw-secret" {
		t.Fatalf("brand-tw's secret = %q, %v; want tw-secret from /p/brand-tw/secret", got, err)
	}
	if _, _, err := d.namedChannel(ctx, "staging"); err == nil || !strings.Contains(err.Error(), "/p/staging/token") {
		t.Fatalf("staging without its token in SSM: %v; want an error naming /p/staging/token", err)
	}
}

// resend-held sends each channel's held results through that channel's
// token: with b's quota raised and the default's still spent, b's result
// goes (recorded as channel b's) and the default's stays held; once the
// default's is raised, it goes too.
func TestResendHeldPerChannelAgainstLocal(t *testing.T) {
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: 300,
		Channels: []string{"b"}, Getenv: func(string) string { return "" }, Bot: func(config.Worker) *bot.Router { return testbot.New() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	t.Setenv("LINE_CHANNEL_ACCESS_TOKEN_B", "")
	const user = "U6666666666666666666666666666667f"
	spent := linemock.Quota{Limit: 10, Used: 10}
	rt.LINE().SetQuota(spent)
	rt.LINE().SetChannelQuota("b", spent)
	def := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret), lineplatform.WithTimeout(30*time.Second))
	b := lineplatform.New(rt.ChannelWebhookURL("b"), []byte(local.ChannelSecret("b")), lineplatform.WithTimeout(30*time.Second),
		lineplatform.WithDestination(linemock.ChannelBotUserID("b")))
	for _, p := range []struct {
		lp   *lineplatform.Platform
		text string
	}{{def, "probe:push for the default channel"}, {b, "probe:push for channel b"}} {
		if d, err := p.lp.Deliver(context.Background(), p.lp.Text(user, p.text)); err != nil || !d.Delivered {
			t.Fatalf("%s: %+v %v", p.text, d, err)
		}
	}
	waitFor(t, "both channels' results held", func() bool {
		n := 0
		for _, e := range rt.Events() {
			if e.Outcome == "held" {
				n++
			}
		}
		return n == 2
	})
	sentThrough := func(text string) (string, bool) {
		for _, m := range rt.LINE().Messages() {
			if m.To == user && len(m.Messages) > 0 && bytes.Contains(m.Messages[0], []byte(text)) {
				return m.Channel, true
			}
		}
		return "", false
	}

	rt.LINE().SetChannelQuota("b", linemock.Quota{Limit: 20, Used: 10})
	code, out, errOut := runCLI("resend-held", "--endpoint-url", rt.URL())
	if code != 1 || !strings.Contains(out, "1 held result(s) sent, 1 still held") {
		t.Fatalf("b's quota raised, the default's spent: exit %d\n%s%s", code, out, errOut)
	}
	if ch, ok := sentThrough("for channel b"); !ok || ch != "b" {
		t.Fatalf("b's held result: sent %v through channel %q; want channel b's token", ok, ch)
	}
	if _, ok := sentThrough("for the default channel"); ok {
		t.Fatal("the default channel's result was sent with its quota spent")
	}

	rt.LINE().SetQuota(linemock.Quota{Limit: 20, Used: 10})
	if code, out, errOut := runCLI("resend-held", "--endpoint-url", rt.URL()); code != 0 || !strings.Contains(out, "1 held result(s) sent") {
		t.Fatalf("both quotas raised: exit %d\n%s%s", code, out, errOut)
	}
	if ch, ok := sentThrough("for the default channel"); !ok || ch != "" {
		t.Fatalf("the default channel's held result: sent %v through channel %q", ok, ch)
	}
}
