package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/linegate/linegate/internal/template"
)

// Cost is docs/cost.md's table: the monthly AWS cost of one million
// webhooks (one event each) at a template's settings, us-east-1 list
// prices, free tiers ignored. It is computed from the template (the API's
// kind, the functions' memory and tracing, the table's key, the access log
// format, the log levels, the archive's retention, the alarms and the event
// source mappings), so the table cannot drift from what deploys: a test
// compares docs/cost.md with it.
//
// Prices (us-east-1, checked 2026-12):
//   - API Gateway: HTTP API $1.00, REST API $3.50 per million requests
//     (https://aws.amazon.com/api-gateway/pricing/)
//   - Lambda arm64: $0.20 per million requests, $0.0000133334 per GB-second
//     (https://aws.amazon.com/lambda/pricing/)
//   - EventBridge: $1.00 per million custom events; archive $0.10 per GB
//     processed, $0.023 per GB-month stored (https://aws.amazon.com/eventbridge/pricing/)
//   - SQS: FIFO $0.50, standard $0.40 per million requests (64 KB chunks)
//     (https://aws.amazon.com/sqs/pricing/)
//   - DynamoDB on-demand: $0.625 per million write request units
//     (https://aws.amazon.com/dynamodb/pricing/on-demand/)
//   - CloudWatch: logs $0.50 per GB ingested (Standard class; Lambda's
//     logs at this volume too), $0.25 in the Infrequent Access class,
//     $0.10 per standard alarm, $0.30 per custom metric, $3 per dashboard
//     beyond three (https://aws.amazon.com/cloudwatch/pricing/)
//   - X-Ray: $5.00 per million traces recorded (https://aws.amazon.com/xray/pricing/)
//   - Secrets Manager: $0.40 per secret per month (https://aws.amazon.com/secrets-manager/pricing/)
type Cost struct {
	Rows    []CostRow
	Total   float64 // per million webhooks
	Fixed   []CostRow
	FixedUp float64 // per month, whatever the traffic
}

// CostRow is one line of the table.
type CostRow struct {
	Item, Arithmetic string
	USD              float64
}

// Prices and the measured inputs of the table.
const (
	priceHTTPAPI     = 1.00
	priceRESTAPI     = 3.50
	priceLambdaReq   = 0.20
	priceLambdaGBs   = 0.0000133334
	priceEvents      = 1.00
	priceArchiveGB   = 0.10
	priceStorageGBMo = 0.023
	priceSQSFIFO     = 0.50
	priceSQSStandard = 0.40
	priceDynamoWRU   = 0.625
	// writesPerEvent is what the worker writes to the idempotency table for
	// an event it answers (internal/worker: idempotent, the reply ledger).
	writesPerEvent  = 3
	priceLogsGB     = 0.50
	priceLogsIAGB   = 0.25
	priceAlarm      = 0.10
	priceMetric     = 0.30
	priceDashboard  = 3.00
	priceXRayTrace  = 5.00
	priceSecret     = 0.40
	minutesPerMonth = 43200
	secondsPerMonth = 2_592_000
	// ArchiveEventBytes is one chat's text message as the bus archives it
	// (TestArchiveEventBytes measures it).
	ArchiveEventBytes = 840
	// FunctionLogBytes is what the deployed webhook and worker write to
	// CloudWatch Logs for one event at LOG_LEVEL INFO: nothing from the
	// webhook for a request it accepts, and the worker's one line per
	// record, which carries the invocation's EMF metrics
	// (TestFunctionLogBytesInLambda measures the real binaries under the
	// Lambda Runtime Interface Emulator; TestFunctionLogBytes checks
	// linegate local writes about as much).
	FunctionLogBytes = 711
	// platformLogBytes is Lambda's START, END and REPORT lines of one
	// invocation in JSON format (SystemLogLevel INFO).
	platformLogBytes = 700
	// xraySampled is the share of invocations Lambda traces beyond the
	// first each second (X-Ray's default rule, which Lambda applies).
	xraySampled = 0.05
	// idlePollers is the batches Lambda polls an idle SQS event source with
	// when MaximumConcurrency is set (it does not scale below five then),
	// each a 20 s long poll.
	idlePollers = 5
)

