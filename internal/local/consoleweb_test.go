package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/console"
)

// consolePost posts a console action (JSON, as the page does) and decodes
// the answer into out; it returns the status.
func consolePost(t *testing.T, rt *Runtime, path string, in, out any) int {
	t.Helper()
	return consolePostFrom(t, rt, rt.URL(), path, in, out)
}

// consolePostFrom is consolePost from a page of origin.
func consolePostFrom(t *testing.T, rt *Runtime, origin, path string, in, out any) int {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, rt.URL()+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type sendAnswer struct {
	Status         int    `json:"status"`
	WebhookEventID string `json:"webhookEventId"`
	Error          string `json:"error"`
}

func consoleSend(t *testing.T, rt *Runtime, user, text string) string {
	t.Helper()
	var a sendAnswer
	if st := consolePost(t, rt, "/_local/send", map[string]any{"chat": map[string]string{"userId": user}, "kind": "text", "text": text}, &a); st != 200 || a.Status != 200 {
		t.Fatalf("send %q: %d %+v", text, st, a)
	}
	return a.WebhookEventID
}

// The console's send goes the real way: a signed webhook through the
// webhook function, the bus, the chat queue, the worker; the transcript has
// the user's event, then the bot's reply, in the platform's order.
func TestConsoleSendGoesThroughTheWebhook(t *testing.T) {
	rt, _ := start(t, Config{})
	user := "U0000000000000000000000000000c0a1"
	id := consoleSend(t, rt, user, "hello console")
	waitMessage(t, rt, 10*time.Second, user, "reply", "hello console")
	waitEvent(t, rt, 10*time.Second, id, "ok", func(e eventView) bool { return e.Outcome == "ok" && e.Deliveries == 1 })
	var entries []console.Entry
	eventually(t, 5*time.Second, "the user's event and the bot's reply in the transcript", func() bool {
		getJSON(t, rt.URL()+"/_local/chat?chatId="+user, &entries)
		return len(entries) == 2
	})
	if entries[0].From != "user" || entries[0].WebhookEventID != id || entries[1].From != "bot" || entries[1].Kind != "reply" || entries[0].Seq >= entries[1].Seq {
		t.Fatalf("transcript %+v", entries)
	}
	// A send LINE would refuse to build is refused, and so is a page of
	// another origin.
	var a sendAnswer
	if st := consolePost(t, rt, "/_local/send", map[string]any{"chat": map[string]string{"userId": user}, "kind": "join"}, &a); st != 400 || !strings.Contains(a.Error, "group or a room") {
		t.Fatalf("join from a user: %d %+v", st, a)
	}
	if st := consolePostFrom(t, rt, "http://evil.example", "/_local/send", map[string]any{"chat": map[string]string{"userId": user}, "kind": "text", "text": "x"}, nil); st != http.StatusForbidden {
		t.Fatalf("a cross-origin send: %d, want 403", st)
	}
}

// An event opened in the console: its row has the chat and the latency,
// its timeline goes from the webhook to the LINE call, and its traces are
// the webhook's and the worker's, linked, under either tracing backend
// (`linegate local --tracing otel` shows the same waterfall).
func TestConsoleActivityDetail(t *testing.T) {
	eachBackend(t, testConsoleActivityDetail)
}

func testConsoleActivityDetail(t *testing.T, backend config.Backend) {
	rt, _ := start(t, Config{Tracing: backend})
	user := "U0000000000000000000000000000c0a2"
	id := consoleSend(t, rt, user, "detail me")
	waitMessage(t, rt, 10*time.Second, user, "reply", "detail me")
	var d activityDetail
	eventuallySaw(t, 10*time.Second, "every stage of the timeline and both traces", func() bool {
		getJSON(t, rt.URL()+"/_local/activity/"+id, &d)
		stages := map[string]bool{}
		for _, s := range d.Steps {
			stages[s.Stage] = true
		}
		return len(d.Traces) == 2 && stages["webhook"] && stages["bus"] && stages["queue"] && stages["receive"] && stages["handler"] && stages["line"]
	}, func() string { b, _ := json.MarshalIndent(d, "", " "); return string(b) })
	if d.Row.Chat != user || d.Row.SourceType != "user" || d.Row.LatencyMs <= 0 || d.Row.Outcome != "ok" {
		t.Fatalf("row %+v", d.Row)
	}
	linked := false
	for _, tr := range d.Traces {
		for _, l := range tr.Links {
			linked = linked || l.TraceID == d.Row.TraceID
		}
	}
	if !linked {
		t.Fatalf("no trace links to the webhook's %s: %+v", d.Row.TraceID, d.Traces)
	}
	var rows []activityRow
	getJSON(t, rt.URL()+"/_local/activity?limit=1", &rows)
	if len(rows) != 1 || rows[0].WebhookEventID != id {
		t.Fatalf("newest row %+v, want %s", rows, id)
	}
	resp, err := http.Get(rt.URL() + "/_local/activity/no-such-event")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("an unknown event: %d", resp.StatusCode)
	}
}

