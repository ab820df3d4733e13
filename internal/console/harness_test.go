package console_test

// The shared runtime and browser of the browser tests (browser_test.go),
// and the page helpers: every wait has a deadline and fails with what the
// page showed.

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/bot"
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

// fixed is "the fix is deployed": from then on probe:fail and probe:panic
// are answered (docs/local.md step 7: fix both probes, then redrive).
var fixed atomic.Bool

// fixedReply is what the fixed handlers answer the probes with.
const fixedReply = "Fixed in this deploy: probe handled."

// exampleBot is internal/app's bot as `linegate local` runs it, plus the fix the
// redrive test deploys.
func exampleBot(cfg config.Worker) *bot.Router {
	r := app.NewWith(app.Config{Probes: cfg.Probes})
	r.Use(func(next bot.Handler) bot.Handler {
		return func(ctx context.Context, e *bot.Event) error {
			if text, ok := e.Text(); ok && fixed.Load() && (strings.HasPrefix(text, "probe:fail") || strings.HasPrefix(text, "probe:panic")) {
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

// shared holds one runtime and browser per tracing backend, started by the
// first test that needs it.
var (
	sharedMu sync.Mutex
	shared   = map[config.Backend]*harness{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, h := range shared {
		if h.close != nil {
			h.close()
		}
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

// start returns the shared runtime (tracing with the X-Ray SDK) and
// browser, starting them the first time; it skips loudly without chromium
// (fails in CI).
func start(t *testing.T) *harness {
	t.Helper()
	return startWith(t, config.TracingXRay)
}

// startWith is start for a runtime tracing with backend (`linegate local
// --tracing`).
func startWith(t *testing.T, backend config.Backend) *harness {
	t.Helper()
	path, err := chromium()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the console's browser tests need chromium in CI: %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: %v; the console's browser tests run in CI", err)
	}
	sharedMu.Lock()
	h, ok := shared[backend]
	if !ok {
		l := launch(path, backend)
		h = &l
		shared[backend] = h
	}
	sharedMu.Unlock()
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h
}

func launch(path string, backend config.Backend) harness {
	env := map[string]string{"PROBES_ENABLED": "true"}
	rt, err := local.Start(context.Background(), local.Config{Template: "../../template.yaml", Addr: "127.0.0.1:0", TimeScale: timeScale,
		Getenv: func(k string) string { return env[k] }, Bot: exampleBot, Tracing: backend})
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
	return openOn(t, start(t), chat)
}

// openOn is open on the console of h.
func openOn(t *testing.T, h *harness, chat string) *page {
	t.Helper()
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
