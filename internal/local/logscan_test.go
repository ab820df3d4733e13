package local

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/telemetry"
)

// A full run — echo, postback, a crash, a dead-lettered event, an alarm —
// with every log line, EMF line and console line captured, then scanned for
// values that must never be written: the channel secret, the access token,
// reply tokens, signatures, the text of users' messages, and raw user IDs.
func TestLogsNeverCarrySecrets(t *testing.T) {
	const secret = "planted-channel-secret-8f3a91"
	logs := &syncBuffer{}
	env := map[string]string{"LINE_CHANNEL_SECRET": secret}
	rt, _ := start(t, Config{TimeScale: 120, Logs: logs, Getenv: func(k string) string { return env[k] }})
	lp := lineplatform.New(rt.WebhookURL(), []byte(secret))
	user := "U7777777777777777777777777777777f"

	planted := map[string]string{"channel secret": secret, "access token": DefaultToken, "raw user id": user}
	texts := []string{"planted text alpha 5150", "planted text beta 8086"}
	var ids []string
	for i, text := range texts {
		ev := lp.Text(user, text)
		var head struct {
			ReplyToken string `json:"replyToken"`
		}
		_ = json.Unmarshal(ev, &head)
		planted["reply token "+text] = head.ReplyToken
		planted["message text "+text] = text
		planted["signature "+text] = signature.Sign([]byte(secret), lineplatform.Body(lp.Destination(), ev))
		ids = append(ids, deliver(t, lp, ev))
		_ = i
	}
	deliver(t, lp, lp.Postback(user, "planted-postback-data-42"))
	planted["postback data"] = "planted-postback-data-42"
	failID := deliver(t, lp, lp.Text(user, "probe:fail"))
	// The panic in a chat of its own: behind probe:fail in the same chat it
	// would wait for probe:fail's retries, and its crash card is sent on its
	// first receive only.
	const other = "U7777777777777777777777777777777e"
	planted["raw user id (panic)"] = other
	deliver(t, lp, lp.Text(other, "probe:panic"))

	eventually(t, 30*time.Second, "the run to finish", func() bool {
		e, _ := event(t, rt, failID)
		_, crash := findMessage(t, rt, DefaultOperator, "push", "[CRASH]")
		_, alarm := findMessage(t, rt, DefaultOperator, "push", "linegate-interactive-dlq")
		return e.Outcome == "dead-lettered" && crash && alarm
	})
	rt.Close()

	all := logs.String()
	if !strings.Contains(all, ids[0]) || !strings.Contains(all, `"traceId"`) || !strings.Contains(all, `"_aws"`) {
		t.Fatalf("the capture does not look like a full run's logs (no webhookEventId, traceId or EMF):\n%.2000s", all)
	}
	for what, v := range planted {
		if v != "" && strings.Contains(all, v) {
			i := strings.Index(all, v)
			t.Errorf("%s %q found in the logs: …%s…", what, v, all[max(0, i-200):min(len(all), i+100)])
		}
	}
	if !strings.Contains(all, telemetry.HashUserID(user)) && strings.Contains(all, "userId") {
		t.Error("a user id is logged, and not in its hashed form")
	}
	// Every JSON log line carries a trace id, and record lines their event id.
	for _, line := range strings.Split(all, "\n") {
		if !strings.HasPrefix(line, "{") || strings.Contains(line, `"_aws"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		// A key twice on one line is still valid JSON; decoders keep one.
		for _, k := range []string{"webhookEventId", "traceId"} {
			if n := strings.Count(line, `"`+k+`":`); n > 1 {
				t.Errorf("%s appears %d times on one log line: %s", k, n, line)
			}
		}
		if m["message"] == "record processed" || m["message"] == "record failed" {
			if m["traceId"] == nil || m["webhookEventId"] == nil {
				t.Errorf("record log line without traceId or webhookEventId: %s", line)
			}
		}
	}
}
