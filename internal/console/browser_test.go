package console_test

// The console in a real browser: Debian's chromium, driven by chromedp,
// against one `linegate local` (the example bot, pkg/app, as `make local`
// runs it) shared by every test of this file, each test in a chat of its
// own. Without chromium the tests skip loudly; in CI (CI set) they fail.
//
// CONSOLE_SCREENSHOTS=1 go test -run Browser ./internal/console rewrites
// the screenshots in docs/ (the README's); normal runs never touch them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/app"
	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/config"
)

// chromiumFlags are the flags the issue asks for; chromedp adds the remote
// debugging port, and the harness a fresh --user-data-dir and the size.
var chromiumFlags = []string{"headless", "no-sandbox", "disable-gpu", "no-first-run", "disable-background-networking",
	"disable-component-update", "disable-sync", "disable-quic"}

const (
	width, height = 1440, 900
	// timeScale compresses visibility timeouts, retry delays and alarm
	// periods: probe:fail reaches the DLQ and its alarm in about a second.
	timeScale = 60
	// waitFor bounds every wait of a step.
	waitFor = 30 * time.Second
)

// fixed is "the fix is deployed": from then on probe:fail is answered
// (README: fix the handler and deploy, then redrive).
var fixed atomic.Bool

// fixedReply is what the fixed handler answers probe:fail with.
const fixedReply = "Fixed in this deploy: probe:fail handled."

// exampleBot is pkg/app's bot as `linegate local` runs it, plus the fix the
// redrive test deploys.
func exampleBot(cfg config.Worker) *bot.Router {
	r := app.New(app.Config{Probes: cfg.Probes})
	r.Use(func(next bot.Handler) bot.Handler {
		return func(ctx context.Context, e *bot.Event) error {
			if text, ok := e.Text(); ok && fixed.Load() && strings.HasPrefix(text, "probe:fail") {
				return e.ReplyText(ctx, fixedReply)
			}
			return next(ctx, e)
		}
	})
	return r
}

// harness is the runtime and the browser the tests share.
type harness struct {
	rt      *local.Runtime
	browser context.Context
	close   func()
	err     error
}

var (
	once   sync.Once
	shared harness
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.close != nil {
		shared.close()
	}
	os.Exit(code)
}

// chromium is the browser's path: $CHROMIUM, else chromium on PATH.
func chromium() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
}

// start returns the shared runtime and browser, starting them the first
// time; it skips loudly without chromium (fails in CI).
func start(t *testing.T) *harness {
	t.Helper()
	path, err := chromium()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the console's browser tests need chromium in CI: %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: %v; the console's browser tests run in CI", err)
	}
	once.Do(func() { shared = launch(path) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return &shared
}

func launch(path string) harness {
	env := map[string]string{"PROBES_ENABLED": "true"}
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: timeScale,
		Getenv: func(k string) string { return env[k] }, Bot: exampleBot})
	if err != nil {
		return harness{err: fmt.Errorf("linegate local: %w", err)}
	}
	dir, err := os.MkdirTemp("", "console-chromium-")
	if err != nil {
		rt.Close()
		return harness{err: err}
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(dir), chromedp.WindowSize(width, height)}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, within a deadline, so a broken install fails
	// here rather than in the middle of a test.
	// (The first Run allocates the browser for the life of bctx: no deadline
	// on it, as chromedp asks; a dead install fails fast on its own.)
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		rt.Close()
		_ = os.RemoveAll(dir)
		return harness{err: fmt.Errorf("start chromium %s: %w", path, err)}
	}
	return harness{rt: rt, browser: bctx, close: func() {
		cancelBrowser()
		cancelAlloc()
		rt.Close()
		_ = os.RemoveAll(dir)
	}}
}

// page is one browser tab on the console.
type page struct {
	t   *testing.T
	ctx context.Context
	h   *harness
}

