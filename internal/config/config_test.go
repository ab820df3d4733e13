package config

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestLoadWebhook(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string
		check   func(t *testing.T, c Webhook)
	}{
		{
			name: "ssm in lambda",
			env:  map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f", "LINE_CHANNEL_SECRET_PARAM": "/linegate/secret", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "AWS_REGION": "ap-northeast-1"},
			check: func(t *testing.T, c Webhook) {
				if c.Secret.Param != "/linegate/secret" || c.ChatQueueURL != "q" || c.Region != "ap-northeast-1" || c.Source != "line.webhook" || c.MaxBodyBytes != 1<<20 || c.PublishDeadline != 800*time.Millisecond ||
					c.SecretRefreshCooldown != 10*time.Second {
					t.Fatalf("%+v", c)
				}
			},
		},
		{
			name: "plain secret locally",
			env:  map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "PUBLISH_DEADLINE_MS": "500", "MAX_BODY_BYTES": "2048"},
			check: func(t *testing.T, c Webhook) {
				if c.Secret.Value != "s" || c.PublishDeadline != 500*time.Millisecond || c.MaxBodyBytes != 2048 {
					t.Fatalf("%+v", c)
				}
			},
		},
		{name: "plain secret under sam local", env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f", "AWS_SAM_LOCAL": "true", "LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q"}},
		{name: "plain secret in lambda refused", env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f", "LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q"}, wantErr: []string{"plain value inside Lambda"}},
		{name: "everything missing, every problem listed", env: map[string]string{}, wantErr: []string{"EVENT_BUS_NAME is not set", "CHAT_QUEUE_URL is not set", "LINE_CHANNEL_SECRET_PARAM is not set"}},
		{name: "bad numbers", env: map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "PUBLISH_DEADLINE_MS": "soon", "MAX_BODY_BYTES": "0"}, wantErr: []string{"PUBLISH_DEADLINE_MS must be", "MAX_BODY_BYTES must be"}},
		{name: "secret re-read cooldown", env: map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "SECRET_REFRESH_COOLDOWN_MS": "2500"},
			check: func(t *testing.T, c Webhook) {
				if c.SecretRefreshCooldown != 2500*time.Millisecond {
					t.Fatalf("cooldown %v, want 2.5s", c.SecretRefreshCooldown)
				}
			}},
		{name: "secret re-read cooldown too short", env: map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "SECRET_REFRESH_COOLDOWN_MS": "10"}, wantErr: []string{"SECRET_REFRESH_COOLDOWN_MS must be"}},
		{name: "bad bot id", env: map[string]string{"LINE_CHANNEL_SECRET": "s", "EVENT_BUS_NAME": "b", "CHAT_QUEUE_URL": "q", "BOT_USER_ID": "bot"}, wantErr: []string{"BOT_USER_ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadWebhook(envOf(tt.env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadWorkerAndNotifier(t *testing.T) {
	w, err := LoadWorker(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "tok", "IDEMPOTENCY_TABLE": "t", "PROBES_ENABLED": "true", "FUNCTION_TIMEOUT_SECONDS": "60"}))
	if err != nil || !w.Probes || w.FunctionTimeout != time.Minute || w.APIBaseURL != "https://api.line.me" || w.Concurrency != 4 {
		t.Fatalf("%+v %v", w, err)
	}
	_, err = LoadWorker(envOf(map[string]string{"LINE_API_BASE_URL": "ftp://x", "PROBES_ENABLED": "maybe"}))
	for _, want := range []string{"IDEMPOTENCY_TABLE", "LINE_CHANNEL_ACCESS_TOKEN_PARAM", "LINE_API_BASE_URL", "PROBES_ENABLED"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not name %s", err, want)
		}
	}
	const user, group = "U0123456789abcdef0123456789abcdef", "Cfedcba9876543210fedcba9876543210"
	n, err := LoadNotifier(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN_PARAM": "/p", "OPERATOR_LINE_IDS": " " + user + " , " + group + ","}))
	if err != nil || len(n.Operators) != 2 || n.Operators[1] != group || n.TimeZone != "Asia/Tokyo" {
		t.Fatalf("%+v %v", n, err)
	}
	for _, bad := range []string{"Uaaa", "X0123456789abcdef0123456789abcdef", "U0123456789ABCDEF0123456789ABCDEF", user + "0", "Uoperator0000000000000000000000000"} {
		_, err := LoadNotifier(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN_PARAM": "/p", "OPERATOR_LINE_IDS": user + "," + bad}))
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("operator %q: err %v, want it named", bad, err)
		}
	}
	_, err = LoadNotifier(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "t", "OPERATOR_TIMEZONE": "Mars/Olympus"}))
	if err == nil || !strings.Contains(err.Error(), "OPERATOR_LINE_IDS") || !strings.Contains(err.Error(), "OPERATOR_TIMEZONE") {
		t.Fatalf("err %v", err)
	}
}

