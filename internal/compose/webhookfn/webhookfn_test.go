package webhookfn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/secrets"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/testmetrics"
)

const secretParam = "/linegate/channel-secret"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ssmStandIn answers GetParameters with the parameter's current value,
// which a test can change (a rotation), after throttling the first
// `throttle` calls.
type ssmStandIn struct {
	mu       sync.Mutex
	value    string
	throttle int
	calls    atomic.Int32
}

func (s *ssmStandIn) set(v string) { s.mu.Lock(); s.value = v; s.mu.Unlock() }

func (s *ssmStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(s.calls.Add(1))
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	s.mu.Lock()
	value, throttle := s.value, s.throttle
	s.mu.Unlock()
	if n <= throttle {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`)
		return
	}
	var in struct{ Names []string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	out := map[string]any{"Parameters": []map[string]string{}, "InvalidParameters": []string{}}
	for _, name := range in.Names {
		if name == secretParam {
			out["Parameters"] = []map[string]string{{"Name": name, "Value": value}}
		} else {
			out["InvalidParameters"] = []string{name}
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

func awsConfig(url string) aws.Config {
	return aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}
}

func webhookConfig(t *testing.T, env map[string]string) config.Webhook {
	t.Helper()
	base := map[string]string{"EVENT_BUS_NAME": "linegate", "CHAT_QUEUE_URL": "https://sqs.test/1/chat.fifo", "AWS_REGION": "ap-northeast-1"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.LoadWebhook(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// acceptingBus and acceptingQueue take everything.
type acceptingBus struct{}

func (acceptingBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}, nil
}

type acceptingQueue struct{}

func (acceptingQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
	}
	return out, nil
}

const body = `{"destination":"U00000000000000000000000000000001","events":[{"type":"message","webhookEventId":"01HROTATE","timestamp":1,"mode":"active","source":{"type":"user","userId":"U00000000000000000000000000000002"},"replyToken":"r","message":{"type":"text","id":"1","text":"hi"}}]}`

// A rotation through SSM: the webhook starts with the old secret from the
// parameter; the operator puts LINE's new secret in the parameter; the next
// webhook signed with the new secret makes the warm webhook re-read the
// parameter and is accepted, with no redeploy and no cold start.
func TestSecretRotationThroughSSM(t *testing.T) {
	stand := &ssmStandIn{value: "old-secret"}
	srv := httptest.NewServer(stand)
	defer srv.Close()
	cfg := webhookConfig(t, map[string]string{"LINE_CHANNEL_SECRET_PARAM": secretParam, "SECRET_REFRESH_COOLDOWN_MS": "1000"})
	h, err := New(context.Background(), cfg, acceptingBus{}, acceptingQueue{}, compose.Common{Logger: quiet, SSM: secrets.NewSSM(awsConfig(srv.URL))})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(body)
	if resp, _ := h.Handle(context.Background(), "POST", signature.Sign([]byte("old-secret"), b), b); resp.Status != 200 {
		t.Fatalf("before the rotation: %d", resp.Status)
	}
	stand.set("new-secret")
	if resp, err := h.Handle(context.Background(), "POST", signature.Sign([]byte("new-secret"), b), b); resp.Status != 200 {
		t.Fatalf("signed with the rotated secret: %d %v, want 200", resp.Status, err)
	}
	if n := stand.calls.Load(); n != 2 {
		t.Fatalf("%d GetParameters calls, want 2 (INIT, then the one re-read)", n)
	}
}

// A plain secret (linegate local, sam local) is never re-read: there is no
// parameter behind it.
func TestPlainSecretIsNotReread(t *testing.T) {
	cfg := webhookConfig(t, map[string]string{"LINE_CHANNEL_SECRET": "plain"})
	h, err := New(context.Background(), cfg, acceptingBus{}, acceptingQueue{}, compose.Common{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(body)
	if resp, _ := h.Handle(context.Background(), "POST", signature.Sign([]byte("other"), b), b); resp.Status != 401 {
		t.Fatalf("a foreign key: %d", resp.Status)
	}
}

// The webhook's INIT survives SSM throttling its first calls: it backs off
// and gets the secret within the INIT budget.
func TestInitSurvivesThrottledSSM(t *testing.T) {
	stand := &ssmStandIn{value: "s3cret", throttle: 3}
	srv := httptest.NewServer(stand)
	defer srv.Close()
	cfg := webhookConfig(t, map[string]string{"LINE_CHANNEL_SECRET_PARAM": secretParam})
	h, err := New(context.Background(), cfg, acceptingBus{}, acceptingQueue{}, compose.Common{Logger: quiet, SSM: secrets.NewSSM(awsConfig(srv.URL))})
	if err != nil {
		t.Fatalf("INIT failed after %d throttled calls: %v", stand.throttle, err)
	}
	if n := stand.calls.Load(); n != 4 {
		t.Fatalf("%d calls, want 3 throttled and 1 served", n)
	}
	b := []byte(body)
	if resp, _ := h.Handle(context.Background(), "POST", signature.Sign([]byte("s3cret"), b), b); resp.Status != 200 {
		t.Fatalf("after a throttled INIT: %d", resp.Status)
	}
}

// throttlingAWS answers every call with a throttling error, counting the
// HTTP attempts.
type throttlingAWS struct {
	attempts atomic.Int32
	status   int
	body     string
}

func (s *throttlingAWS) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.attempts.Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(s.status)
	fmt.Fprint(w, s.body)
}

// The retryer is pinned: with EventBridge and SQS throttling every call, and
// the SDK configured to retry as much as it can (adaptive mode, ten
// attempts), every HTTP attempt the webhook makes is one its own retry layer
// counted, so the hand-off ends within PUBLISH_DEADLINE_MS whatever the
// SDK's default retry behaviour; the same SDK client without the pin makes
// several attempts of one call on its own.
func TestRetryerPinned(t *testing.T) {
	bus := &throttlingAWS{status: 400, body: `{"__type":"ThrottlingException","message":"Rate exceeded"}`}
	queue := &throttlingAWS{status: 500, body: `{"__type":"com.amazonaws.sqs#InternalError","message":"We encountered an internal error."}`}
	busSrv, queueSrv := httptest.NewServer(bus), httptest.NewServer(queue)
	defer busSrv.Close()
	defer queueSrv.Close()
	hostile := func(url string) aws.Config {
		c := awsConfig(url)
		c.RetryMode, c.RetryMaxAttempts = aws.RetryModeAdaptive, 10
		return c
	}
	eb, _ := Clients(hostile(busSrv.URL))
	_, q := Clients(hostile(queueSrv.URL))

	cfg := webhookConfig(t, map[string]string{"LINE_CHANNEL_SECRET": "s3cret", "PUBLISH_DEADLINE_MS": "800"})
	m := &testmetrics.Recorder{}
	h, err := New(context.Background(), cfg, eb, q, compose.Common{Logger: quiet, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(body)
	began := time.Now()
	resp, _ := h.Handle(context.Background(), "POST", signature.Sign([]byte("s3cret"), b), b)
	took := time.Since(began)
	if resp.Status != 500 {
		t.Fatalf("every call throttled: %d, want 500 (LINE redelivers)", resp.Status)
	}
	// One event: each of the webhook's calls carries one entry, so its own
	// calls are at most its first plus its metrics' retried entries (a retry
	// counted as the deadline passes is never sent). An SDK retry would be an
	// attempt beyond them.
	if got, most := bus.attempts.Load(), int32(1+m.Total(eventbus.MetricPublishRetries)); got < 1 || got > most {
		t.Errorf("%d PutEvents attempts reached EventBridge, the publisher made at most %d: the SDK retried on its own", got, most)
	}
	if got, most := queue.attempts.Load(), int32(1+m.Total(chatqueue.MetricQueueRetries)); got < 2 || got > most {
		t.Errorf("%d SendMessageBatch attempts reached SQS, the sender made at most %d (and retried at least once)", got, most)
	}
	if took > cfg.PublishDeadline+2*time.Second {
		t.Errorf("the hand-off took %v, past the %v deadline: an SDK backoff ran inside it", took, cfg.PublishDeadline)
	}
	t.Logf("%d PutEvents and %d SendMessageBatch attempts in %v", bus.attempts.Load(), queue.attempts.Load(), took.Round(time.Millisecond))

	// The client itself is pinned, not only the calls the senders make.
	one := &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("s"), DetailType: aws.String("d"), Detail: aws.String("{}")}}}
	before := bus.attempts.Load()
	_, _ = eb.PutEvents(context.Background(), one)
	if n := bus.attempts.Load() - before; n != 1 {
		t.Errorf("a call on the pinned client without options made %d attempts, want 1", n)
	}
	// Without the pin, one call is several attempts: the pin is what holds.
	before = bus.attempts.Load()
	plain := eventbridge.NewFromConfig(aws.Config{Region: "ap-northeast-1", BaseEndpoint: aws.String(busSrv.URL), RetryMaxAttempts: 3,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}, func(o *eventbridge.Options) {
		o.Retryer = noWait{retry.NewStandard()} // the SDK's default retryer, its backoff skipped to keep the test short
	})
	_, _ = plain.PutEvents(context.Background(), one)
	if n := bus.attempts.Load() - before; n < 2 {
		t.Fatalf("an unpinned client made %d attempt(s) of one throttled call; the control shows nothing", n)
	}
}

// noWait is a retryer that decides as its wrapped one does but never sleeps.
type noWait struct{ aws.RetryerV2 }

func (noWait) RetryDelay(int, error) (time.Duration, error) { return 0, nil }

// recordingQueue keeps what it is sent.
type recordingQueue struct {
	mu   sync.Mutex
	sent []sqstypes.SendMessageBatchRequestEntry
}

func (q *recordingQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	q.sent = append(q.sent, in.Entries...)
	q.mu.Unlock()
	return acceptingQueue{}.SendMessageBatch(ctx, in, o...)
}

// The function's one handler reads both of its event shapes: the events/
// sample API Gateway request sam local invokes it with is a webhook; an SQS
// batch from the replay queue is sent on to the chat queue.
func TestLambdaDispatch(t *testing.T) {
	cfg := webhookConfig(t, map[string]string{"LINE_CHANNEL_SECRET": "linegate-sample-channel-secret"}) // events/env.json's
	q := &recordingQueue{}
	h, err := New(context.Background(), cfg, acceptingBus{}, q, compose.Common{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	handle := Lambda(h)
	sample, err := os.ReadFile("../../../events/webhook-text-message.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	if err := json.Unmarshal(sample, &ev); err != nil {
		t.Fatal(err)
	}
	out, err := handle(context.Background(), ev)
	resp, ok := out.(events.APIGatewayProxyResponse)
	if err != nil || !ok || resp.StatusCode != 200 {
		t.Fatalf("the sample webhook: %#v %v", out, err)
	}
	live := len(q.sent)
	if live != 1 || aws.ToString(q.sent[0].MessageGroupId) == "" {
		t.Fatalf("live: %d messages sent, %+v", live, q.sent)
	}

	replay := fmt.Sprintf(`{"Records":[{"messageId":"m1","eventSource":"aws:sqs","body":%q}]}`, `{"replay-name":"r","detail":{"chat":"Uabc","event":{"type":"follow","webhookEventId":"01R"}}}`)
	ev = Event{}
	if err := json.Unmarshal([]byte(replay), &ev); err != nil {
		t.Fatal(err)
	}
	out, err = handle(context.Background(), ev)
	batch, ok := out.(events.SQSEventResponse)
	if err != nil || !ok || len(batch.BatchItemFailures) != 0 {
		t.Fatalf("the replay batch: %#v %v", out, err)
	}
	if len(q.sent) != live+1 || aws.ToString(q.sent[live].MessageGroupId) != "Uabc" || !strings.HasPrefix(aws.ToString(q.sent[live].MessageDeduplicationId), "replay:") {
		t.Fatalf("replayed message %+v: want group Uabc, a replay deduplication id", q.sent[live:])
	}
}