// open opens the console in a new tab, on chat (a user of the test's own).
func open(t *testing.T, chat string) *page {
	t.Helper()
	h := start(t)
	ctx, cancel := chromedp.NewContext(h.browser)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, h: h}
	// The tab lives as long as the context of its first Run: that one
	// takes no deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	p.run("open the console", chromedp.EmulateViewport(width, height, chromedp.EmulateScale(1)),
		chromedp.Navigate(h.rt.URL()+"/"))
	p.wait("the live stream", `document.querySelector('#live.on') !== null`, `document.body.innerText`)
	if chat != "" {
		eval[bool](p, fmt.Sprintf(`(() => { const s = document.querySelector('[data-testid=chat-target]');
			if (![...s.options].some(o => o.value === %[1]q)) s.append(new Option(%[1]q, %[1]q));
			s.value = %[1]q; s.dispatchEvent(new Event('change')); return true })()`, chat))
		p.wait("the chat "+chat+" selected", fmt.Sprintf(`document.querySelector('[data-testid=chat-target]').value === %q`, chat), `document.querySelector('#chat').innerText`)
	}
	return p
}

func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\npage showed:\n%s", what, err, p.dump(`document.body.innerText`))
	}
}

// eval is the value of a JS expression, as T.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v\npage showed:\n%s", firstLine(js), err, p.dump(`document.body.innerText`))
	}
	return v
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// dump evaluates js (a string expression) for a failure message; it never
// fails the test itself.
func (p *page) dump(js string) string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		return "(could not read the page: " + err.Error() + ")"
	}
	if len(s) > 6000 {
		s = s[:6000] + "…"
	}
	return s
}

// wait polls the JS condition until it is true; after waitFor it fails
// with what dump (a JS string expression) shows of the page.
func (p *page) wait(what, cond, dump string) {
	p.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out after %v waiting for %s (last error: %v); the page showed:\n%s", waitFor, what, err, p.dump(dump))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// typeText types text into the chat box and presses Enter.
func (p *page) typeText(text string) {
	p.t.Helper()
	p.run("type "+text, chromedp.Click(chromedp.CSS(`[data-testid=chat-input]`)), chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), text+"\r"))
}

// clickJS clicks the element a JS expression finds, failing with dump when
// there is none.
func (p *page) clickJS(what, find, dump string) {
	p.t.Helper()
	p.wait(what, find+` !== null`, dump)
	if !eval[bool](p, `(() => { const el = `+find+`; if (!el) return false; el.scrollIntoView({block: 'center'}); el.click(); return true })()`) {
		p.t.Fatalf("%s: gone before the click; the page showed:\n%s", what, p.dump(dump))
	}
}

// screenshot writes docs/name (only with CONSOLE_SCREENSHOTS set), a
// viewport PNG at the best compression.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("CONSOLE_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, waitFor)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		p.t.Fatal(err)
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, img); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("wrote %s (%d KB)", path, b.Len()/1024)
}

// user is a chat user of the test's own, so tests sharing the runtime do
// not see each other's messages.
func user(tag string) string {
	return "U" + fmt.Sprintf("%032x", []byte(tag))[:32]
}

const chatDump = `document.querySelector('#chat').innerText`

// botSays is a JS condition: a bot bubble whose text contains s.
func botSays(s string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#chat [data-testid=chat-message][data-from=bot]')].some(m => m.innerText.includes(%q))`, s)
}

func userSays(s string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#chat [data-testid=chat-message][data-from=user]')].some(m => m.innerText.includes(%q))`, s)
}

// Send "hello" from the chat box: the user's bubble, then the bot's echo.
func TestBrowserChatEchoesHello(t *testing.T) {
	p := open(t, user("hello"))
	p.typeText("hello")
	p.wait("the user's bubble", userSays("hello"), chatDump)
	p.wait("the echo bubble from the bot", botSays("hello"), chatDump)
}

// Long work ("slow report", bot.Long, 5 s) shows the loading animation
// while it runs; the answer replaces it.
func TestBrowserLoadingAnimationWhileLongWorkRuns(t *testing.T) {
	p := open(t, user("slow"))
	p.typeText("slow report")
	p.wait("the loading animation", `document.querySelector('#chat [data-testid=loading]') !== null`, chatDump)
	p.wait("the long work's answer", botSays("Done with report"), chatDump)
	p.wait("the loading animation gone", `document.querySelector('#chat [data-testid=loading]') === null`, chatDump)
}