// The worker's durations in hours: IDEMPOTENCY_KEEP_HOURS, how long a
// handled event is remembered (never under LINE's 24 h redelivery and
// retry-key window), and SESSION_TTL_HOURS, how long a chat session
// outlives its last save.
func TestWorkerHours(t *testing.T) {
	keep := func(w Worker) time.Duration { return w.KeepCompleted }
	session := func(w Worker) time.Duration { return w.SessionTTL }
	tests := []struct {
		env     string
		value   string
		field   func(Worker) time.Duration
		want    time.Duration
		wantErr bool
	}{
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "", field: keep, want: 48 * time.Hour},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "24", field: keep, want: 24 * time.Hour},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "336", field: keep, want: 14 * 24 * time.Hour},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "23", wantErr: true},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "0", wantErr: true},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "two days", wantErr: true},
		{env: "IDEMPOTENCY_KEEP_HOURS", value: "8785", wantErr: true},
		{env: "SESSION_TTL_HOURS", value: "", field: session, want: 24 * time.Hour},
		{env: "SESSION_TTL_HOURS", value: "1", field: session, want: time.Hour},
		{env: "SESSION_TTL_HOURS", value: "168", field: session, want: 7 * 24 * time.Hour},
		{env: "SESSION_TTL_HOURS", value: "0", wantErr: true},
		{env: "SESSION_TTL_HOURS", value: "a day", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			w, err := LoadWorker(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "tok", "IDEMPOTENCY_TABLE": "t", tt.env: tt.value}))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.env) {
					t.Fatalf("error %v does not name %s", err, tt.env)
				}
				return
			}
			if err != nil || tt.field(w) != tt.want {
				t.Fatalf("%s gives %v (err %v), want %v", tt.env, tt.field(w), err, tt.want)
			}
		})
	}
}

// The notifier's paging: the ledger's table, the window, the DLQs the
// sweep watches and its grace; bad values are named.
func TestNotifierPaging(t *testing.T) {
	const user = "U0123456789abcdef0123456789abcdef"
	base := map[string]string{"LINE_CHANNEL_ACCESS_TOKEN_PARAM": "/p", "OPERATOR_LINE_IDS": user}
	with := func(kv ...string) Getenv {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return envOf(m)
	}
	n, err := LoadNotifier(with())
	if err != nil || n.Window != 15*time.Minute || n.Grace != 3*time.Minute || n.StateTable != "" || n.DLQs != nil {
		t.Fatalf("defaults %+v %v", n, err)
	}
	n, err = LoadNotifier(with("ALERT_STATE_TABLE", "linegate-IdempotencyTable", "ALERT_WINDOW", "15s", "ALERT_SWEEP_GRACE", "3s",
		"ALERT_DLQS", " https://sqs.ap-northeast-1.amazonaws.com/1/a.fifo ,https://sqs.ap-northeast-1.amazonaws.com/1/b,"))
	if err != nil || n.Window != 15*time.Second || n.Grace != 3*time.Second || n.StateTable != "linegate-IdempotencyTable" || len(n.DLQs) != 2 {
		t.Fatalf("%+v %v", n, err)
	}
	tests := []struct{ name, key, value string }{
		{"window not a duration", "ALERT_WINDOW", "15"},
		{"window of nothing", "ALERT_WINDOW", "0s"},
		{"window over a day", "ALERT_WINDOW", "25h"},
		{"grace negative", "ALERT_SWEEP_GRACE", "-1m"},
		{"a DLQ that is no URL", "ALERT_DLQS", "linegate-InteractiveDLQ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadNotifier(with(tt.key, tt.value)); err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("err %v, want it to name %s", err, tt.key)
			}
		})
	}
}

// ROUTE_QUEUES is the worker's queue table: the route queues bot.Queue
// names, each with its URL, each name once.
func TestRouteQueues(t *testing.T) {
	const long, reports = "https://sqs.ap-northeast-1.amazonaws.com/1/s-LongQueue-X", "http://127.0.0.1:3000/1/reports"
	tests := []struct {
		value   string
		want    map[string]string
		wantErr string
	}{
		{value: "", want: nil},
		{value: "long=" + long, want: map[string]string{"long": long}},
		{value: " long = " + long + " , reports=" + reports, want: map[string]string{"long": long, "reports": reports}},
		{value: "long", wantErr: `got "long"`},
		{value: "Long=" + long, wantErr: "lowercase"},
		{value: "=" + long, wantErr: "name=URL"},
		{value: "long=" + long + ",long=" + reports, wantErr: `"long" twice`},
		{value: "long=LongQueue", wantErr: `ROUTE_QUEUES long must be an http(s) URL, got "LongQueue"`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			w, err := LoadWorker(envOf(map[string]string{"LINE_CHANNEL_ACCESS_TOKEN": "tok", "IDEMPOTENCY_TABLE": "t", "ROUTE_QUEUES": tt.value}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(w.RouteQueues, tt.want) {
				t.Fatalf("RouteQueues %v (err %v), want %v", w.RouteQueues, err, tt.want)
			}
		})
	}
}
