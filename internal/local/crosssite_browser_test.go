package local

// The cross-site table (crosssite_test.go) from a real browser: headless
// chromium opens a page of another origin — another site (localhost while
// linegate local is 127.0.0.1) and another port of the same host — and
// that page sends each route's attack the way a web page can without a
// CORS preflight (fetch with mode no-cors: the simple requests a form can
// make too), a real form post of SNS Subscribe, and a JSON SQS call whose
// headers need a preflight. The DevTools protocol reports the status each
// response had (the page itself cannot read it), and the runtime's state
// shows nothing happened. Without chromium the test skips loudly; in CI (CI
// set) it fails.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumFlags are the flags of the console's browser tests; the harness
// adds a fresh --user-data-dir.
var chromiumFlags = []string{"headless", "no-sandbox", "disable-gpu", "no-first-run", "disable-background-networking",
	"disable-component-update", "disable-sync", "disable-quic"}

// browserWait bounds each wait of the browser test.
const browserWait = 30 * time.Second

// chromium starts a headless chromium for t, or skips loudly without one
// (fails in CI).
func chromium(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path == "" {
			path, _ = exec.LookPath(name)
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("the cross-site browser test needs chromium in CI (Debian: apt-get install -y chromium)")
		}
		t.Skip("SKIPPED LOUDLY: chromium is not installed (Debian: apt-get install -y chromium); the cross-site browser test runs in CI")
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir())}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// The first Run allocates the browser for the life of bctx: no deadline
	// on it, as chromedp asks; a broken install fails here.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return bctx
}

// answers records, by URL, the status of every response the tab received
// and the error of every request that failed.
type answers struct {
	mu     sync.Mutex
	status map[string]int64
	failed map[string]string
	ids    map[network.RequestID]string
}

func (a *answers) listen(ev any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		a.ids[e.RequestID] = e.Request.URL
	case *network.EventResponseReceived:
		a.status[e.Response.URL] = e.Response.Status
	case *network.EventLoadingFailed:
		if u, ok := a.ids[e.RequestID]; ok {
			a.failed[u] = e.ErrorText
		}
	}
}

