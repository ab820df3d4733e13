package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// decodeLines parses every JSON line in b.
func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLoggerContextFields(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, WithLevel(slog.LevelInfo))

	// The invocation's trace, as aws-lambda-go puts it in the context.
	invoke := Header{Root: "1-6650a1b2-0123456789abcdef01234567", Parent: "1111222233334444", Sampled: true}
	ctx := WithInvokeHeader(context.Background(), invoke)
	ctx = WithEventID(ctx, "01FZ74A0TDDPYRVKNK77XKC3ZR")
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-123"})
	log.InfoContext(ctx, "published", "events", 2)
	log.Info("no context")

	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("got %d lines", len(lines))
	}
	first := lines[0]
	want := map[string]any{
		"message": "published", "level": "INFO", "events": float64(2),
		LogKeyTraceID: invoke.Root, LogKeyEventID: "01FZ74A0TDDPYRVKNK77XKC3ZR", LogKeyRequestID: "req-123",
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %#v, want %#v (line %v)", k, first[k], v, first)
		}
	}
	if _, ok := first["timestamp"]; !ok {
		t.Errorf("no timestamp in %v", first)
	}
	for _, k := range []string{LogKeyTraceID, LogKeyEventID, LogKeyRequestID} {
		if _, ok := lines[1][k]; ok {
			t.Errorf("record without context carries %s: %v", k, lines[1])
		}
	}
}

// A caller that logs webhookEventId (or traceId) itself inside a context
// that carries it gets the key once on the line, not twice.
func TestLoggerContextFieldsOnce(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf)
	root := "1-6650a1b2-0123456789abcdef01234567"
	ctx := WithInvokeHeader(context.Background(), Header{Root: root, Parent: "1111222233334444", Sampled: true})
	ctx = WithEventID(ctx, "01FZ74A0TDDPYRVKNK77XKC3ZR")
	log.InfoContext(ctx, "record processed", LogKeyEventID, "01FZ74A0TDDPYRVKNK77XKC3ZR", LogKeyTraceID, root)
	line := buf.String()
	for _, k := range []string{LogKeyEventID, LogKeyTraceID} {
		if n := strings.Count(line, `"`+k+`"`); n != 1 {
			t.Errorf("%s appears %d times: %s", k, n, line)
		}
	}
}

type secretValuer struct{}

func (secretValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("accessToken", "valuer-token-XYZ"), slog.Int("n", 1))
}

func TestLoggerRedacts(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, WithLevel(slog.LevelDebug), WithRedactKeys("displayName")).
		With("channelSecret", "with-secret-ABC", "function", "webhook")
	log.Info("event",
		"text", "hello private words",
		"replyToken", "reply-token-123",
		"X-Line-Signature", "sig-456",
		"Authorization", "Bearer tok-789",
		"channel_access_token", "cat-000",
		"displayName", "Taro",
		"userId", HashUserID("U4af4980629"),
		"events", 3,
		slog.Group("payload", slog.String("type", "text"), slog.String("text", "nested words")),
		"resolved", secretValuer{},
	)
	out := buf.String()
	for _, leak := range []string{"hello private words", "reply-token-123", "sig-456", "tok-789", "cat-000",
		"Taro", "nested words", "valuer-token-XYZ", "with-secret-ABC", "U4af4980629"} {
		if strings.Contains(out, leak) {
			t.Errorf("log leaks %q: %s", leak, out)
		}
	}
	line := decodeLines(t, buf.Bytes())[0]
	for _, k := range []string{"text", "replyToken", "X-Line-Signature", "Authorization", "channel_access_token", "displayName", "channelSecret"} {
		if line[k] != Redacted {
			t.Errorf("%s = %#v, want %q", k, line[k], Redacted)
		}
	}
	if line["events"] != float64(3) || line["function"] != "webhook" || line["userId"] != HashUserID("U4af4980629") {
		t.Errorf("allowed attributes changed: %v", line)
	}
	msg, _ := line["message"].(string)
	if msg != "event" {
		t.Errorf("message = %#v", line["message"])
	}
	if p, _ := line["payload"].(map[string]any); p["text"] != Redacted || p["type"] != "text" {
		t.Errorf("group payload = %v", line["payload"])
	}
	group, _ := line["resolved"].(map[string]any)
	if group["accessToken"] != Redacted || group["n"] != float64(1) {
		t.Errorf("LogValuer group = %v", line["resolved"])
	}
}