// "menu" answers with a Flex carousel rendered as LINE renders it; tapping
// a card's Order button sends its postback (the bubble shows its display
// text) and the bot's answer to the postback arrives.
func TestBrowserFlexButtonSendsItsPostback(t *testing.T) {
	p := open(t, user("flex"))
	p.typeText("menu")
	p.wait("three Flex bubbles", `document.querySelectorAll('#chat [data-testid=flex-bubble]').length >= 3`, chatDump)
	type bubbleLayout struct {
		Rows, Buttons int
		Header        string
	}
	layout := eval[bubbleLayout](p, `(() => { const b = document.querySelector('#chat [data-testid=flex-bubble]');
		return {Rows: b.querySelectorAll('.layout-baseline').length, Buttons: b.querySelectorAll('button.flex-button').length,
			Header: getComputedStyle(b.querySelector('.flex-header > .flex-box')).backgroundColor} })()`)
	if layout.Rows != 1 || layout.Buttons != 2 || layout.Header != "rgb(111, 78, 55)" {
		t.Fatalf("the first bubble has %d baseline rows, %d buttons, header %q; want 1, 2 and the card's #6F4E37", layout.Rows, layout.Buttons, layout.Header)
	}
	p.clickJS("the Order button of the first card",
		`[...document.querySelector('#chat [data-testid=flex-bubble]').querySelectorAll('button')].find(b => b.innerText === 'Order')`, chatDump)
	p.wait("the display text as the user's bubble", userSays("Coffee, please"), chatDump)
	p.wait("the bot's answer to the postback", botSays("One coffee coming up!"), chatDump)
	p.screenshot("console-flex.png")
}

// A text a user sends and the bot echoes renders as text: no element is
// made of it and no script runs. The same for every string a message can
// carry (below).
func TestBrowserEscapesWhatMessagesCarry(t *testing.T) {
	p := open(t, user("xss"))
	hostile := `<img src=x onerror="window.__xss=1">`
	p.typeText(hostile)
	p.wait("the echo, as text", botSays(hostile), chatDump)
	type escaped struct {
		Images int
		XSS    bool
	}
	got := eval[escaped](p, `({Images: document.querySelectorAll('#chat img').length, XSS: window.__xss === 1})`)
	if got.Images != 0 || got.XSS {
		t.Fatalf("the message made %d <img> element(s), script ran: %v", got.Images, got.XSS)
	}
}

// push sends messages to chat through the local Messaging API, as a bot
// would, with the local channel's token.
func push(t *testing.T, h *harness, to string, messages ...string) {
	t.Helper()
	body := fmt.Sprintf(`{"to":%q,"messages":[%s]}`, to, strings.Join(messages, ","))
	req, _ := http.NewRequest(http.MethodPost, h.rt.URL()+"/v2/bot/message/push", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+local.DefaultToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("push: %d %v", resp.StatusCode, e)
	}
}

