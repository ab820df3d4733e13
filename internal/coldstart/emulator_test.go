package coldstart_test

// These tests run the real bootstrap binaries under aws-lambda-rie. Without
// the emulator they are skipped loudly on a developer machine and fail in CI.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/coldstart"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/pkg/envelope"
)

// repoRoot is the repository, relative to this package.
const repoRoot = "../.."

// webhookLimit is the most the webhook's stripped arm64 binary may weigh.
// With the X-Ray SDK as the one tracer (its core package imports grpc and
// fasthttp) and the SQS client for the chat queue (docs/adr/0001) the
// webhook weighs 20.06 MiB; the budget leaves under half a MiB, so a client
// it must not link (functions/deps_test.go lists them) shows here too.
const webhookLimit = 20<<20 + 448<<10

// requireEmulator returns aws-lambda-rie's path, or skips loudly (fails when
// CI is set) without it.
func requireEmulator(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("SKIPPED LOUDLY: aws-lambda-rie runs on Linux only, this is %s", runtime.GOOS)
	}
	p, err := coldstart.FindEmulator(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("aws-lambda-rie is required in CI: %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: %v; these tests run the built functions under it in CI", err)
	}
	return p
}

// builds caches host builds of each function for the whole test binary.
var builds = struct {
	sync.Mutex
	dir  string
	bins map[string]coldstart.Binary
}{bins: map[string]coldstart.Binary{}}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// hostBinary builds functions/<fn> for this machine once per test binary.
func hostBinary(t *testing.T, fn string) coldstart.Binary {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if b, ok := builds.bins[fn]; ok {
		return b
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "coldstart-test-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = d
	}
	b, err := coldstart.Build(context.Background(), filepath.Join(repoRoot, "functions", fn), runtime.GOOS, runtime.GOARCH, filepath.Join(builds.dir, fn))
	if err != nil {
		t.Fatal(err)
	}
	builds.bins[fn] = b
	return b
}

// expectation is what a sample in events/ is documented to produce.
type expectation struct {
	Status    int      `json:"status"`    // webhook: the proxy response's statusCode
	Published int      `json:"published"` // webhook: events that reached the bus
	Failures  []string `json:"failures"`  // worker: batchItemFailures' itemIdentifiers
	Messages  int      `json:"messages"`  // worker/notifier: messages LINE accepted
}

// expectations reads events/expected.json, the outcome table shared with
// events/samples_test.go.
func expectations(t *testing.T) map[string]expectation {
	t.Helper()
	path := filepath.Join(repoRoot, "events", "expected.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]expectation
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Logf("expected outcomes from %s", path)
	return want
}

// samples maps each function to its sample files in events/, and fails the
// test for a file without an expectation or an expectation without a file.
func samples(t *testing.T, want map[string]expectation) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "env.json" || name == "expected.json" {
			continue
		}
		seen[name] = true
		fn, _, ok := strings.Cut(name, "-")
		if !ok || !slices.Contains([]string{"webhook", "worker", "notifier"}, fn) {
			t.Errorf("events/%s: a sample's name must start with webhook-, worker- or notifier-", name)
			continue
		}
		if _, ok := want[name]; !ok {
			t.Errorf("events/%s has no expected outcome", name)
			continue
		}
		out[fn] = append(out[fn], name)
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("an outcome is expected for events/%s, which does not exist", name)
		}
	}
	return out
}

// cloud is moto with what the functions need: the bus (with a rule copying
// every event to a queue, so the test can count what was published), the ops
// topic, and idempotency tables made on demand.
type cloud struct {
	endpoint string
	cfg      aws.Config
	queueURL string
	chatURL  string // the FIFO chat queue the webhook sends chat events to
	topicARN string
	ddb      *dynamodb.Client
	sqs      *sqs.Client
}

const busName = "linegate"

func newCloud(t *testing.T) *cloud {
	t.Helper()
	ctx := context.Background()
	endpoint := motoserver.Start(t)
	c := &cloud{endpoint: endpoint, cfg: motoserver.Config(endpoint)}
	c.ddb = dynamodb.NewFromConfig(c.cfg)
	c.sqs = sqs.NewFromConfig(c.cfg)
	eb := eventbridge.NewFromConfig(c.cfg)
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(busName)}); err != nil {
		t.Fatalf("create bus: %v", err)
	}
	q, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("published")})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	c.queueURL = *q.QueueUrl
	attrs, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("queue arn: %v", err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("all"), EventBusName: aws.String(busName),
		EventPattern: aws.String(`{"source":["line.webhook"]}`)}); err != nil {
		t.Fatalf("put rule: %v", err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("all"), EventBusName: aws.String(busName),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}}}); err != nil {
		t.Fatalf("put targets: %v", err)
	}
	chat, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("linegate-chat.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatalf("create chat queue: %v", err)
	}
	c.chatURL = *chat.QueueUrl
	topic, err := sns.NewFromConfig(c.cfg).CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("linegate-ops")})
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	c.topicARN = *topic.TopicArn
	return c
}

