package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/pkg/bot"
)

// Baseline designs linegate is compared with.
const (
	SystemSync       = "sync"           // the handler runs inside the webhook request (LINE's samples)
	SystemBackground = "background"     // 200 at once, the handler in a goroutine, nothing durable
	SystemDirect     = "durable-direct" // 200 once each event is in an SQS queue, workers poll it: durable, no bus
	SystemLinegate   = "linegate"       // the local linegate pipeline from template.yaml
)

const (
	baselineSecret = "bench-channel-secret"
	baselineToken  = "bench-channel-access-token"
	maxWebhookBody = 1 << 20
	// handlerTimeout bounds one handler run in a baseline, as a process
	// would bound it; far above any work a bench simulates.
	handlerTimeout = 2 * time.Minute
)

// baseline is one of the designs linegate replaces, served over real HTTP
// on loopback, answering through its own local Messaging API as LINE's
// samples do (reply only).
type baseline struct {
	mode   string
	secret string
	router *bot.Router
	line   *linemock.Server
	lineLn net.Listener
	lineSv *http.Server
	hookLn net.Listener
	hookSv *http.Server
	client *http.Client
	log    *slog.Logger

	mu      sync.Mutex
	proc    context.Context // the process: cancelled by a crash
	kill    context.CancelFunc
	running sync.WaitGroup
	active  atomic.Int64 // handler runs in flight

	direct *directQueueing // SystemDirect's queue and pollers
}

// startBaseline serves mode (SystemSync, SystemBackground or SystemDirect)
// on loopback.
func startBaseline(mode string, router *bot.Router, o Options, log *slog.Logger) (*baseline, error) {
	// The accounting reads every answer of the run (as for linegate's).
	b := &baseline{mode: mode, secret: baselineSecret, router: router, line: linemock.New(linemock.WithMaxRecords(4*o.Events + 1000)), log: log,
		client: &http.Client{Transport: newTransport(256), Timeout: lineapi.DefaultHTTPTimeout}}
	b.proc, b.kill = context.WithCancel(context.Background())
	var err error
	if b.lineLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("%s baseline: listen for the LINE API: %w", mode, err)
	}
	if b.hookLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		_ = b.lineLn.Close()
		return nil, fmt.Errorf("%s baseline: listen for webhooks: %w", mode, err)
	}
	b.lineSv = &http.Server{Handler: b.line, ReadHeaderTimeout: 5 * time.Second}
	b.hookSv = &http.Server{Handler: http.HandlerFunc(b.serveWebhook), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.lineSv.Serve(b.lineLn) }()
	go func() { _ = b.hookSv.Serve(b.hookLn) }()
	if mode == SystemDirect {
		if err := b.startDirect(o); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *baseline) webhookURL() string { return "http://" + b.hookLn.Addr().String() + "/callback" }
func (b *baseline) lineURL() string    { return "http://" + b.lineLn.Addr().String() }

// process returns the context of the running process.
func (b *baseline) process() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

// crash kills the process: every handler in flight is cancelled and its
// effect never happens; a new process takes the next requests at once. It
// returns how many handler runs were in flight.
func (b *baseline) crash() int {
	b.mu.Lock()
	kill := b.kill
	b.proc, b.kill = context.WithCancel(context.Background())
	b.mu.Unlock()
	n := int(b.active.Load())
	kill()
	return n
}

// idle reports whether no handler is running (and, for durable-direct,
// the queue is empty).
func (b *baseline) idle() bool {
	return b.active.Load() == 0 && (b.direct == nil || b.direct.queued() == 0)
}

func (b *baseline) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = b.hookSv.Shutdown(ctx)
	b.mu.Lock()
	b.kill()
	b.mu.Unlock()
	if b.direct != nil {
		b.direct.close()
	}
	b.running.Wait()
	_ = b.lineSv.Shutdown(ctx)
	b.client.CloseIdleConnections()
}

