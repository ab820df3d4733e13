package local

// A web page open in the developer's browser must not act on linegate
// local: every route the server registers is listed in routes below with
// what a page of another origin would send it and what a client that is no
// browser (an SDK, the CLI, curl, LINE) sends; the guard refuses the first
// everywhere but on the console's page and assets, and lets the second
// through. A route registered in the package's code but missing here fails
// TestEveryRouteIsClassified. crosssite_browser_test.go sends the same
// requests from a real chromium on another origin.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/linemock"
)

// request is one HTTP request of the route table.
type request struct {
	method, path, ctype, body string
	header                    map[string]string
}

// route is one pattern the server registers, as the package's source spells
// it (mux.Handle's first argument), and how the guard treats it.
type route struct {
	pattern string
	// public routes (the console's page and assets) hold no data: a link
	// on another site may open them, so a cross-site GET is served.
	public bool
	// attack is what a page of another origin would send (a request a
	// browser makes without a CORS preflight).
	attack request
	// plain is the route's use by a client that is no browser, and want
	// its status: the handler's answer, not the guard's.
	plain request
	want  int
}

// sigV4 is an Authorization header of the shape the SDKs send.
const sigV4 = "AWS4-HMAC-SHA256 Credential=local/20261201/us-east-1/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, " +
	"Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// routes is every route of the server. opsTopic and queueARN are real ARNs
