package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/internal/testio"
	"github.com/linegate/linegate/pkg/bot"
)

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:3000", true},
		{"127.0.0.2:3000", true},
		{"[::1]:3000", true},
		{"localhost:3000", true},
		{"0.0.0.0:3000", false},
		{"[::]:3000", false},
		{":3000", false}, // every interface
		{"192.168.1.10:3000", false},
	}
	for _, tt := range tests {
		got, err := isLoopback(tt.addr)
		if err != nil || got != tt.want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", tt.addr, got, err, tt.want)
		}
	}
}

// Beyond loopback linegate local refuses to start unless told, and says how.
func TestRemoteNeedsAllowRemote(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		_, err := Start(context.Background(), Config{Template: testTemplate, Addr: addr, Bot: start0Bot, Getenv: func(string) string { return "" }})
		if !errors.Is(err, ErrRemoteNotAllowed) || !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("Start on %s: %v, want ErrRemoteNotAllowed naming --allow-remote", addr, err)
		}
	}
}

// A port taken by another process gets an error that suggests --addr.
func TestAddressInUseSuggestsAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(context.Background(), Config{Template: testTemplate, Addr: ln.Addr().String(), Bot: start0Bot, Getenv: func(string) string { return "" }})
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("Start on a taken port: %v, want ErrAddrInUse suggesting --addr", err)
	}
}

// With --allow-remote every path but the webhook's needs the token: the
// inspect endpoints, the SQS endpoint and the LINE API mock. The webhook
// stays open (the signature protects it), and the local functions reach the
// LINE API mock with the token as their access token.
func TestRemoteNeedsTheToken(t *testing.T) {
	rt, lp := start(t, Config{Addr: "0.0.0.0:0", AllowRemote: true})
	tok := rt.Token()
	if len(tok) < 32 || !rt.Remote() {
		t.Fatalf("token %q remote %v: want a generated token on a remote listener", tok, rt.Remote())
	}
	get := func(path string, header ...string) int {
		req, _ := http.NewRequest(http.MethodGet, rt.URL()+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name   string
		path   string
		header []string
		want   int
	}{
		{"events without the token", "/_local/events", nil, 401},
		{"events with a wrong token", "/_local/events", []string{"Authorization", "Bearer nope"}, 401},
		{"events with the bearer token", "/_local/events", []string{"Authorization", "Bearer " + tok}, 200},
		{"events with X-Linegate-Token", "/_local/events", []string{"X-Linegate-Token", tok}, 200},
		{"events with ?token=", "/_local/events?token=" + tok, nil, 200},
		{"traces without the token", "/_local/traces", nil, 401},
		{"LINE API mock with the well-known local token", linemock.PathBotInfo, []string{"Authorization", "Bearer " + DefaultToken}, 401},
		{"LINE API mock with the token", linemock.PathBotInfo, []string{"Authorization", "Bearer " + tok}, 200},
		// The console's page and scripts hold no data; everything they read
		// needs the token, which the page sends.
		{"console page without the token", "/", nil, 200},
		{"console script without the token", "/console/main.js", nil, 200},
		{"console chats without the token", "/_local/chats", nil, 401},
		{"console chats with the token", "/_local/chats", []string{"X-Linegate-Token", tok}, 200},
		{"console pipeline without the token", "/_local/pipeline", nil, 401},
	}
	for _, tt := range tests {
		if got := get(tt.path, tt.header...); got != tt.want {
			t.Errorf("%s: GET %s = %d, want %d", tt.name, tt.path, got, tt.want)
		}
	}
	// The SQS endpoint: the token is the SDK's access key id.
	sqsWith := func(keyID string) error {
		c := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(rt.URL()),
			Credentials: credentials.NewStaticCredentialsProvider(keyID, "any", "")})
		_, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("linegate-InteractiveDLQ.fifo")})
		return err
	}
	if err := sqsWith("local"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("SQS without the token: %v, want a 401", err)
	}
	if err := sqsWith(tok); err != nil {
		t.Errorf("SQS with the token as access key id: %v", err)
	}
	// The webhook is open; the worker's reply reaches the mock with the token.
	user := "U8888888888888888888888888888888a"
	deliver(t, lp, lp.Text(user, "remote hello"))
	waitMessage(t, rt, 10*time.Second, user, "reply", "remote hello")
}

// On loopback, a request naming another host (a web page that rebound its
// DNS name to 127.0.0.1) is refused everywhere but on the webhook.
func TestLoopbackRefusesForeignHosts(t *testing.T) {
	rt, _ := start(t, Config{})
	for _, tt := range []struct {
		host string
		want int
	}{{"evil.example:3000", 403}, {"localhost:3000", 200}, {"127.0.0.1", 200}, {"[::1]:3000", 200}, {"host.docker.internal:3000", 200}} {
		req, _ := http.NewRequest(http.MethodGet, rt.URL()+"/_local/queues", nil)
		req.Host = tt.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %s: %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
	}
}