// serveWebhook is the webhook endpoint as LINE's samples write it: verify the
// signature with the SDK's ParseRequest, then handle each event — inside the
// request (sync), in a goroutine after answering (background), or by a
// worker after the queue took it (durable-direct).
func (b *baseline) serveWebhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil || len(body) > maxWebhookBody {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if _, err := webhook.ParseRequest(b.secret, r); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, webhook.ErrInvalidSignature) {
			status = http.StatusBadRequest
		}
		http.Error(w, "invalid webhook", status)
		return
	}
	// The handler gets the raw events (the same bot.Event linegate's worker
	// builds); ParseRequest above is the verification the samples do.
	var cb struct {
		Destination string            `json:"destination"`
		Events      []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &cb); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	proc := b.process()
	received := time.Now()
	if b.mode == SystemDirect {
		if err := b.direct.enqueue(r.Context(), cb.Destination, received, cb.Events); err != nil {
			logQueueError(b.log, err)
			http.Error(w, "events not queued", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	if b.mode == SystemBackground {
		for _, raw := range cb.Events {
			b.run(proc, raw, cb.Destination, received, true)
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	for _, raw := range cb.Events {
		b.run(proc, raw, cb.Destination, received, false)
	}
	if proc.Err() != nil {
		// The process died while handling the request: the connection drops
		// without an answer and LINE counts the request as failed.
		dropConnection(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// run handles one event, in a goroutine when async, and reports (when not
// async) whether the handler succeeded. The work is tied to the process,
// not to the request: LINE hanging up after 2 s does not stop it (as in
// the samples, which keep going after the client is gone).
func (b *baseline) run(proc context.Context, raw json.RawMessage, dest string, received time.Time, async bool) bool {
	b.active.Add(1)
	b.running.Add(1)
	do := func() bool {
		defer func() { b.active.Add(-1); b.running.Done() }()
		ctx, cancel := context.WithTimeout(proc, handlerTimeout)
		defer cancel()
		m, err := newReplyOnly(b.lineURL(), b.client)
		if err != nil {
			b.log.Warn("baseline: no LINE client", "system", b.mode, "error", err.Error())
			return false
		}
		ev, err := bot.Parse(raw, dest, received, m)
		if err != nil {
			b.log.Warn("baseline: event not parsed", "system", b.mode, "error", err.Error())
			return false
		}
		if err := b.router.Dispatch(ctx, ev); err != nil {
			b.log.Warn("baseline: handler failed", "system", b.mode, "webhookEventId", ev.WebhookEventID, "error", err.Error())
			return false
		}
		return true
	}
	if async {
		go do()
		return true
	}
	return do()
}

// replyOnly answers as LINE's official samples and line-bot-sdk-go's
// examples do: ReplyMessage with the event's reply token, and nothing else.
// When the token is spent (a redelivered event's, already used by the first
// attempt) or expired, the reply fails and the user gets nothing more; the
// handler has still run again. (linegate's client pushes then, with a retry
// key.)
type replyOnly struct {
	api *messaging_api.MessagingApiAPI
}

func newReplyOnly(baseURL string, hc *http.Client) (replyOnly, error) {
	api, err := messaging_api.NewMessagingApiAPI(baselineToken, messaging_api.WithEndpoint(baseURL), messaging_api.WithHTTPClient(hc))
	return replyOnly{api: api}, err
}

// Send replies with t.ReplyToken.
func (r replyOnly) Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	_, err := r.api.WithContext(ctx).ReplyMessage(&messaging_api.ReplyMessageRequest{ReplyToken: t.ReplyToken, Messages: msgs})
	return lineapi.ViaReply, err
}

// Push is not something the samples do.
func (replyOnly) Push(context.Context, string, string, ...messaging_api.MessageInterface) error {
	return errors.New("bench: the samples only reply")
}

// ShowLoading is not something the samples do.
func (replyOnly) ShowLoading(context.Context, string, int) error { return nil }

// MarkAsRead is not something the samples do.
func (replyOnly) MarkAsRead(context.Context, string) error { return nil }

// dropConnection closes the request's connection without a response.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): the closest to a dead process is a 502.
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	_ = conn.Close()
}

// newTransport is an HTTP transport that keeps enough idle connections for
// the bench's concurrency, so the figures do not measure connection churn.
func newTransport(conns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns
	t.MaxIdleConnsPerHost = conns
	return t
}
