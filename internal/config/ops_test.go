package config

import (
	"strings"
	"testing"
	"time"
)

// Each token mode needs its own credentials, and says which is missing.
func TestLineAuthModes(t *testing.T) {
	base := map[string]string{"IDEMPOTENCY_TABLE": "t"}
	tests := []struct {
		name string
		env  map[string]string
		want string // a problem the error names; "" for none
	}{
		{"long-lived default", map[string]string{"LINE_CHANNEL_ACCESS_TOKEN_PARAM": "/x"}, ""},
		{"long-lived without token", map[string]string{}, "LINE_CHANNEL_ACCESS_TOKEN_PARAM is not set"},
		{"stateless", map[string]string{"LINE_TOKEN_MODE": "stateless", "LINE_CHANNEL_ID": "123", "LINE_CHANNEL_SECRET_PARAM": "/s"}, ""},
		{"stateless without channel", map[string]string{"LINE_TOKEN_MODE": "stateless", "LINE_CHANNEL_SECRET_PARAM": "/s"}, "LINE_CHANNEL_ID is not set"},
		{"stateless without secret", map[string]string{"LINE_TOKEN_MODE": "stateless", "LINE_CHANNEL_ID": "123"}, "LINE_CHANNEL_SECRET_PARAM is not set"},
		{"v2.1 without key", map[string]string{"LINE_TOKEN_MODE": "v2.1", "LINE_CHANNEL_ID": "123"}, "LINE_ASSERTION_KEY_PARAM is not set"},
		{"v2.1 plain key in Lambda", map[string]string{"LINE_TOKEN_MODE": "v2.1", "LINE_CHANNEL_ID": "123", "LINE_ASSERTION_KEY": "{}", "AWS_LAMBDA_FUNCTION_NAME": "f"}, "LINE_ASSERTION_KEY is a plain value inside Lambda"},
		{"unknown mode", map[string]string{"LINE_TOKEN_MODE": "forever", "LINE_CHANNEL_ACCESS_TOKEN_PARAM": "/x"}, "LINE_TOKEN_MODE must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := LoadWorker(envOf(env))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Auth.TokenLife != 15*time.Minute || c.AccessToken != c.Auth.AccessToken {
					t.Fatalf("auth %+v", c.Auth)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to name %q", err, tt.want)
			}
		})
	}
}

func TestLoadQuota(t *testing.T) {
	ok := map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "t", "OPERATOR_LINE_IDS": "U0000000000000000000000000000cafe",
		"CHATOPS_KEY": "k", "CHATOPS_DLQS": "a, b"}
	c, err := LoadQuota(envOf(ok))
	if err != nil || c.WarnPercent != 80 || c.AlarmPercent != 95 || !c.ChatOps.Enabled() || len(c.ChatOps.DLQs) != 2 || c.ChatOps.TTL != 24*time.Hour {
		t.Fatalf("%+v %v", c, err)
	}
	ok["QUOTA_WARN_PERCENT"], ok["QUOTA_ALARM_PERCENT"] = "96", "95"
	if _, err := LoadQuota(envOf(ok)); err == nil || !strings.Contains(err.Error(), "must be below") {
		t.Fatalf("err %v", err)
	}
}

// The notifier and the quota governor read the operators' settings
// (Paging) the same way: the time zone and metrics namespace defaulted,
// a missing OPERATOR_LINE_IDS and a time zone that is none refused.
func TestPaging(t *testing.T) {
	loaders := map[string]func(Getenv) (Paging, error){
		"notifier": func(e Getenv) (Paging, error) { c, err := LoadNotifier(e); return c.Paging, err },
		"quota":    func(e Getenv) (Paging, error) { c, err := LoadQuota(e); return c.Paging, err },
	}
	for name, load := range loaders {
		t.Run(name, func(t *testing.T) {
			p, err := load(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "t", "OPERATOR_LINE_IDS": "U0000000000000000000000000000cafe"}))
			if err != nil || p.TimeZone != "Asia/Tokyo" || p.MetricsNamespace() != "linegate" || len(p.Operators) != 1 || p.Auth.AccessToken.Value != "t" {
				t.Fatalf("%+v %v", p, err)
			}
			_, err = load(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "t", "OPERATOR_TIMEZONE": "Mars/Olympus"}))
			if err == nil || !strings.Contains(err.Error(), "OPERATOR_LINE_IDS") || !strings.Contains(err.Error(), "OPERATOR_TIMEZONE") {
				t.Fatalf("err %v, want it to name OPERATOR_LINE_IDS and OPERATOR_TIMEZONE", err)
			}
		})
	}
}