// Every kind of message a bot sends renders as LINE shows it: text with a
// LINE emoji, a sticker, an image, a location, a buttons template, a
// confirm template, a Flex bubble with a horizontal box and a separator,
// and quick replies. Hostile strings in any of them stay text, and a
// javascript: link is never a link.
func TestBrowserRendersEveryKindOfMessage(t *testing.T) {
	to := user("gallery")
	p := open(t, to)
	push(t, p.h, to,
		`{"type":"text","text":"$ hi <b>bold</b>","emojis":[{"index":0,"productId":"5ac1bfd5040ab15980c9b435","emojiId":"001"}]}`,
		`{"type":"sticker","packageId":"446","stickerId":"1988"}`,
		`{"type":"image","originalContentUrl":"https://example.com/a.jpg","previewImageUrl":"https://example.com/a.jpg"}`,
		`{"type":"location","title":"<script>alert(1)</script>","address":"Shibuya","latitude":35.65,"longitude":139.70}`,
		`{"type":"template","altText":"t","template":{"type":"buttons","title":"<i>Title</i>","text":"Pick one","actions":[{"type":"postback","label":"A","data":"a"},{"type":"uri","label":"Bad","uri":"javascript:alert(1)"}]}}`)
	push(t, p.h, to,
		`{"type":"template","altText":"c","template":{"type":"confirm","text":"Sure?","actions":[{"type":"message","label":"Yes","text":"yes"},{"type":"message","label":"No","text":"no"}]}}`,
		`{"type":"flex","altText":"f","contents":{"type":"bubble","body":{"type":"box","layout":"horizontal","spacing":"md","contents":[{"type":"text","text":"<svg onload=alert(1)>","flex":2,"color":"#FF0000"},{"type":"separator"},{"type":"text","text":"right","flex":1,"align":"end","weight":"bold"}]}},
		 "quickReply":{"items":[{"type":"action","action":{"type":"message","label":"Q1","text":"q1"}},{"type":"action","action":{"type":"postback","label":"Q2","data":"q2","displayText":"Q2!"}}]}}`)
	p.wait("all seven messages", `document.querySelectorAll('#chat [data-testid=chat-message][data-from=bot]').length >= 7`, chatDump)
	type rendered struct {
		Emoji, Sticker, Image, Location, Templates, Flex, Separator, QuickReplies, Scripts, Links, Bold, Svg int
		FlexColor, FlexWeight                                                                             string
	}
	got := eval[rendered](p, `(() => { const c = document.querySelector('#chat'); const q = s => c.querySelectorAll(s).length;
		const t = c.querySelector('[data-testid=flex-bubble] .flex-text');
		const r = c.querySelectorAll('[data-testid=flex-bubble] .flex-text')[1];
		return {Emoji: q('.line-emoji'), Sticker: q('.sticker'), Image: q('.placeholder-image'), Location: q('.location'),
			Templates: q('[data-testid=template]'), Flex: q('[data-testid=flex-bubble] .layout-horizontal'), Separator: q('.flex-separator'),
			QuickReplies: document.querySelectorAll('[data-testid=quick-reply] button').length, Scripts: q('script'), Links: q('a'),
			Bold: q('b'), Svg: q('svg'), FlexColor: getComputedStyle(t).color, FlexWeight: getComputedStyle(r).fontWeight} })()`)
	if got.Emoji != 1 || got.Sticker != 1 || got.Image != 1 || got.Location != 1 || got.Templates != 2 || got.Flex != 1 || got.Separator != 1 || got.QuickReplies != 2 {
		t.Fatalf("rendered %+v; want one of each, two templates and two quick replies\n%s", got, p.dump(chatDump))
	}
	if got.Scripts+got.Links+got.Bold+got.Svg != 0 {
		t.Fatalf("message strings became markup: %+v", got)
	}
	if got.FlexColor != "rgb(255, 0, 0)" || got.FlexWeight != "700" {
		t.Fatalf("Flex text styles: color %s weight %s; want rgb(255, 0, 0) and 700", got.FlexColor, got.FlexWeight)
	}
	p.wait("the hostile strings shown as text", `document.querySelector('#chat').innerText.includes('<svg onload=alert(1)>') && document.querySelector('#chat').innerText.includes('<script>alert(1)</script>')`, chatDump)
	// A quick reply sends its message, and the quick replies go away.
	p.clickJS("the quick reply Q1", `[...document.querySelectorAll('[data-testid=quick-reply] button')].find(b => b.innerText === 'Q1')`, chatDump)
	p.wait("the quick reply's message and its echo", userSays("q1")+" && "+botSays("q1"), chatDump)
}

