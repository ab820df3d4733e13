// Package config reads each function's settings from the environment once, at
// start, into a typed struct, and validates them with messages that say what
// is missing and how to fix it.
package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// lineID is the format of LINE's user ("U"), group ("C") and room ("R") IDs.
var lineID = regexp.MustCompile(`^[UCR][0-9a-f]{32}$`)

// Getenv looks a variable up; os.Getenv in production, a map in tests.
type Getenv func(string) string

// Secret names where a secret comes from: an SSM SecureString parameter in
// AWS, or a plain value for local runs only.
type Secret struct {
	Param string // SSM parameter name
	Value string // plain value; accepted only outside Lambda or under sam local
}

// IsSet reports whether either source is configured.
func (s Secret) IsSet() bool { return s.Param != "" || s.Value != "" }

// Webhook configures functions/webhook.
type Webhook struct {
	Secret          Secret        // LINE_CHANNEL_SECRET_PARAM / LINE_CHANNEL_SECRET
	PreviousSecret  Secret        // LINE_CHANNEL_SECRET_PREVIOUS_PARAM / LINE_CHANNEL_SECRET_PREVIOUS
	BusName         string        // EVENT_BUS_NAME
	ChatQueueURL    string        // CHAT_QUEUE_URL: the FIFO queue every event with a chat goes to
	Region          string        // AWS_REGION (set by Lambda), named in the chat queue's envelopes
	Source          string        // EVENT_SOURCE, default line.webhook
	BotUserID       string        // BOT_USER_ID, optional destination check
	MaxBodyBytes    int64         // MAX_BODY_BYTES, default 1 MiB
	PublishDeadline time.Duration // PUBLISH_DEADLINE_MS, default 800
	Metrics         string        // METRICS_NAMESPACE, default linegate
	// SecretRefreshCooldown (SECRET_REFRESH_COOLDOWN_MS, default 10000) is
	// the least time between two re-reads of the secrets from SSM after a
	// signature that does not verify.
	SecretRefreshCooldown time.Duration
}

// LoadWebhook reads and validates the webhook's configuration.
func LoadWebhook(env Getenv) (Webhook, error) {
	r := reader{env: env}
	c := Webhook{
		Secret:          r.secret("LINE_CHANNEL_SECRET"),
		PreviousSecret:  r.secret("LINE_CHANNEL_SECRET_PREVIOUS"),
		BusName:         r.required("EVENT_BUS_NAME", "the EventBridge bus the webhook publishes to"),
		ChatQueueURL:    r.required("CHAT_QUEUE_URL", "the URL of the FIFO queue (InteractiveQueue) every event with a chat is sent to, in order"),
		Region:          r.str("AWS_REGION", ""),
		Source:          r.str("EVENT_SOURCE", "line.webhook"),
		BotUserID:       r.str("BOT_USER_ID", ""),
		MaxBodyBytes:    r.int("MAX_BODY_BYTES", 1<<20, 1, 10<<20),
		PublishDeadline: r.millis("PUBLISH_DEADLINE_MS", 800, 50, 5000),
		Metrics:         r.str("METRICS_NAMESPACE", "linegate"),

		SecretRefreshCooldown: r.millis("SECRET_REFRESH_COOLDOWN_MS", 10000, 1000, 600000),
	}
	if !c.Secret.IsSet() {
		r.problem("LINE_CHANNEL_SECRET_PARAM is not set: name the SSM SecureString holding the channel secret (or set LINE_CHANNEL_SECRET for a local run)")
	}
	r.localOnly(c.Secret, "LINE_CHANNEL_SECRET")
	r.localOnly(c.PreviousSecret, "LINE_CHANNEL_SECRET_PREVIOUS")
	if c.BotUserID != "" && (!lineID.MatchString(c.BotUserID) || c.BotUserID[0] != 'U') {
		r.problem("BOT_USER_ID must be the bot's user ID (U followed by 32 lowercase hex digits), got %q", c.BotUserID)
	}
	return c, r.err()
}

// reader collects every problem so one start-up error lists them all.
type reader struct {
	env      Getenv
	problems []string
}

func (r *reader) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *reader) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	return errors.New("configuration: " + strings.Join(r.problems, "; "))
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.env(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) required(name, what string) string {
	v := strings.TrimSpace(r.env(name))
	if v == "" {
		r.problem("%s is not set: %s", name, what)
	}
	return v
}