// Attributes inside a logger's WithGroup are redacted too.
func TestLoggerRedactsInGroups(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, WithLevel(slog.LevelInfo)).WithGroup("event")
	log.Info("got", slog.Group("msg", slog.String("type", "text"), slog.String("text", "nested words")))
	line := decodeLines(t, buf.Bytes())[0]
	ev, _ := line["event"].(map[string]any)
	msg, _ := ev["msg"].(map[string]any)
	if msg["text"] != Redacted || msg["type"] != "text" {
		t.Fatalf("group redaction: %v", line)
	}
}

func TestLoggerLevelFromEnv(t *testing.T) {
	tests := []struct {
		name      string
		lambda    string
		fallback  string
		opt       []LogOption
		wantDebug bool
		wantInfo  bool
		wantWarn  bool
	}{
		{"default info", "", "", nil, false, true, true},
		{"lambda WARN", "WARN", "", nil, false, false, true},
		{"lambda DEBUG", "DEBUG", "", nil, true, true, true},
		{"lambda TRACE", "TRACE", "", nil, true, true, true},
		{"lambda ERROR", "ERROR", "", nil, false, false, false},
		{"lambda wins over LOG_LEVEL", "ERROR", "DEBUG", nil, false, false, false},
		{"LOG_LEVEL fallback", "", "warn", nil, false, false, true},
		{"garbage is info", "LOUD", "", nil, false, true, true},
		{"option wins", "ERROR", "", []LogOption{WithLevel(slog.LevelDebug)}, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_LOG_LEVEL", tt.lambda)
			t.Setenv("LOG_LEVEL", tt.fallback)
			var buf bytes.Buffer
			log := NewLogger(&buf, tt.opt...)
			log.Debug("d")
			log.Info("i")
			log.Warn("w")
			got := map[string]bool{}
			for _, l := range decodeLines(t, buf.Bytes()) {
				got[l["message"].(string)] = true
			}
			if got["d"] != tt.wantDebug || got["i"] != tt.wantInfo || got["w"] != tt.wantWarn {
				t.Fatalf("logged %v, want debug=%v info=%v warn=%v", got, tt.wantDebug, tt.wantInfo, tt.wantWarn)
			}
		})
	}
}

func TestHashUserID(t *testing.T) {
	a, b := HashUserID("U4af4980629"), HashUserID("U4af4980630")
	if a != HashUserID("U4af4980629") {
		t.Fatal("not stable")
	}
	if a == b {
		t.Fatal("different ids collide")
	}
	if !strings.HasPrefix(a, "u:") || len(a) != 14 || strings.Contains(a, "4af4980629") {
		t.Fatalf("HashUserID = %q, want u: + 12 hex", a)
	}
	if !isHex(a[2:], 12) {
		t.Fatalf("HashUserID = %q is not hex", a)
	}
	if HashUserID("") != "" {
		t.Fatal("empty id should stay empty")
	}
}

func TestEventID(t *testing.T) {
	if EventID(context.Background()) != "" {
		t.Fatal("EventID of empty ctx")
	}
	if got := EventID(WithEventID(context.Background(), "e1")); got != "e1" {
		t.Fatalf("EventID = %q", got)
	}
}

// In Lambda (LoggingConfig sets AWS_LAMBDA_LOG_FORMAT) records go through
// lambdacontext's handler: JSON with Lambda's keys, requestId once, and
// linegate's ids and redaction on top. lambdacontext reads the format at
// package init, as in Lambda, so the check runs in a child process started
// with the environment Lambda would give it.
func TestNewLambdaLogger(t *testing.T) {
	if os.Getenv("LINEGATE_LOGGER_CHILD") == "1" {
		log := NewLambdaLogger()
		ctx := lambdacontext.NewContext(WithEventID(context.Background(), "01EVT"), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
		log.InfoContext(ctx, "record processed", "replyToken", "secret-token-value")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNewLambdaLogger$", "-test.v=false")
	cmd.Env = append(os.Environ(), "LINEGATE_LOGGER_CHILD=1", "AWS_LAMBDA_LOG_FORMAT=JSON")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	line := bytes.SplitN(out, []byte("\n"), 2)[0]
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("not a JSON line: %q", out)
	}
	if m["message"] != "record processed" || m["requestId"] != "req-1" || m["webhookEventId"] != "01EVT" || m["replyToken"] != Redacted {
		t.Fatalf("record %v", m)
	}
	if bytes.Count(out, []byte("req-1")) != 1 || bytes.Contains(out, []byte("secret-token-value")) {
		t.Fatalf("requestId twice or the token leaked: %s", out)
	}
}
