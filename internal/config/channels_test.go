package config

import (
	"strings"
	"testing"
)

// Named channels come from LINE_CHANNELS, each setting from one SSM path
// per channel or, for a local run, from a variable suffixed with the
// channel's name; every problem is named.
func TestChannels(t *testing.T) {
	webhook := map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q"}
	worker := map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "tok", "IDEMPOTENCY_TABLE": "t"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	t.Run("none", func(t *testing.T) {
		c, err := LoadWebhook(envOf(webhook))
		if err != nil || c.Channels != nil {
			t.Fatalf("%+v %v", c.Channels, err)
		}
	})
	t.Run("webhook from SSM", func(t *testing.T) {
		c, err := LoadWebhook(envOf(with(webhook, "AWS_LAMBDA_FUNCTION_NAME", "f", "LINE_CHANNEL_SECRET", "", "LINE_CHANNEL_SECRET_PARAM", "/s",
			"LINE_CHANNELS", " b , brand-tw", "LINE_CHANNEL_PARAMETER_PATH", "/linegate/channels/")))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Channels) != 2 {
			t.Fatalf("%+v", c.Channels)
		}
		b := c.Channels[1]
		if b.Name != "brand-tw" || b.Secret != (Secret{Param: "/linegate/channels/brand-tw/secret"}) ||
			b.PreviousSecret != (Secret{Param: "/linegate/channels/brand-tw/secret-previous", Optional: true}) ||
			b.BotUserID != (Secret{Param: "/linegate/channels/brand-tw/bot-user-id", Optional: true}) || b.AccessToken.IsSet() {
			t.Fatalf("%+v", b)
		}
	})
	t.Run("worker long-lived from SSM", func(t *testing.T) {
		c, err := LoadWorker(envOf(with(worker, "LINE_CHANNELS", "b", "LINE_CHANNEL_PARAMETER_PATH", "/p")))
		if err != nil {
			t.Fatal(err)
		}
		b := c.Channels[0]
		if b.AccessToken != (Secret{Param: "/p/b/token"}) || b.Operators != (Secret{Param: "/p/b/operators", Optional: true}) || b.Secret.IsSet() || b.ChannelID.IsSet() {
			t.Fatalf("%+v", b)
		}
		a := b.Auth(c.Auth)
		if a.Mode != TokenLongLived || a.AccessToken.Param != "/p/b/token" || a.APIBaseURL != c.Auth.APIBaseURL {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("worker stateless and v2.1", func(t *testing.T) {
		env := with(worker, "LINE_TOKEN_MODE", "stateless", "LINE_CHANNEL_ID", "1", "LINE_CHANNEL_SECRET", "s", "LINE_CHANNELS", "b", "LINE_CHANNEL_PARAMETER_PATH", "/p")
		c, err := LoadWorker(envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		if b := c.Channels[0]; b.Secret.Param != "/p/b/secret" || b.ChannelID.Param != "/p/b/channel-id" || b.AccessToken.IsSet() {
			t.Fatalf("%+v", b)
		}
		env["LINE_TOKEN_MODE"], env["LINE_ASSERTION_KEY"] = "v2.1", "{}"
		c, err = LoadWorker(envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		if b := c.Channels[0]; b.AssertionKey.Param != "/p/b/assertion-key" || b.ChannelID.Param != "/p/b/channel-id" || b.Secret.IsSet() {
			t.Fatalf("%+v", b)
		}
	})
	t.Run("plain values locally", func(t *testing.T) {
		c, err := LoadWorker(envOf(with(worker, "LINE_CHANNELS", "brand-tw", "LINE_CHANNEL_ACCESS_TOKEN_BRAND_TW", "tok-b",
			"OPERATOR_LINE_IDS_BRAND_TW", "U0123456789abcdef0123456789abcdef")))
		if err != nil {
			t.Fatal(err)
		}
		if b := c.Channels[0]; b.AccessToken != (Secret{Value: "tok-b"}) || b.Operators.Value != "U0123456789abcdef0123456789abcdef" {
			t.Fatalf("%+v", b)
		}
	})
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"bad name", with(webhook, "LINE_CHANNELS", "B,default", "LINE_CHANNEL_PARAMETER_PATH", "/p"), []string{`"B"`, `"default"`}},
		{"twice", with(webhook, "LINE_CHANNELS", "b,b", "LINE_CHANNEL_PARAMETER_PATH", "/p"), []string{"twice"}},
		{"no path", with(webhook, "LINE_CHANNELS", "b"), []string{"LINE_CHANNEL_PARAMETER_PATH is not set", "LINE_CHANNEL_SECRET_B"}},
		{"relative path", with(webhook, "LINE_CHANNELS", "b", "LINE_CHANNEL_PARAMETER_PATH", "p"), []string{"leading slash"}},
		{"plain in lambda", with(webhook, "AWS_LAMBDA_FUNCTION_NAME", "f", "LINE_CHANNEL_SECRET", "", "LINE_CHANNEL_SECRET_PARAM", "/s",
			"LINE_CHANNELS", "b", "LINE_CHANNEL_SECRET_B", "x"), []string{"LINE_CHANNEL_SECRET_B is a plain value inside Lambda"}},
		{"bad bot id", with(webhook, "LINE_CHANNELS", "b", "LINE_CHANNEL_SECRET_B", "x", "BOT_USER_ID_B", "Ubot"), []string{"channel b", "bot user ID"}},
		{"bad operator", with(worker, "LINE_CHANNELS", "b", "LINE_CHANNEL_ACCESS_TOKEN_B", "x", "OPERATOR_LINE_IDS_B", "Uop"), []string{"channel b", `"Uop"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if _, ok := tt.env["EVENT_BUS_NAME"]; ok {
				_, err = LoadWebhook(envOf(tt.env))
			} else {
				_, err = LoadWorker(envOf(tt.env))
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseOperators(t *testing.T) {
	ids, err := ParseOperators(" U0123456789abcdef0123456789abcdef , Cfedcba9876543210fedcba9876543210 ")
	if err != nil || len(ids) != 2 {
		t.Fatalf("%v %v", ids, err)
	}
	if _, err := ParseOperators("U1"); err == nil {
		t.Fatal("want an error")
	}
	if CheckBotUserID("U0123456789abcdef0123456789abcdef") != nil || CheckBotUserID("C0123456789abcdef0123456789abcdef") == nil {
		t.Fatal("bot user ID check")
	}
}