// table creates a fresh idempotency table, so each sample starts unseen.
func (c *cloud) table(t *testing.T, name string) string {
	t.Helper()
	_, err := c.ddb.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

// published drains the queue the bus copies into and returns the events
// that reached it.
func (c *cloud) published(t *testing.T) []envelope.Detail {
	t.Helper()
	ctx := context.Background()
	var out []envelope.Detail
	for {
		r, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.queueURL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			_, env, err := envelope.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Errorf("the bus delivered something that is not an envelope: %v", err)
			}
			out = append(out, env)
			if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	}
}

// env is what `sam local invoke --env-vars events/env.json` gives fn, with
// AWS pointed at moto and LINE at line.
func (c *cloud) env(t *testing.T, fn string, extra map[string]string) map[string]string {
	t.Helper()
	env := coldstart.OfflineEnv(fn)
	sample, err := coldstart.SampleEnv(repoRoot, fn)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(env, sample)
	maps.Copy(env, map[string]string{
		"AWS_ENDPOINT_URL":      c.endpoint,
		"AWS_REGION":            motoserver.Region,
		"AWS_ACCESS_KEY_ID":     "testing",
		"AWS_SECRET_ACCESS_KEY": "testing",
		"EVENT_BUS_NAME":        busName,
		"CHAT_QUEUE_URL":        c.chatURL,
		"OPS_TOPIC_ARN":         c.topicARN,
		"AWS_XRAY_SDK_DISABLED": "true",
	})
	maps.Copy(env, extra)
	return env
}

// run starts fn fresh (as sam local invoke does per call), invokes it with
// the sample and returns the response.
func run(t *testing.T, bin coldstart.Binary, env map[string]string, sample string) []byte {
	t.Helper()
	event, err := os.ReadFile(filepath.Join(repoRoot, "events", sample))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iv, err := coldstart.Start(ctx, bin, env)
	if err != nil {
		t.Fatal(err)
	}
	defer iv.Stop()
	out, err := iv.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("%s: %v\n%s", sample, err, iv.Logs())
	}
	if iv.Init() <= 0 {
		t.Errorf("%s: no INIT duration was reported\n%s", sample, iv.Logs())
	}
	return out
}

func TestEveryEventThroughTheBuiltBinaries(t *testing.T) {
	requireEmulator(t)
	want := expectations(t)
	files := samples(t, want)
	if t.Failed() {
		t.FailNow()
	}
	c := newCloud(t)

	t.Run("webhook", func(t *testing.T) {
		bin := hostBinary(t, "webhook")
		c.published(t) // start from an empty queue
		for _, name := range files["webhook"] {
			t.Run(name, func(t *testing.T) {
				w := want[name]
				out := run(t, bin, c.env(t, "webhook", nil), name)
				var resp events.APIGatewayProxyResponse
				if err := json.Unmarshal(out, &resp); err != nil {
					t.Fatalf("not a proxy response: %v: %s", err, out)
				}
				got := c.published(t)
				if resp.StatusCode != w.Status || len(got) != w.Published {
					t.Fatalf("statusCode %d and %d events on the bus, want %d and %d (body %s)", resp.StatusCode, len(got), w.Status, w.Published, resp.Body)
				}
			})
		}
	})

	t.Run("worker", func(t *testing.T) {
		bin := hostBinary(t, "worker")
		for i, name := range files["worker"] {
			t.Run(name, func(t *testing.T) {
				w := want[name]
				line := linemock.New(linemock.WithAcceptUnknownReplyTokens())
				srv := httptest.NewServer(line)
				defer srv.Close()
				env := c.env(t, "worker", map[string]string{
					"IDEMPOTENCY_TABLE": c.table(t, fmt.Sprintf("idempotency-%d", i)),
					"LINE_API_BASE_URL": srv.URL,
				})
				out := run(t, bin, env, name)
				var resp events.SQSEventResponse
				if err := json.Unmarshal(out, &resp); err != nil {
					t.Fatalf("not an SQSEventResponse: %v: %s", err, out)
				}
				failed := []string{}
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				slices.Sort(failed)
				wantFailed := slices.Sorted(slices.Values(w.Failures))
				if !slices.Equal(failed, wantFailed) {
					t.Errorf("batchItemFailures %v, want %v", failed, wantFailed)
				}
				if n := len(line.Messages()); n != w.Messages {
					t.Errorf("%d messages sent to LINE, want %d", n, w.Messages)
				}
			})
		}
	})

	t.Run("notifier", func(t *testing.T) {
		if len(files["notifier"]) == 0 {
			t.Log("NOTE: events/ has no notifier-*.json sample yet; nothing to invoke")
			return
		}
		bin := hostBinary(t, "notifier")
		for _, name := range files["notifier"] {
			t.Run(name, func(t *testing.T) {
				w := want[name]
				line := linemock.New()
				srv := httptest.NewServer(line)
				defer srv.Close()
				out := run(t, bin, c.env(t, "notifier", map[string]string{"LINE_API_BASE_URL": srv.URL}), name)
				if s := strings.TrimSpace(string(out)); s != "null" && s != "" {
					t.Errorf("response %s, want null (the handler returns only an error)", s)
				}
				pushes := 0
				for _, m := range line.Messages() {
					if m.Via == linemock.ViaPush {
						pushes++
					}
				}
				if pushes != w.Messages || pushes == 0 {
					t.Errorf("%d pushes recorded, want %d (and at least one)", pushes, w.Messages)
				}
			})
		}
	})
}