// of the runtime, for the attacks the issue describes.
func routes(opsTopic, queueARN string) []route {
	form := "application/x-www-form-urlencoded"
	text := "text/plain"
	getOK := func(path string) request { return request{method: "GET", path: path} }
	return []route{
		{pattern: `"GET /{$}"`, public: true, attack: getOK("/"), plain: getOK("/"), want: 200},
		{pattern: `"GET " + console.AssetPrefix`, public: true, attack: getOK("/console/main.js"), plain: getOK("/console/main.js"), want: 200},
		{pattern: `"POST /{$}"`, // the AWS endpoint: SNS Subscribe and Publish as plain form posts
			attack: request{method: "POST", path: "/", ctype: form, body: "Action=Subscribe&TopicArn=" + opsTopic + "&Protocol=sqs&Endpoint=" + queueARN},
			plain: request{method: "POST", path: "/", ctype: "application/x-amz-json-1.0", body: `{"QueueName":"linegate-InteractiveDLQ.fifo"}`,
				header: map[string]string{"X-Amz-Target": "AmazonSQS.GetQueueUrl", "Authorization": sigV4, "X-Amz-Date": "20261201T000000Z"}}, want: 200},
		{pattern: `strings.ToUpper(a.Method) + " " + a.Path`, // the webhook, by the template's API event
			attack: request{method: "POST", path: "/webhook", ctype: text, body: `{"destination":"U1","events":[]}`},
			plain:  request{method: "POST", path: "/webhook", ctype: "application/json", body: `{"destination":"U1","events":[]}`}, want: 401},
		{pattern: `a.Path`, attack: getOK("/webhook"), plain: getOK("/webhook"), want: 405}, // other methods: the core answers 405
		{pattern: `"/_local/line/quota"`, attack: request{method: "POST", path: "/_local/line/quota", ctype: text, body: `{"limit":1,"used":1}`},
			plain: getOK("/_local/line/quota"), want: 200},
		{pattern: `"/_local/line/channel"`, attack: request{method: "POST", path: "/_local/line/channel", ctype: text, body: `{"endpoint":"","active":true,"redelivery":false}`},
			plain: getOK("/_local/line/channel"), want: 200},
		{pattern: `"/oauth2/"`, attack: request{method: "POST", path: linemock.PathTokenStateless, ctype: form, body: "grant_type=client_credentials&client_id=1&client_secret=s"},
			plain: request{method: "POST", path: linemock.PathTokenStateless, ctype: form, body: "grant_type=nope"}, want: 400},
		{pattern: `"/v2/bot/"`, attack: request{method: "POST", path: linemock.PathPush, ctype: text, body: `{"to":"Uanyone","messages":[{"type":"text","text":"hi"}]}`},
			plain: request{method: "GET", path: linemock.PathBotInfo, header: map[string]string{"Authorization": "Bearer " + DefaultToken}}, want: 200},
		{pattern: `"/_local/send"`, attack: request{method: "POST", path: "/_local/send", ctype: text, body: `{"chat":{"userId":"U1"},"kind":"text","text":"x"}`}, plain: getOK("/_local/send"), want: 405},
		{pattern: `"/_local/redrive"`, attack: request{method: "POST", path: "/_local/redrive", ctype: text, body: `{"queue":"InteractiveDLQ"}`}, plain: getOK("/_local/redrive"), want: 405},
		{pattern: `"/_local/replay"`, attack: request{method: "POST", path: "/_local/replay", ctype: text, body: `{"webhookEventId":"x"}`}, plain: getOK("/_local/replay"), want: 405},
		{pattern: `"/_local/workers/crash"`, attack: request{method: "POST", path: "/_local/workers/crash", ctype: text, body: `{}`}, plain: getOK("/_local/workers/crash"), want: 405},
		{pattern: `"/_local/line/faults"`, attack: request{method: "POST", path: "/_local/line/faults", ctype: text, body: `{"fault":"500","times":3}`}, plain: getOK("/_local/line/faults"), want: 405},
		{pattern: `"GET /_local/stream"`, attack: getOK("/_local/stream"), plain: getOK("/_local/stream"), want: 200},
		{pattern: `"GET /_local/chats"`, attack: getOK("/_local/chats"), plain: getOK("/_local/chats"), want: 200},
		{pattern: `"GET /_local/chat"`, attack: getOK("/_local/chat?chatId=U1"), plain: getOK("/_local/chat?chatId=U1"), want: 200},
		{pattern: `"GET /_local/logs"`, attack: getOK("/_local/logs"), plain: getOK("/_local/logs"), want: 200},
		{pattern: `"GET /_local/pipeline"`, attack: getOK("/_local/pipeline"), plain: getOK("/_local/pipeline"), want: 200},
		{pattern: `"GET /_local/activity"`, attack: getOK("/_local/activity"), plain: getOK("/_local/activity"), want: 200},
		{pattern: `"GET /_local/activity/{id}"`, attack: getOK("/_local/activity/nope"), plain: getOK("/_local/activity/nope"), want: 404},
		{pattern: `"GET /_local/events"`, attack: getOK("/_local/events"), plain: getOK("/_local/events"), want: 200},
		{pattern: `"GET /_local/alarms"`, attack: getOK("/_local/alarms"), plain: getOK("/_local/alarms"), want: 200},
		{pattern: `"GET /_local/queues"`, attack: getOK("/_local/queues"), plain: getOK("/_local/queues"), want: 200},
		{pattern: `"GET /_local/traces"`, attack: getOK("/_local/traces"), plain: getOK("/_local/traces"), want: 200},
		{pattern: `"GET /_local/line/messages"`, attack: getOK("/_local/line/messages"), plain: getOK("/_local/line/messages"), want: 200},
		{pattern: `"GET /_local/line/loading"`, attack: getOK("/_local/line/loading"), plain: getOK("/_local/line/loading"), want: 200},
		{pattern: `"GET /_local/topics"`, attack: getOK("/_local/topics"), plain: getOK("/_local/topics"), want: 200},
		{pattern: `"GET /_local/alerts"`, attack: getOK("/_local/alerts"), plain: getOK("/_local/alerts"), want: 200},
		{pattern: `"GET /_local/email"`, attack: getOK("/_local/email"), plain: getOK("/_local/email"), want: 200},
		{pattern: `"GET /_local/line/reads"`, attack: getOK("/_local/line/reads"), plain: getOK("/_local/line/reads"), want: 200},
		{pattern: `"POST /_local/metrics"`, // a forged data point would drive an alarm and page the operator
			attack: request{method: "POST", path: "/_local/metrics", ctype: text, body: `{"namespace":"AWS/Lambda","metricName":"Throttles","dimensions":{"FunctionName":"linegate-WebhookFunction"},"value":1}`},
			plain:  request{method: "POST", path: "/_local/metrics", ctype: "application/json", body: `{"namespace":"linegate","metricName":"Probe","value":1}`}, want: 200},
	}
}