// The failure path of the README, clicked: probe:fail fails every receive,
// the interactive DLQ's count rises, its alarm turns ALARM, a red card
// reaches the operator's phone; the fix is deployed, Redrive on the card
// empties the DLQ, and the card turns green: the alarm's OK card arrives
// (data-state OK, green) and the red card is marked resolved
// (data-resolved true, its header green).
func TestBrowserProbeFailToRedriveTurnsTheCardGreen(t *testing.T) {
	fixed.Store(false)
	t.Cleanup(func() { fixed.Store(false) })
	h := start(t)
	dlq, alarm := "InteractiveDLQ", ""
	for _, a := range h.rt.Topology().Alarms {
		for _, q := range h.rt.Topology().Queues {
			if q.LogicalID == dlq && a.Dimensions["QueueName"] == q.Name && a.MetricName == "ApproximateNumberOfMessagesVisible" {
				alarm = a.Name
			}
		}
	}
	if alarm == "" {
		t.Fatal("the template has no alarm on InteractiveDLQ's depth")
	}
	p := open(t, user("dlq"))
	pipeline := `document.querySelector('#tab-pipeline').innerText + '\n---\n' + document.querySelector('#phone').innerText`
	p.typeText("menu") // the README's screenshot: a Flex card in the chat too
	p.wait("the menu", `document.querySelectorAll('#chat [data-testid=flex-bubble]').length >= 3`, chatDump)
	p.typeText("probe:fail")
	row := fmt.Sprintf(`document.querySelector('[data-testid=queue-row][data-queue=%q]')`, dlq)
	p.wait("the DLQ's count to rise", row+` && Number(`+row+`.dataset.visible) >= 1`, pipeline)
	p.wait("the alarm to turn ALARM", fmt.Sprintf(`document.querySelector('[data-testid=alarm][data-alarm=%q]')?.dataset.state === 'ALARM'`, alarm), pipeline)
	red := fmt.Sprintf(`document.querySelector('#phone [data-testid=operator-card][data-alarm=%q][data-state=ALARM]')`, alarm)
	p.wait("a red card on the operator's phone", red+` !== null && getComputedStyle(`+red+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(217, 48, 37)'`, pipeline)
	p.screenshot("console.png")

	fixed.Store(true) // deploy the fix, then redrive
	p.clickJS("the card's Redrive button", red+`?.querySelector('[data-testid=redrive-button][data-queue=InteractiveDLQ]')`, pipeline)
	p.wait("the DLQ to empty", row+` && `+row+`.dataset.visible === '0'`, pipeline)
	p.wait("the operator's tap answered", `document.querySelector('#phone').innerText.includes('Redrive of')`, pipeline)
	p.wait("the alarm to turn OK", fmt.Sprintf(`document.querySelector('[data-testid=alarm][data-alarm=%q]')?.dataset.state === 'OK'`, alarm), pipeline)
	green := fmt.Sprintf(`document.querySelector('#phone [data-testid=operator-card][data-alarm=%q][data-state=OK]')`, alarm)
	p.wait("a green OK card", green+` !== null && getComputedStyle(`+green+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(30, 142, 62)'`, pipeline)
	p.wait("the red card turned green", red+`?.dataset.resolved === 'true' && getComputedStyle(`+red+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(30, 142, 62)'`, pipeline)
	p.wait("the redriven event answered by the fixed handler", botSays(fixedReply), chatDump)
}

// Opening an event shows its timeline and its X-Ray traces as a waterfall:
// the webhook's trace and the worker's, linked.
func TestBrowserEventShowsItsTraceWaterfall(t *testing.T) {
	p := open(t, user("trace"))
	p.typeText("trace me")
	p.wait("the echo", botSays("trace me"), chatDump)
	id := eval[string](p, `document.querySelector('#chat [data-testid=chat-message][data-from=user]').dataset.eventId`)
	p.clickJS("the Events tab", `document.querySelector('[role=tab][data-tab=events]')`, `document.body.innerText`)
	events := `document.querySelector('#tab-events').innerText`
	p.clickJS("the event's row", fmt.Sprintf(`document.querySelector('[data-testid=event-row][data-event-id=%q]')`, id), events)
	wf := `document.querySelector('[data-testid=trace-waterfall]')`
	p.wait("the waterfall with the webhook's trace and the linked worker trace",
		wf+` && `+wf+`.querySelectorAll('.wf-trace').length >= 2 && `+wf+`.querySelector('[data-testid=trace-link]') !== null && `+
			wf+`.querySelector('.wf-row.mine') !== null && [...`+wf+`.querySelectorAll('.wf-row.remote')].some(r => r.innerText.includes('/v2/bot/message/reply'))`, events)
	p.wait("the timeline from the webhook to the LINE call", `['webhook','bus','queue','receive','handler','line'].every(s => document.querySelector('[data-testid=timeline] [data-stage='+s+']'))`, events)
	linked := eval[string](p, wf+`.querySelector('[data-testid=trace-link]').dataset.linkedTrace`)
	webhookTrace := eval[string](p, wf+`.querySelector('.wf-trace').dataset.traceId`)
	if linked != webhookTrace {
		t.Fatalf("the worker trace links to %s; the webhook's trace is %s", linked, webhookTrace)
	}
	eval[bool](p, `(() => { document.querySelector('[data-testid=trace-waterfall]').scrollIntoView({block: 'end'}); return true })()`)
	p.screenshot("console-trace.png")
}