// billedSeconds is each function's billed duration of one invocation (one
// event; for the worker one record, the handler's own work aside) at a
// memory size, measured by BenchmarkBilledDuration (docs/cost.md): the real
// binaries under the Lambda Runtime Interface Emulator (the emulator, as
// Lambda's rapid, inside the sandbox's CPU share) with Lambda's CPU share of
// the memory size and the capacity model's AWS and LINE round trips: the
// medians of one run of six on a quiet machine (docs/cost.md). A memory size
// not measured is an error, not a guess.
var billedSeconds = map[string]map[int]float64{
	"WebhookFunction": {128: 0.054, 256: 0.026, 512: 0.024},
	"WorkerFunction":  {128: 0.070, 256: 0.055, 512: 0.052},
}

// CostInputs are what the table needs beyond the template's topology.
type CostInputs struct {
	// CustomMetrics is the metric/function combinations the functions
	// publish (the dashboard charts each).
	CustomMetrics int
	// AccessLogClass is the access log group's class, STANDARD (or "") or
	// INFREQUENT_ACCESS.
	AccessLogClass string
}

// contextValue is the typical length of an access log variable's value.
var contextValue = map[string]int{
	"$context.requestId": 16, "$context.identity.sourceIp": 13, "$context.requestTimeEpoch": 13, "$context.requestTime": 26,
	"$context.routeKey": 13, "$context.status": 3, "$context.responseLatency": 2, "$context.integrationStatus": 3,
	"$context.integrationLatency": 2, "$context.error.message": 1, "$context.error.responseType": 1,
	"$context.integrationErrorMessage": 1, "$context.httpMethod": 4, "$context.path": 13, "$context.responseLength": 2,
}

var contextVar = regexp.MustCompile(`\$context\.[A-Za-z.]+`)

// accessLogBytes is one access log line of format with typical values.
func accessLogBytes(format string) int {
	n := 0
	rest := contextVar.ReplaceAllStringFunc(format, func(v string) string {
		l, ok := contextValue[v]
		if !ok {
			l = 10
		}
		n += l
		return ""
	})
	return len(rest) + n + 1 // the line's newline
}