// TestInvokerReportsFailures checks the two ways a real function fails
// under the emulator: a configuration it refuses at INIT, and a handler
// error.
func TestInvokerReportsFailures(t *testing.T) {
	requireEmulator(t)
	bin := hostBinary(t, "webhook")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("init refuses its configuration", func(t *testing.T) {
		env := coldstart.OfflineEnv("webhook")
		delete(env, "EVENT_BUS_NAME")
		env["LINE_CHANNEL_SECRET"] = "s"
		iv, err := coldstart.Start(ctx, bin, env)
		if err != nil {
			t.Fatal(err)
		}
		defer iv.Stop()
		_, err = iv.Invoke(ctx, []byte("{}"))
		if !errors.Is(err, coldstart.ErrInitFailed) {
			t.Fatalf("err = %v, want ErrInitFailed", err)
		}
		if iv.InitStatus() == "success" || !strings.Contains(iv.Logs(), "EVENT_BUS_NAME is not set") {
			t.Fatalf("init status %q; the logs do not say why:\n%s", iv.InitStatus(), iv.Logs())
		}
	})

	t.Run("handler error, then a good invocation on the warm process", func(t *testing.T) {
		env := coldstart.OfflineEnv("webhook")
		env["LINE_CHANNEL_SECRET"] = "s"
		iv, err := coldstart.Start(ctx, bin, env)
		if err != nil {
			t.Fatal(err)
		}
		defer iv.Stop()
		_, err = iv.Invoke(ctx, []byte(`"not a proxy request"`))
		var fe *coldstart.FunctionError
		if !errors.As(err, &fe) || fe.Type != "UnmarshalTypeError" {
			t.Fatalf("err = %v, want a FunctionError of type UnmarshalTypeError", err)
		}
		cold := iv.Init()
		if cold <= 0 || iv.InitStatus() != "success" {
			t.Fatalf("init %v status %q after the first invocation", cold, iv.InitStatus())
		}
		out, err := iv.Invoke(ctx, []byte(`{"httpMethod":"GET"}`))
		if err != nil {
			t.Fatal(err)
		}
		var resp events.APIGatewayProxyResponse
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 405 {
			t.Fatalf("GET answered %s (%v), want statusCode 405", out, err)
		}
		if iv.Init() != cold {
			t.Errorf("a warm invocation changed Init from %v to %v", cold, iv.Init())
		}
		iv.Stop()
		if _, err := iv.Invoke(ctx, []byte("{}")); !errors.Is(err, coldstart.ErrStopped) {
			t.Errorf("invoke after Stop: %v, want ErrStopped", err)
		}
	})
}

func TestColdStart(t *testing.T) {
	requireEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const starts = 5
	opts := []coldstart.Option{coldstart.WithStarts(starts)}
	if raceDetector {
		// Zipping ~20 MB three times would take ~25 s under -race; TestZip
		// covers Zip, `linegate bench --cold-start` reports the sizes.
		t.Log("NOTE: zip sizes are not measured under -race; run without -race for them")
		opts = append(opts, coldstart.WithoutZip())
	}
	rows, err := coldstart.Measure(ctx, repoRoot, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := coldstart.WriteTable(&table, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("cold start (INIT target 15 ms is reported, not asserted):\n%s", table.String())
	fns, err := coldstart.Functions(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(fns) {
		t.Fatalf("%d rows for %d functions", len(rows), len(fns))
	}
	for _, r := range rows {
		t.Logf("%s: arm64 binary %d bytes, zip %d bytes, INITs %v", r.Function, r.BinaryBytes, r.ZipBytes, r.Inits)
		if len(r.Inits) != starts {
			t.Errorf("%s: %d INITs measured, want %d", r.Function, len(r.Inits), starts)
		}
		for _, d := range r.Inits {
			if d <= 0 {
				t.Errorf("%s: INIT %v", r.Function, d)
			}
		}
		if !raceDetector && (r.ZipBytes <= 0 || r.ZipBytes >= r.BinaryBytes) {
			t.Errorf("%s: zip %d bytes for a %d-byte binary", r.Function, r.ZipBytes, r.BinaryBytes)
		}
		if r.Function == "webhook" && r.BinaryBytes > webhookLimit {
			t.Errorf("the webhook's stripped %s/%s binary is %.2f MiB, over the %d MiB budget",
				coldstart.DeployOS, coldstart.DeployArch, float64(r.BinaryBytes)/(1<<20), webhookLimit>>20)
		}
	}
}