// Redrive from the console empties a DLQ back to the queue that dead-letters
// into it; replaying a handled event runs it through the replay rule again,
// where idempotency skips it (no second reply).
func TestConsoleRedriveAndReplay(t *testing.T) {
	rt, _ := start(t, Config{TimeScale: 60})
	user := "U0000000000000000000000000000c0a3"
	bad := consoleSend(t, rt, user, "probe:permanent")
	waitEvent(t, rt, 10*time.Second, bad, "dead-lettered", func(e eventView) bool { return e.Outcome == "dead-lettered" })
	eventually(t, 5*time.Second, "the DLQ holds it", func() bool { return getQueue(t, rt, "linegate-InteractiveDLQ.fifo").Visible == 1 })
	var r struct {
		Moved int    `json:"moved"`
		Error string `json:"error"`
	}
	if st := consolePost(t, rt, "/_local/redrive", map[string]string{"queue": "InteractiveDLQ"}, &r); st != 200 || r.Moved != 1 {
		t.Fatalf("redrive: %d %+v", st, r)
	}
	waitEvent(t, rt, 10*time.Second, bad, "received again after the redrive", func(e eventView) bool { return e.ReceiveCount >= 2 })
	if st := consolePost(t, rt, "/_local/redrive", map[string]string{"queue": "InteractiveQueue"}, &r); st != 400 {
		t.Fatalf("redrive of a queue that is no DLQ: %d %+v", st, r)
	}

	good := consoleSend(t, rt, user, "replay me")
	waitMessage(t, rt, 10*time.Second, user, "reply", "replay me")
	waitEvent(t, rt, 10*time.Second, good, "ok", func(e eventView) bool { return e.Outcome == "ok" })
	var rp struct {
		Targets []string `json:"targets"`
	}
	if st := consolePost(t, rt, "/_local/replay", map[string]string{"webhookEventId": good}, &rp); st != 200 || !slices.Equal(rp.Targets, []string{"ReplayQueue"}) {
		t.Fatalf("replay: %d %+v, want the replay rule's target", st, rp)
	}
	waitEvent(t, rt, 10*time.Second, good, "the replay received as a duplicate", func(e eventView) bool { return e.Duplicates == 1 && e.Outcome == "ok" })
	if n := len(sentMatching(t, rt, user, "", "replay me")); n != 1 {
		t.Fatalf("%d replies to the replayed event, want 1", n)
	}
	if st := consolePost(t, rt, "/_local/replay", map[string]string{"webhookEventId": "unknown"}, nil); st != 404 {
		t.Fatalf("replay of an unknown event: %d", st)
	}
}