// ComputeCost computes the table for a template loaded with its defaults.
func ComputeCost(top *template.Topology, in CostInputs) (Cost, error) {
	var c Cost
	add := func(item, arith string, usd float64) {
		c.Rows = append(c.Rows, CostRow{item, arith, usd})
		c.Total += usd
	}
	fixed := func(item, arith string, usd float64) {
		c.Fixed = append(c.Fixed, CostRow{item, arith, usd})
		c.FixedUp += usd
	}
	fn := map[string]template.Function{}
	for _, f := range top.Functions {
		fn[f.LogicalID] = f
	}
	webhook, worker := fn["WebhookFunction"], fn["WorkerFunction"]
	if webhook.LogicalID == "" || worker.LogicalID == "" || len(top.APIs) != 1 {
		return c, fmt.Errorf("cost: want a WebhookFunction, a WorkerFunction and one API")
	}
	api := top.APIs[0]
	accessLogFormat := api.AccessLogFormat
	switch api.Kind {
	case "http":
		add("API Gateway HTTP API", fmt.Sprintf("1 M requests × $%.2f/M", priceHTTPAPI), priceHTTPAPI)
	default:
		add("API Gateway REST API", fmt.Sprintf("1 M requests × $%.2f/M", priceRESTAPI), priceRESTAPI)
	}
	for _, f := range []template.Function{webhook, worker} {
		if _, ok := billedSeconds[f.LogicalID][f.MemorySize]; !ok {
			return c, fmt.Errorf("cost: %s at %d MB: no billed duration measured at that memory size (BenchmarkBilledDuration, docs/cost.md)", f.LogicalID, f.MemorySize)
		}
	}
	lambda := func(name string, f template.Function, what string) {
		billed := billedSeconds[f.LogicalID][f.MemorySize]
		gb := float64(f.MemorySize) / 1024
		usd := priceLambdaReq + 1e6*gb*billed*priceLambdaGBs
		add(fmt.Sprintf("%s Lambda (arm64, %d MB, ~%.0f ms billed%s)", name, f.MemorySize, billed*1000, what),
			fmt.Sprintf("1 M × $%.2f/M + 1 M × %.3f GB × %.3f s × $%.10f/GB-s", priceLambdaReq, gb, billed, priceLambdaGBs), usd)
	}
	lambda("Webhook", webhook, ": the bus and the chat queue called at once")
	add("EventBridge custom events (every event, for the archive and your rules)", fmt.Sprintf("1 M × $%.2f/M", priceEvents), priceEvents)
	retention := 0
	for _, b := range top.Buses {
		if b.Archive {
			retention = b.ArchiveRetentionDays
		}
	}
	if retention > 0 {
		gb := ArchiveEventBytes / 1e3
		stored := gb * float64(retention) / 30
		add(fmt.Sprintf("EventBridge archive (%d days)", retention),
			fmt.Sprintf("%d B/event → %.2f GB × $%.2f/GB + %.2f GB-mo × $%.3f", ArchiveEventBytes, gb, priceArchiveGB, stored, priceStorageGBMo),
			gb*priceArchiveGB+stored*priceStorageGBMo)
	}
	add("SQS FIFO chat queue", fmt.Sprintf("send + receive + delete = 3 requests per event (no batching window: latency first) → 3 M × $%.2f/M", priceSQSFIFO), 3*priceSQSFIFO)
	lambda("Worker", worker, " per record, one record per invocation at a chat's pace")
	// A replied event writes its claim, its reply's attempt (recorded before
	// the reply, so a retry never pushes an answer that may have landed) and
	// its completion.
	ddb := fmt.Sprintf("claim + the reply's attempt + complete = %d WRU per replied event → %d M × $0.625/M (`bot.Once` and sessions add writes only where a handler uses them)", writesPerEvent, writesPerEvent)
	for _, t := range top.Tables {
		if t.KMS {
			ddb += "; plus the KMS requests of the aws/dynamodb key (TableEncryption=aws-managed-kms)"
		}
	}
	add("DynamoDB on-demand", ddb, writesPerEvent*priceDynamoWRU)

	// Per million events a byte per event is a kilobyte of GB: bytes/1e3 GB.
	fnBytes := FunctionLogBytes
	parts := []string{fmt.Sprintf("%d B of the functions' JSON lines (EMF in them)", FunctionLogBytes)}
	if top.Parameters["LogLevel"] == "DEBUG" {
		parts = append(parts, "+ DEBUG lines (not counted)")
	}
	if lvl := top.Parameters["PlatformLogLevel"]; lvl == "INFO" || lvl == "DEBUG" {
		fnBytes += 2 * platformLogBytes
		parts = append(parts, fmt.Sprintf("+ 2 × %d B of Lambda's START/END/REPORT", platformLogBytes))
	}
	arith := fmt.Sprintf("%s → %.3f GB × $%.2f/GB", strings.Join(parts, " "), float64(fnBytes)/1e3, priceLogsGB)
	usd := float64(fnBytes) / 1e3 * priceLogsGB
	if accessLogFormat != "" {
		n := accessLogBytes(accessLogFormat)
		price, class := priceLogsGB, "Standard"
		if in.AccessLogClass == "INFREQUENT_ACCESS" {
			price, class = priceLogsIAGB, "Infrequent Access"
		}
		arith += fmt.Sprintf("; %d B of access log → %.3f GB × $%.2f/GB (%s)", n, float64(n)/1e3, price, class)
		usd += float64(n) / 1e3 * price
	}
	add("CloudWatch Logs", arith, usd)

	traced := 0
	for _, f := range []template.Function{webhook, worker} {
		if f.Tracing == "Active" {
			traced++
		}
	}
	if traced > 0 {
		add("X-Ray (Lambda's sampling: 5% of invocations beyond the first each second)",
			fmt.Sprintf("%d traced invocations per event × %.0f%% × $%.2f/M traces", traced, xraySampled*100, priceXRayTrace),
			float64(traced)*xraySampled*priceXRayTrace)
	}

	fixed(fmt.Sprintf("%d alarms", len(top.Alarms)), fmt.Sprintf("%d × $%.2f", len(top.Alarms), priceAlarm), float64(len(top.Alarms))*priceAlarm)
	fixed("custom metrics", fmt.Sprintf("%d metric/function combinations (docs/metrics.md; the dashboard charts each) × $%.2f", in.CustomMetrics, priceMetric), float64(in.CustomMetrics)*priceMetric)
	if api.DetailedMetrics {
		fixed("detailed API metrics (ApiDetailedMetrics)", fmt.Sprintf("7 metrics per route × $%.2f", priceMetric), 7*priceMetric)
	}
	fixed("dashboard", "beyond the first three free", priceDashboard)
	fixed("ChatOps signing key (Secrets Manager)", "1 secret", priceSecret)
	fifo, standard := 0, 0
	for _, f := range top.Functions {
		for _, m := range f.SQSEvents {
			isFIFO := false
			for _, q := range top.Queues {
				if q.LogicalID == m.Queue {
					isFIFO = q.FIFO
				}
			}
			if isFIFO {
				fifo++
			} else {
				standard++
			}
		}
	}
	polls := float64(idlePollers*3*minutesPerMonth) / 1e6 // receives per mapping per month, millions
	fixed(fmt.Sprintf("idle polling of %d SQS event sources", fifo+standard),
		fmt.Sprintf("%d × %d pollers × 3 long polls/min × %d min = %.1f M receives (FIFO $%.2f, standard $%.2f per M)", fifo+standard, idlePollers, minutesPerMonth, polls*float64(fifo+standard), priceSQSFIFO, priceSQSStandard),
		polls*(float64(fifo)*priceSQSFIFO+float64(standard)*priceSQSStandard))
	if traced > 0 {
		fixed("X-Ray: the first trace each second of each traced function",
			fmt.Sprintf("at most %d × %.1f M traces × $%.2f/M; at 1 M webhooks a month (0.4/s) it is about every event", traced, secondsPerMonth/1e6, priceXRayTrace),
			float64(traced)*secondsPerMonth/1e6*priceXRayTrace)
	}
	return c, nil
}

