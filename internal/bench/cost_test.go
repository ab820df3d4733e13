package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/pkg/bot"
)

// docs/cost.md's table is the one the template's settings give: change a
// setting (the API's kind, a log level, the functions' memory, the alarms)
// and this fails until the table is regenerated (`linegate bench --cost`).
// The total is what the issue targets: at most $7 per million webhooks
// with X-Ray sampled.
func TestCostTableMatchesTheTemplate(t *testing.T) {
	c, err := CostFromTemplate("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := c.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- cost table: linegate bench --cost -->\n", "<!-- end of cost table -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/cost.md has no %q ... %q block", begin, end)
	}
	if got := s[i+len(begin) : j]; got != b.String() {
		t.Errorf("docs/cost.md's table is not the template's; regenerate it with `linegate bench --cost`:\n%s", b.String())
	}
	if c.Total > 7.00 {
		t.Errorf("per million webhooks: $%.2f, over the $7 target", c.Total)
	}
}

// byteCounter counts what the functions log, and the worker's record lines
// among it (slog writes a line in one Write).
type byteCounter struct {
	mu      sync.Mutex
	n       int
	records int
}

func (c *byteCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n += len(p)
	c.records += bytes.Count(p, []byte(`"record processed"`))
	c.mu.Unlock()
	return len(p), nil
}

func (c *byteCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func (c *byteCounter) recordLines() int { c.mu.Lock(); defer c.mu.Unlock(); return c.records }

// FunctionLogBytes, the cost table's log volume, is what the webhook and the
// worker log per event at the template's LOG_LEVEL (INFO), within 20%:
// measured by running linegate local and counting its functions' JSON logs
// and EMF lines for one-event webhooks answered one by one (linegate local
// names its functions and requests otherwise than Lambda does;
// TestFunctionLogBytesInLambda measures the deployed binaries to 5%).
func TestFunctionLogBytes(t *testing.T) {
	logs := &byteCounter{}
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", Logs: logs,
		Getenv: func(string) string { return "" }, Bot: func(config.Worker) *bot.Router { return testbot.New() }})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	lp := lineplatform.New(rt.WebhookURL(), []byte(local.DefaultSecret))
	const n = 30
	replies := func() int { return len(rt.LINE().Messages()) }
	before, beforeRecords := logs.count(), logs.recordLines()
	for i := range n {
		if d, err := lp.Deliver(context.Background(), lp.Text(userID(i), "hello there")); err != nil || !d.Delivered {
			t.Fatalf("delivery %d: %+v %v", i, d, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for replies() < i+1 { // one at a time: one record per invocation, a chat's pace
			if time.Now().After(deadline) {
				t.Fatalf("event %d not answered within 10 s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The worker writes a record's line after the reply: wait for the
	// last one (it carries the invocation's metrics, so nothing follows it).
	deadline := time.Now().Add(10 * time.Second)
	for logs.recordLines()-beforeRecords < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d record lines logged within 10 s, want %d", logs.recordLines()-beforeRecords, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	per := float64(logs.count()-before) / n
	t.Logf("%.0f bytes logged per event (FunctionLogBytes %d)", per, FunctionLogBytes)
	if per < 0.8*FunctionLogBytes || per > 1.2*FunctionLogBytes {
		t.Fatalf("%.0f bytes per event, FunctionLogBytes says %d: measure again and regenerate docs/cost.md", per, FunctionLogBytes)
	}
}