// registeredPatterns is the first argument of every mux.Handle and
// mux.HandleFunc call in the package's code, as the source spells it: the
// routes the server serves (every route is registered on a *http.ServeMux
// named mux).
func registeredPatterns(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "mux" {
				seen[types.ExprString(call.Args[0])] = true
			}
			return true
		})
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestEveryRouteIsClassified fails when the server registers a route the
// cross-site table does not list: a new path must say what a page of
// another origin may do with it.
func TestEveryRouteIsClassified(t *testing.T) {
	registered := registeredPatterns(t)
	if len(registered) < 20 {
		t.Fatalf("found %d registered patterns (%v): the scan of the package's mux.Handle calls is broken", len(registered), registered)
	}
	var listed []string
	for _, r := range routes("", "") {
		listed = append(listed, r.pattern)
	}
	for _, p := range registered {
		if !slices.Contains(listed, p) {
			t.Errorf("the server registers %s, which crosssite_test.go's routes does not classify", p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(registered, p) {
			t.Errorf("routes lists %s, which the server no longer registers", p)
		}
	}
}

// refusedCrossOrigin is what the guard answers a page of another origin.
const refusedCrossOrigin = "refused: a request from a web page of another origin"

// do sends rq to rt with extra headers and returns the status and the
// start of the body (a stream is not read to its end).
func do(t *testing.T, rt *Runtime, rq request, extra map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(rq.method, rt.URL()+rq.path, strings.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 512)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	return resp.StatusCode, string(b[:n])
}

// Every route refuses a request a page of another origin makes, however the
// browser says so (Origin, Sec-Fetch-Site or both; another site, another
// port of the same host, an opaque origin), and serves the same path to a
// client that is no browser and to the console's own page.
func TestBrowserOriginsRefusedOnEveryRoute(t *testing.T) {
	rt, _ := start(t, Config{})
	ops, queue := rt.res.topicARN["OpsTopic"], rt.res.queueARN["InteractiveQueue"]
	if ops == "" || queue == "" {
		t.Fatalf("no OpsTopic or InteractiveQueue ARN in %+v", rt.res)
	}
	self := rt.URL()
	browsers := []struct {
		name    string
		headers map[string]string
	}{
		{"another site", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}},
		{"another port of this host", map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}},
		{"an opaque origin (sandboxed frame, file:)", map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}},
		{"Origin only (no fetch metadata)", map[string]string{"Origin": "http://evil.example"}},
		{"fetch metadata only (a cross-site GET)", map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for _, r := range routes(ops, queue) {
		t.Run(r.pattern, func(t *testing.T) {
			for _, b := range browsers {
				status, body := do(t, rt, r.attack, b.headers)
				refused := status == http.StatusForbidden && strings.Contains(body, refusedCrossOrigin)
				if refused == r.public {
					t.Errorf("%s %s from %s: %d %s; want refused=%v", r.attack.method, r.attack.path, b.name, status, body, !r.public)
				}
			}
			if status, body := do(t, rt, r.plain, nil); status != r.want {
				t.Errorf("%s %s from a client that is no browser: %d %s, want %d", r.plain.method, r.plain.path, status, body, r.want)
			}
			// The console's own page: same origin, as a browser says it.
			if status, body := do(t, rt, r.plain, map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}); status != r.want {
				t.Errorf("%s %s from the console's own page: %d %s, want %d", r.plain.method, r.plain.path, status, body, r.want)
			}
		})
	}
	// Nothing the attacks asked for happened: the quota and the channel are
	// as the runtime set them (the guard's own refusal text, checked above,
	// says the AWS endpoint never saw the Subscribe).
	if q := rt.LINE().CurrentQuota(); q.Used != 0 {
		t.Errorf("quota %+v after the attacks", q)
	}
	if c := rt.LINE().ChannelSettings(); !c.Redelivery || c.Endpoint == "" {
		t.Errorf("channel %+v after the attacks", c)
	}
}