// An expired reply token from the console's faults makes the bot push
// (with the retry key) instead; a 500 is retried; a crash restarts the
// pollers and the next message is answered.
func TestConsoleFaultsAndCrash(t *testing.T) {
	rt, _ := start(t, Config{})
	user := "U0000000000000000000000000000c0a4"
	if st := consolePost(t, rt, "/_local/line/faults", map[string]any{"fault": "expired-reply-token"}, nil); st != 200 {
		t.Fatalf("fault: %d", st)
	}
	consoleSend(t, rt, user, "after an expired token")
	if m := waitMessage(t, rt, 10*time.Second, user, "push", "after an expired token"); m.RetryKey == "" {
		t.Fatalf("the push has no retry key: %+v", m)
	}
	if st := consolePost(t, rt, "/_local/line/faults", map[string]any{"fault": "500", "times": 1}, nil); st != 200 {
		t.Fatalf("fault: %d", st)
	}
	consoleSend(t, rt, user, "after a 500")
	waitMessage(t, rt, 10*time.Second, user, "", "after a 500")
	if st := consolePost(t, rt, "/_local/line/faults", map[string]any{"fault": "teapot"}, nil); st != 400 {
		t.Fatalf("an unknown fault: %d", st)
	}
	if st := consolePost(t, rt, "/_local/workers/crash", map[string]any{}, nil); st != 200 {
		t.Fatalf("crash: %d", st)
	}
	// Another chat: the crash may have abandoned this chat's last record
	// before its delete, which holds the chat's message group until the
	// visibility timeout, as in Lambda.
	other := "U0000000000000000000000000000c0a6"
	consoleSend(t, rt, other, "after the crash")
	waitMessage(t, rt, 10*time.Second, other, "", "after the crash")
}

// The stream tells a page what changed: a send changes the chat and the
// events.
func TestConsoleStreamNotifiesChanges(t *testing.T) {
	rt, _ := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rt.URL()+"/_local/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	consoleSend(t, rt, "U0000000000000000000000000000c0a5", "notify me")
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended; saw %q", seen)
			}
			seen = append(seen, l)
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"chat"`) && strings.Contains(l, `"events"`) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no change naming chat and events; saw %q", seen)
		}
	}
}

// The pipeline the console draws is the template's: the webhook sends to
// the chat queue, the worker reads it, each DLQ names its source, and the
// DLQ alarms name their queue.
func TestConsolePipeline(t *testing.T) {
	rt, _ := start(t, Config{})
	var p pipelineView
	getJSON(t, rt.URL()+"/_local/pipeline", &p)
	roles := map[string]functionView{}
	for _, f := range p.Functions {
		roles[f.Role] = f
	}
	if !slices.Contains(roles["webhook"].Sends, "InteractiveQueue") || !slices.Contains(roles["worker"].Reads, "InteractiveQueue") ||
		!slices.Contains(roles["notifier"].Reads, "OpsQueue") {
		t.Fatalf("functions %+v", p.Functions)
	}
	source := map[string]string{}
	for _, q := range p.Queues {
		source[q.LogicalID] = q.Source
	}
	if source["InteractiveDLQ"] != "InteractiveQueue" || source["LongDLQ"] != "LongQueue" {
		t.Fatalf("queues %+v", p.Queues)
	}
	found := false
	for _, a := range p.Alarms {
		found = found || (a.Queue == "InteractiveDLQ" && strings.HasSuffix(a.Name, "-interactive-dlq"))
	}
	if !found || len(p.Operators) != 1 || p.Operators[0] != DefaultOperator {
		t.Fatalf("alarms %+v operators %v", p.Alarms, p.Operators)
	}
}

// The logs pane reads the functions' JSON logs, by event.
func TestConsoleLogsByEvent(t *testing.T) {
	rt, _ := start(t, Config{})
	user := "U0000000000000000000000000000c0a6"
	id := consoleSend(t, rt, user, "log me")
	waitMessage(t, rt, 10*time.Second, user, "reply", "log me")
	var lines []map[string]any
	eventuallySaw(t, 5*time.Second, "the worker's log line of "+id, func() bool {
		getJSON(t, rt.URL()+"/_local/logs?webhookEventId="+id, &lines)
		return len(lines) > 0
	}, func() string { return fmt.Sprint(lines) })
	for _, l := range lines {
		if l["webhookEventId"] != id {
			t.Fatalf("a line of another event: %v", l)
		}
		if strings.Contains(fmt.Sprint(l), "log me") {
			t.Fatalf("a log line carries the message text: %v", l)
		}
	}
}