// dashboardMetric is one custom metric of one function on the dashboard,
// which functions/metrics_test.go keeps complete.
var dashboardMetric = regexp.MustCompile(`\["\$\{Namespace\}", "([A-Za-z]+)", "Function", "\$\{([A-Za-z]+)\}"`)

// CostFromTemplate loads path with its defaults and computes its table.
func CostFromTemplate(path string) (Cost, error) {
	top, err := template.Load(path, map[string]string{"OperatorLineIds": "U" + strings.Repeat("0", 32)})
	if err != nil {
		return Cost{}, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Cost{}, err
	}
	pairs := map[string]bool{}
	for _, m := range dashboardMetric.FindAllStringSubmatch(string(raw), -1) {
		pairs[m[1]+" "+m[2]] = true
	}
	class, err := accessLogClass(raw)
	if err != nil {
		return Cost{}, fmt.Errorf("cost: %s: %w", path, err)
	}
	return ComputeCost(top, CostInputs{CustomMetrics: len(pairs), AccessLogClass: class})
}

// accessLogClass is the LogGroupClass of the log group the template's API
// writes its access log to ("" when it has no access log or the group sets
// no class, which is Standard). The group is the one the API's
// AccessLogSettings.DestinationArn names with !GetAtt <LogGroup>.Arn; a
// class given as !Ref takes the parameter's default.
func accessLogClass(raw []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) == 0 {
		return "", errors.New("empty template")
	}
	root := doc.Content[0]
	resources := mapValue(root, "Resources")
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		r := resources.Content[i+1]
		switch scalar(mapValue(r, "Type")) {
		case "AWS::Serverless::HttpApi", "AWS::Serverless::Api":
		default:
			continue
		}
		props := mapValue(r, "Properties")
		settings := mapValue(props, "AccessLogSettings")
		if settings == nil {
			settings = mapValue(props, "AccessLogSetting")
		}
		dest := mapValue(settings, "DestinationArn")
		if dest == nil {
			return "", nil
		}
		group, ok := strings.CutSuffix(dest.Value, ".Arn")
		if dest.Tag != "!GetAtt" || !ok {
			return "", fmt.Errorf("%s: the access log's DestinationArn is not !GetAtt <LogGroup>.Arn", resources.Content[i].Value)
		}
		g := mapValue(resources, group)
		if scalar(mapValue(g, "Type")) != "AWS::Logs::LogGroup" {
			return "", fmt.Errorf("%s: the access log goes to %s, which is no AWS::Logs::LogGroup of the template", resources.Content[i].Value, group)
		}
		class := mapValue(mapValue(g, "Properties"), "LogGroupClass")
		if class != nil && class.Tag == "!Ref" {
			class = mapValue(mapValue(mapValue(root, "Parameters"), class.Value), "Default")
		}
		return scalar(class), nil
	}
	return "", nil
}

// mapValue is the value of key in mapping n (nil when n is no mapping or has
// no such key).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalar is n's value, "" for nil.
func scalar(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

// WriteMarkdown writes the table as docs/cost.md shows it.
func (c Cost) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| item | arithmetic | USD |\n| --- | --- | --- |\n")
	for _, r := range c.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Item, r.Arithmetic, usd(r.USD))
	}
	fmt.Fprintf(&b, "| **per million webhooks** | | **%s** |\n\n", usd(c.Total))
	b.WriteString("Fixed per month, whatever the traffic:\n\n| item | arithmetic | USD |\n| --- | --- | --- |\n")
	for _, r := range c.Fixed {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Item, r.Arithmetic, usd(r.USD))
	}
	fmt.Fprintf(&b, "| **per month, at most** | | **%s** |\n", usd(c.FixedUp))
	_, err := io.WriteString(w, b.String())
	return err
}

func usd(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