// The AWS endpoint takes only SigV4-signed requests: the real SDK's pass;
// a request without the header, or with a header of another shape, is
// refused before it is read.
func TestAWSEndpointNeedsSigV4(t *testing.T) {
	rt, _ := start(t, Config{})
	c := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("defaultkey", "defaultsecret", "")})
	if _, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-InteractiveDLQ.fifo")}); err != nil {
		t.Fatalf("the SDK's signed call: %v", err)
	}
	anon := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()), Credentials: aws.AnonymousCredentials{}})
	if _, err := anon.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-InteractiveDLQ.fifo")}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("an unsigned SDK call: %v, want a 403", err)
	}
	for _, auth := range []string{"", "Bearer " + DefaultToken, "AWS4-HMAC-SHA256 Credential=local/20261201/us-east-1/sqs/aws4_request"} {
		status, body := do(t, rt, request{method: "POST", path: "/", ctype: "application/x-www-form-urlencoded", body: "Action=Publish&TopicArn=x&Message=m",
			header: map[string]string{"Authorization": auth}}, nil)
		if status != http.StatusForbidden || !strings.Contains(body, "Signature Version 4") {
			t.Errorf("Authorization %q: %d %s, want 403 naming Signature Version 4", auth, status, body)
		}
	}
}

// The shape of a SigV4 Authorization header (AWS's reference:
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-signing-elements.html).
func TestSigV4Shape(t *testing.T) {
	sig := strings.Repeat("0a", 32)
	tests := []struct {
		auth string
		want bool
	}{
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024", true},
		{"AWS4-HMAC-SHA256 Credential=k/20261201/ap-northeast-1/sqs/aws4_request,SignedHeaders=host,Signature=" + sig, true},
		{"", false},
		{"Bearer x", false},
		{"AWS4-HMAC-SHA256", false},
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host", false},                         // no signature
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig[:63], false},  // 63 digits
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig + "0", false}, // 65 digits
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + strings.ToUpper(sig), false},
		{"AWS4-HMAC-SHA256 Credential=k/2026121/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig, false}, // 7-digit date
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws3_request, SignedHeaders=host, Signature=" + sig, false},
		{"AWS4-HMAC-SHA256 Credential=/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig, false},        // no key id
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/aws4_request, SignedHeaders=host, Signature=" + sig, false},           // no service
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=x-amz-date, Signature=" + sig, false}, // host unsigned
		{"AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig + ", Extra=1", false},
		{"aws4-hmac-sha256 Credential=k/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + sig, false},
	}
	for _, tt := range tests {
		if got := sigV4Shaped(tt.auth); got != tt.want {
			t.Errorf("sigV4Shaped(%q) = %v, want %v", tt.auth, got, tt.want)
		}
	}
}

// The Origin and Sec-Fetch-Site pairs a browser sends, and whether the
// guard takes them for another origin than Host's.
func TestCrossOrigin(t *testing.T) {
	const host = "127.0.0.1:3000"
	tests := []struct {
		origin, site string
		want         bool
	}{
		{"", "", false}, // no browser
		{"http://127.0.0.1:3000", "same-origin", false}, // the console's page
		{"HTTP://127.0.0.1:3000", "", false},            // schemes are case-insensitive
		{"", "none", false},                             // an address typed in the bar
		{"", "same-origin", false},
		{"http://127.0.0.1:3001", "same-site", true}, // another dev server
		{"http://localhost:3000", "cross-site", true},
		{"http://127.0.0.1:3000.evil.example", "cross-site", true},
		{"http://127.0.0.1", "", true}, // another port
		{"null", "", true},
		{"", "cross-site", true},
		{"", "same-site", true},
		{"http://127.0.0.1:3000", "cross-site", true}, // a redirect chain through another site
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("POST", "http://"+host+"/", nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		if tt.site != "" {
			r.Header.Set("Sec-Fetch-Site", tt.site)
		}
		if got := crossOrigin(r) != ""; got != tt.want {
			t.Errorf("Origin %q Sec-Fetch-Site %q: cross-origin %v, want %v (%s)", tt.origin, tt.site, got, tt.want, crossOrigin(r))
		}
	}
}