// waitStatus waits for the response to u and returns its status.
func (a *answers) waitStatus(t *testing.T, u string) int64 {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		a.mu.Lock()
		st, ok := a.status[u]
		why := a.failed[u]
		a.mu.Unlock()
		switch {
		case ok:
			return st
		case why != "":
			t.Fatalf("%s: the request failed in the browser (%s) instead of being answered", u, why)
		case time.Now().After(deadline):
			t.Fatalf("no response to %s within %v", u, browserWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// evalIn evaluates js (a promise) in the tab and returns its value.
func evalIn(t *testing.T, tab context.Context, what, js string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// jsJSON is v as a JavaScript literal.
func jsJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func navigate(t *testing.T, tab context.Context, u string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
}

func TestCrossSiteRequestsFromChromiumAreRefused(t *testing.T) {
	browser := chromium(t)
	rt, _ := start(t, Config{})
	ops, queue := rt.res.topicARN["OpsTopic"], rt.res.queueARN["InteractiveQueue"]
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>another site</title><p>a page open in the same browser</p>`)
	}))
	t.Cleanup(attacker.Close)
	_, port, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	target := rt.URL() // http://127.0.0.1:PORT
	dlqBefore := getQueue(t, rt, "linegate-InteractiveDLQ.fifo")
	quotaBefore, channelBefore, messagesBefore := rt.LINE().CurrentQuota(), rt.LINE().ChannelSettings(), len(rt.LINE().Messages())

	n := 0
	for _, origin := range []struct{ name, url string }{
		{"another site", "http://localhost:" + port + "/"},
		{"another port of this host", "http://127.0.0.1:" + port + "/"},
	} {
		t.Run(origin.name, func(t *testing.T) {
			tab, cancel := chromedp.NewContext(browser)
			t.Cleanup(cancel)
			a := &answers{status: map[string]int64{}, failed: map[string]string{}, ids: map[network.RequestID]string{}}
			if err := chromedp.Listen(tab, a.listen); err != nil {
				t.Fatal(err)
			}
			navigate(t, tab, origin.url)
			for _, r := range routes(ops, queue) {
				n++
				u := target + r.attack.path
				if strings.Contains(u, "?") {
					u += "&xs=" + strconv.Itoa(n)
				} else {
					u += "?xs=" + strconv.Itoa(n)
				}
				init := map[string]any{"method": r.attack.method, "mode": "no-cors", "credentials": "include"}
				if r.attack.method == "POST" {
					init["headers"] = map[string]string{"Content-Type": r.attack.ctype}
					init["body"] = r.attack.body
				}
				js := fmt.Sprintf(`fetch(%q, %s).then(() => 'answered', e => 'failed: ' + e)`, u, jsJSON(init))
				if got := evalIn(t, tab, r.pattern, js); got != "answered" {
					t.Fatalf("%s: the page's fetch %s", r.pattern, got)
				}
				st := a.waitStatus(t, u)
				if r.public != (st != http.StatusForbidden) {
					t.Errorf("%s %s from %s: %d; want %s", r.attack.method, r.attack.path, origin.name, st, map[bool]string{true: "served (public)", false: "403"}[r.public])
				}
			}

			// A JSON SQS call needs headers a page cannot send without a
			// preflight; the preflight is refused, so the call never goes.
			n++
			send := target + "/?xs=" + strconv.Itoa(n)
			got := evalIn(t, tab, "the SendMessage fetch", fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-amz-json-1.0',
				'X-Amz-Target': 'AmazonSQS.SendMessage'}, body: %q}).then(r => 'answered ' + r.status, e => 'failed: ' + e)`, send,
				fmt.Sprintf(`{"QueueUrl":%q,"MessageBody":"forged","MessageGroupId":"g","MessageDeduplicationId":"d%d"}`,
					rt.res.queueURL["InteractiveDLQ"], n)))
			if !strings.HasPrefix(got, "failed: ") {
				t.Errorf("the SendMessage fetch with X-Amz-Target: %s; want the browser to refuse it after the preflight", got)
			}

			// SNS Subscribe as a real form post: the browser navigates to
			// the answer, which is the guard's refusal.
			n++
			sub := target + "/?xs=" + strconv.Itoa(n)
			evalIn(t, tab, "the Subscribe form", fmt.Sprintf(`new Promise(ok => { const f = document.createElement('form');
				f.method = 'POST'; f.action = %q;
				for (const [k, v] of %s) { const i = document.createElement('input'); i.name = k; i.value = v; f.append(i); }
				document.body.append(f); f.submit(); ok('submitted'); })`, sub,
				jsJSON([][2]string{{"Action", "Subscribe"}, {"TopicArn", ops}, {"Protocol", "sqs"}, {"Endpoint", queue}})))
			if st := a.waitStatus(t, sub); st != http.StatusForbidden {
				t.Errorf("the Subscribe form post: %d, want 403", st)
			}
		})
	}

	// Nothing any attack asked for happened.
	if q := getQueue(t, rt, "linegate-InteractiveDLQ.fifo"); q.Visible != dlqBefore.Visible {
		t.Errorf("InteractiveDLQ holds %d, held %d before the attacks", q.Visible, dlqBefore.Visible)
	}
	if q := rt.LINE().CurrentQuota(); q != quotaBefore {
		t.Errorf("quota %+v, was %+v", q, quotaBefore)
	}
	if c := rt.LINE().ChannelSettings(); c != channelBefore {
		t.Errorf("channel %+v, was %+v", c, channelBefore)
	}
	if m := len(rt.LINE().Messages()); m != messagesBefore {
		t.Errorf("%d messages sent through the local LINE API, %d before the attacks", m, messagesBefore)
	}
	// And the same endpoint still serves the SDK.
	c := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()), Credentials: aws.CredentialsProviderFunc(
		func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		})})
	if _, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-InteractiveDLQ.fifo")}); err != nil {
		t.Errorf("the SDK after the attacks: %v", err)
	}
}