func (r *reader) int(name string, def, lo, hi int64) int64 {
	v := strings.TrimSpace(r.env(name))
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		r.problem("%s must be an integer from %d to %d, got %q", name, lo, hi, v)
		return def
	}
	return n
}

// duration reads a Go duration ("15m", "900ms") from lo to hi.
func (r *reader) duration(name string, def, lo, hi time.Duration) time.Duration {
	v := strings.TrimSpace(r.env(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		r.problem("%s must be a duration from %v to %v (such as 15m), got %q", name, lo, hi, v)
		return def
	}
	return d
}

func (r *reader) millis(name string, def, lo, hi int64) time.Duration {
	return time.Duration(r.int(name, def, lo, hi)) * time.Millisecond
}

func (r *reader) bool(name string, def bool) bool {
	v := strings.TrimSpace(r.env(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.problem("%s must be true or false, got %q", name, v)
		return def
	}
	return b
}

func (r *reader) secret(name string) Secret {
	return Secret{Param: strings.TrimSpace(r.env(name + "_PARAM")), Value: r.env(name)}
}

// localOnly refuses a plain secret inside a deployed Lambda: there secrets
// come from SSM so they never sit in the function's configuration.
func (r *reader) localOnly(s Secret, name string) {
	if s.Value == "" || s.Param != "" {
		return
	}
	inLambda := r.env("AWS_LAMBDA_FUNCTION_NAME") != "" && r.env("AWS_SAM_LOCAL") != "true"
	if inLambda {
		r.problem("%s is a plain value inside Lambda: store it in SSM Parameter Store and set %s_PARAM instead", name, name)
	}
}

// Worker configures functions/worker.
type Worker struct {
	Auth             LineAuth      // the channel access token: LINE_TOKEN_MODE and its credentials
	AccessToken      Secret        // LINE_CHANNEL_ACCESS_TOKEN_PARAM / LINE_CHANNEL_ACCESS_TOKEN (Auth.AccessToken)
	APIBaseURL       string        // LINE_API_BASE_URL, default https://api.line.me (Auth.APIBaseURL)
	HeldQueueURL     string        // HELD_QUEUE_URL: where pushes refused for the monthly limit are held; optional
	ChatOps          ChatOps       // operator actions from alert cards
	IdempotencyTable string        // IDEMPOTENCY_TABLE
	OpsTopicARN      string        // OPS_TOPIC_ARN (crash reports); optional
	FunctionTimeout  time.Duration // FUNCTION_TIMEOUT_SECONDS, default 30
	Concurrency      int           // WORKER_CONCURRENCY, default 4 records at once per batch
	KeepCompleted    time.Duration // IDEMPOTENCY_KEEP_HOURS, default 48, at least 24: how long a handled event is still skipped as a duplicate
	SessionTTL       time.Duration // SESSION_TTL_HOURS, default 24: how long a chat's session lives after its last save
	Probes           bool          // PROBES_ENABLED
	Metrics          string        // METRICS_NAMESPACE

	// RouteQueues is ROUTE_QUEUES, the worker's queue table: each route
	// queue bot.Queue names ("name=URL,..."); optional (routes run where
	// they are received without it).
	RouteQueues map[string]string
}

// LoadWorker reads and validates the worker's configuration.
func LoadWorker(env Getenv) (Worker, error) {
	r := reader{env: env}
	c := Worker{
		Auth:             r.lineAuth(),
		HeldQueueURL:     r.str("HELD_QUEUE_URL", ""),
		ChatOps:          r.chatOps(),
		IdempotencyTable: r.required("IDEMPOTENCY_TABLE", "the DynamoDB table that makes effects happen once"),
		OpsTopicARN:      r.str("OPS_TOPIC_ARN", ""),
		FunctionTimeout:  time.Duration(r.int("FUNCTION_TIMEOUT_SECONDS", 30, 1, 900)) * time.Second,
		Concurrency:      int(r.int("WORKER_CONCURRENCY", 4, 1, 10)),
		KeepCompleted:    time.Duration(r.int("IDEMPOTENCY_KEEP_HOURS", 48, 24, 24*366)) * time.Hour,
		SessionTTL:       time.Duration(r.int("SESSION_TTL_HOURS", 24, 1, 24*366)) * time.Hour,
		Probes:           r.bool("PROBES_ENABLED", false),
		Metrics:          r.str("METRICS_NAMESPACE", "linegate"),
		RouteQueues:      r.routeQueues("ROUTE_QUEUES"),
	}
	c.AccessToken, c.APIBaseURL = c.Auth.AccessToken, c.Auth.APIBaseURL
	return c, r.err()
}

// Paging is the configuration of a function that pages the operators (the
// notifier, the quota governor): how it reaches LINE, who receives its
// cards, the key that signs their buttons, the time zone they speak in,
// and where its metrics go.
type Paging struct {
	Auth      LineAuth // the channel access token: LINE_TOKEN_MODE and its credentials
	Operators []string // OPERATOR_LINE_IDS, comma-separated user or group IDs
	ChatOps   ChatOps  // the key that signs the cards' buttons
	TimeZone  string   // OPERATOR_TIMEZONE, default Asia/Tokyo: the cards' times (the quota's month)
	Metrics   string   // METRICS_NAMESPACE
}

// paging reads Paging; operators says whom OPERATOR_LINE_IDS names, for
// the problem reported when it is missing.
func (r *reader) paging(operators string) Paging {
	c := Paging{
		Auth:     r.lineAuth(),
		ChatOps:  r.chatOps(),
		TimeZone: r.str("OPERATOR_TIMEZONE", "Asia/Tokyo"),
		Metrics:  r.str("METRICS_NAMESPACE", "linegate"),
	}
	c.Operators = r.operators(r.required("OPERATOR_LINE_IDS", operators))
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		r.problem("OPERATOR_TIMEZONE %q is not a time zone (use an IANA name such as Asia/Tokyo): %v", c.TimeZone, err)
	}
	return c
}

// Notifier configures functions/notifier.
type Notifier struct {
	Paging
	AccessToken Secret // LINE_CHANNEL_ACCESS_TOKEN_PARAM / LINE_CHANNEL_ACCESS_TOKEN (Auth.AccessToken)
	APIBaseURL  string // LINE_API_BASE_URL (Auth.APIBaseURL)
	// StateTable (ALERT_STATE_TABLE) is the table of the paging ledger, the
	// idempotency table; "" pages without one (per invocation only).
	StateTable string
	// Window (ALERT_WINDOW, default 15m) is the coalescing window: one card
	// per problem per window, the rest in the window's digest.
	Window time.Duration
	// DLQs (ALERT_DLQS, comma-separated queue URLs) are the dead-letter
	// queues the sweep compares with the dead-letter notices.
	DLQs []string
	// Grace (ALERT_SWEEP_GRACE, default 3m) is how long a DLQ's depth must
	// disagree with the notices before the sweep acts on it.
	Grace time.Duration
}

// LoadNotifier reads and validates the notifier's configuration.
func LoadNotifier(env Getenv) (Notifier, error) {
	r := reader{env: env}
	c := Notifier{
		Paging:     r.paging("the LINE user or group IDs that receive alerts, comma-separated"),
		StateTable: r.str("ALERT_STATE_TABLE", ""),
		Window:     r.duration("ALERT_WINDOW", 15*time.Minute, time.Millisecond, 24*time.Hour),
		Grace:      r.duration("ALERT_SWEEP_GRACE", 3*time.Minute, time.Millisecond, 24*time.Hour),
	}
	for _, u := range strings.Split(r.env("ALERT_DLQS"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			r.url("ALERT_DLQS", u)
			c.DLQs = append(c.DLQs, u)
		}
	}
	c.AccessToken, c.APIBaseURL = c.Auth.AccessToken, c.Auth.APIBaseURL
	return c, r.err()
}

// Channel access token modes (LINE_TOKEN_MODE, the ChannelAccessTokenMode
// template parameter).
const (
	TokenLongLived = "long-lived" // the long-lived token in SSM, re-read on a 401
	TokenStateless = "stateless"  // minted from LINE_CHANNEL_ID and the channel secret, 15 minutes
	TokenV21       = "v2.1"       // minted with a JWT signed by the assertion signing key
)

// LineAuth is how a LINE-calling function gets its channel access token.
type LineAuth struct {
	Mode          string        // LINE_TOKEN_MODE: long-lived (default), stateless or v2.1
	AccessToken   Secret        // LINE_CHANNEL_ACCESS_TOKEN_PARAM / LINE_CHANNEL_ACCESS_TOKEN (long-lived)
	ChannelID     string        // LINE_CHANNEL_ID (stateless, v2.1)
	ChannelSecret Secret        // LINE_CHANNEL_SECRET_PARAM / LINE_CHANNEL_SECRET (stateless)
	AssertionKey  Secret        // LINE_ASSERTION_KEY_PARAM / LINE_ASSERTION_KEY: the private JWK with its kid (v2.1)
	TokenLife     time.Duration // LINE_TOKEN_LIFE_MINUTES, default 15: the lifetime asked of a v2.1 token
	APIBaseURL    string        // LINE_API_BASE_URL, default https://api.line.me
}

// operators splits and checks OPERATOR_LINE_IDS.
func (r *reader) operators(list string) []string {
	var out []string
	for _, id := range strings.Split(list, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		if !lineID.MatchString(id) {
			r.problem("OPERATOR_LINE_IDS: %q is not a LINE user, group or room ID (U, C or R followed by 32 lowercase hex digits; see README 'Operators')", id)
		}
		out = append(out, id)
	}
	return out
}

// lineAuth reads and checks what every LINE-calling function needs: the
// credentials of its token mode (from SSM, or plain values locally) and an
// http(s) API base URL.
func (r *reader) lineAuth() LineAuth {
	a := LineAuth{
		Mode:          r.str("LINE_TOKEN_MODE", TokenLongLived),
		AccessToken:   r.secret("LINE_CHANNEL_ACCESS_TOKEN"),
		ChannelID:     r.str("LINE_CHANNEL_ID", ""),
		ChannelSecret: r.secret("LINE_CHANNEL_SECRET"),
		AssertionKey:  r.secret("LINE_ASSERTION_KEY"),
		TokenLife:     time.Duration(r.int("LINE_TOKEN_LIFE_MINUTES", 15, 5, 30*24*60)) * time.Minute,
		APIBaseURL:    r.str("LINE_API_BASE_URL", "https://api.line.me"),
	}
	switch a.Mode {
	case TokenLongLived:
		if !a.AccessToken.IsSet() {
			r.problem("LINE_CHANNEL_ACCESS_TOKEN_PARAM is not set: name the SSM SecureString holding the channel access token (or set LINE_CHANNEL_ACCESS_TOKEN for a local run)")
		}
		r.localOnly(a.AccessToken, "LINE_CHANNEL_ACCESS_TOKEN")
	case TokenStateless, TokenV21:
		if a.ChannelID == "" {
			r.problem("LINE_CHANNEL_ID is not set: LINE_TOKEN_MODE=%s mints tokens for the channel ID (LINE Developers console, Basic settings)", a.Mode)
		}
		cred, name := a.ChannelSecret, "LINE_CHANNEL_SECRET"
		if a.Mode == TokenV21 {
			cred, name = a.AssertionKey, "LINE_ASSERTION_KEY"
		}
		if !cred.IsSet() {
			r.problem("%s_PARAM is not set: LINE_TOKEN_MODE=%s needs it to mint tokens (see README 'Channel access tokens')", name, a.Mode)
		}
		r.localOnly(cred, name)
	default:
		r.problem("LINE_TOKEN_MODE must be %s, %s or %s, got %q", TokenLongLived, TokenStateless, TokenV21, a.Mode)
	}
	r.url("LINE_API_BASE_URL", a.APIBaseURL)
	return a
}

// routeName is a route queue's name, as bot.Queue takes it.
var routeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// routeQueues reads a queue table: comma-separated name=URL pairs, each
// name once.
func (r *reader) routeQueues(name string) map[string]string {
	v := strings.TrimSpace(r.env(name))
	if v == "" {
		return nil
	}
	out := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		q, url, ok := strings.Cut(strings.TrimSpace(pair), "=")
		q, url = strings.TrimSpace(q), strings.TrimSpace(url)
		switch {
		case !ok || !routeName.MatchString(q):
			r.problem("%s must be name=URL pairs separated by commas (names of lowercase letters, digits, - and _), got %q", name, pair)
			continue
		case out[q] != "":
			r.problem("%s names the route queue %q twice", name, q)
			continue
		}
		r.url(name+" "+q, url)
		out[q] = url
	}
	return out
}

func (r *reader) url(name, v string) {
	if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		r.problem("%s must be an http(s) URL, got %q", name, v)
	}
}

// MetricsNamespace is the CloudWatch namespace of the webhook's metrics.
func (c Webhook) MetricsNamespace() string { return c.Metrics }

// MetricsNamespace is the CloudWatch namespace of the worker's metrics.
func (c Worker) MetricsNamespace() string { return c.Metrics }

// MetricsNamespace is the CloudWatch namespace of the function's metrics
// (the notifier's, the quota governor's).
func (c Paging) MetricsNamespace() string { return c.Metrics }