// countingReader counts what was read of a body.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// The webhook reads a body through its function's limit: at most the limit
// plus one byte, whatever is sent, and the core answers 413 as for the whole
// body. A declared length beyond API Gateway's 10 MB is refused unread.
func TestWebhookReadsThroughTheLimit(t *testing.T) {
	const limit = 1 << 20
	a := &apiGateway{maxBody: limit}
	body := &countingReader{r: io.LimitReader(zeros{}, 10<<20)}
	req, _ := http.NewRequest(http.MethodPost, "/webhook", body)
	got, status, _ := a.readBody(req)
	if status != 0 || len(got) != limit+1 || body.n > limit+1+32<<10 {
		t.Fatalf("read %d bytes (buffered %d, status %d), want the limit plus one buffered", body.n, len(got), status)
	}
	unread := &countingReader{r: zeros{}}
	req, _ = http.NewRequest(http.MethodPost, "/webhook", unread)
	req.ContentLength = maxAPIGatewayBody + 1
	if _, status, _ := a.readBody(req); status != http.StatusRequestEntityTooLarge || unread.n != 0 {
		t.Fatalf("a declared length over 10 MB: status %d after reading %d bytes, want 413 unread", status, unread.n)
	}

	rt, _ := start(t, Config{})
	resp, err := http.Post(rt.WebhookURL(), "application/json", io.LimitReader(zeros{}, 3<<20))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 3 MB body: %d, want 413", resp.StatusCode)
	}
}

// Every other path reads bodies through Limits.MaxBodyBytes.
func TestOtherPathsReadThroughTheLimit(t *testing.T) {
	rt, _ := start(t, Config{Limits: Limits{MaxBodyBytes: 1 << 10}})
	for _, tt := range []struct {
		name    string
		body    io.Reader
		chunked bool
	}{{"declared", bytes.NewReader(make([]byte, 4<<10)), false}, {"chunked", io.LimitReader(zeros{}, 4<<10), true}} {
		req, _ := http.NewRequest(http.MethodPost, rt.URL()+linemock.PathPush, tt.body)
		req.Header.Set("Authorization", "Bearer "+DefaultToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s 4 KB body over a 1 KB limit: %d, want refused", tt.name, resp.StatusCode)
		}
	}
}

// A connection that sends headers slowly (or never finishes them) is closed
// once the read-header timeout passes.
func TestSlowHeadersAreCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	rt, _ := start(t, Config{Limits: Limits{ReadHeaderTimeout: timeout}})
	got := <-testio.Stall(t, strings.TrimPrefix(rt.URL(), "http://"), "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", timeout+3*time.Second)
	if !got.ByServer {
		t.Fatalf("connection still open after %v: the read-header timeout did not cut it", got.After)
	}
	if got.After < timeout/2 || got.After > timeout+2*time.Second {
		t.Fatalf("connection closed after %v, want about %v", got.After, timeout)
	}
}

// The server runs with every timeout set.
func TestServerTimeoutsAreSet(t *testing.T) {
	rt, _ := start(t, Config{})
	s := rt.srv
	d := DefaultLimits
	if s.ReadHeaderTimeout != d.ReadHeaderTimeout || s.ReadTimeout != d.ReadTimeout || s.WriteTimeout != d.WriteTimeout ||
		s.IdleTimeout != d.IdleTimeout || s.MaxHeaderBytes != d.MaxHeaderBytes || d.ReadHeaderTimeout <= 0 || d.WriteTimeout <= 20*time.Second {
		t.Fatalf("server %v/%v/%v/%v/%d, want %+v (write timeout above SQS's 20 s long poll)", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes, d)
	}
}

func TestHasToken(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		header map[string]string
		query  string
		want   bool
	}{
		{"none", nil, "", false},
		{"bearer", map[string]string{"Authorization": "Bearer " + tok}, "", true},
		{"bearer lower-case scheme", map[string]string{"Authorization": "bearer " + tok}, "", true},
		{"wrong bearer", map[string]string{"Authorization": "Bearer " + tok[1:]}, "", false},
		{"sigv4", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=" + tok + "/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=abc"}, "", true},
		{"sigv4 other key", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/us-east-1/sqs/aws4_request"}, "", false},
		{"header", map[string]string{"X-Linegate-Token": tok}, "", true},
		{"query", nil, "token=" + tok, true},
		{"empty query", nil, "token=", false},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, "http://x/_local/events?"+tt.query, nil)
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		if got := hasToken(req, tok); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// start0Bot is the testbot, for tests that call Start themselves.
func start0Bot(config.Worker) *bot.Router { return testbot.New() }

// A token is compared whole: no prefix of it (an empty one, one byte short,
// its first half) nor the token with bytes after it is accepted, in any of
// the places a client may send it.
func TestTokenPrefixIsRefused(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, c := range []string{"", tok[:1], tok[:len(tok)/2], tok[:len(tok)-1], tok + "0", tok + tok} {
		for _, where := range []map[string]string{
			{"Authorization": "Bearer " + c},
			{"X-Linegate-Token": c},
			{"Authorization": "AWS4-HMAC-SHA256 Credential=" + c + "/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64)},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://x/_local/events?token="+c, nil)
			for k, v := range where {
				req.Header.Set(k, v)
			}
			if hasToken(req, tok) {
				t.Errorf("%q accepted for the token %q (sent as %v and ?token=)", c, tok, where)
			}
		}
	}
	// And the whole token is, so the refusals above are about the prefix.
	req, _ := http.NewRequest(http.MethodGet, "http://x/_local/events", nil)
	req.Header.Set("X-Linegate-Token", tok)
	if !hasToken(req, tok) {
		t.Fatal("the token itself is refused")
	}
}

// The default address is loopback: `linegate local` without --addr must not
// expose /_local, the AWS endpoint and the LINE API mock to the network.
func TestDefaultAddrIsLoopback(t *testing.T) {
	loop, err := isLoopback(DefaultAddr)
	if err != nil || !loop {
		t.Fatalf("DefaultAddr %q: loopback %v (%v); want a loopback address", DefaultAddr, loop, err)
	}
}
