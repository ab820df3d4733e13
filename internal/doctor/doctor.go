// Package doctor checks a linegate deployment end to end and says, for
// every check that fails, how to fix it: the LINE side (the channel's
// webhook URL and a test delivery, webhook redelivery, bot info, that the
// configured channel secret verifies a signed test body, the month's quota)
// and the AWS side (dead-letter queue depths, alarm states, the ops topic's
// subscriptions). The same checks run against `linegate local` and against
// a deployed stack; only the Target differs. A stack with several channels
// is checked one channel at a time: the Target's Channel names the one
// whose LINE side (its token, its webhook at /webhook/NAME, its secret) is
// checked; the AWS side is the stack's, shared by every channel.
package doctor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/linegate/linegate/internal/lineapi"
)

// Status is a check's verdict.
type Status string

// The verdicts. Only Fail makes Run's report fail: Skip is a check that
// cannot be made against the target (LINE has no API for redelivery), Warn
// one that found something advised missing.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
	// Warn is a check that found something strongly advised missing (no
	// AlertEmail); it does not fail the report.
	Warn Status = "WARN"
)

// Result is one check's outcome.
type Result struct {
	Check  string
	Status Status
	Detail string // what was seen
	Fix    string // what to do, on Fail (and Skip)
}

// Queue is one dead-letter queue's depth.
type Queue struct {
	Name    string
	Visible int
	// Redrive is the command that empties it back to work.
	Redrive string
}

// Alarm is one alarm's state.
type Alarm struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	ActionsMuted bool   `json:"silenced"` // as /_local/alarms reports it
}

// Subscription is one subscriber of the ops or the escalation topic.
type Subscription struct {
	Protocol string // lambda, email, sqs, ...
	Endpoint string
	Pending  bool // an email subscription not confirmed yet
	Filtered bool // a filter policy limits what it gets (known locally)
}

// Target is a deployment to check: a linegate local or a stack.
type Target interface {
	// Describe names the target for the report's first line.
	Describe() string
	// Line is a LINE client with the deployment's credentials.
	Line() *lineapi.Client
	// WebhookURL is the URL LINE must post to.
	WebhookURL() string
	// Redelivery reports whether webhook redelivery is on; known is false
	// when the target cannot tell (LINE's API does not expose it).
	Redelivery(ctx context.Context) (on, known bool, err error)
	// PostSigned signs a verify body ("events": [], for destination: the
	// bot's user ID, which a webhook with a bot user ID check requires)
	// with the configured channel secret, posts it to the webhook and
	// returns the status.
	PostSigned(ctx context.Context, destination string) (int, error)
	// DLQs are the target's dead-letter queues, found where the template
	// or AWS defines them (redrive policies, rule targets' dead-letter
	// configs), with their depth.
	DLQs(ctx context.Context) ([]Queue, error)
	Alarms(ctx context.Context) ([]Alarm, error)
	OpsSubscriptions(ctx context.Context) ([]Subscription, error)
	// EscalationSubscriptions are the escalation topic's subscribers: the
	// AlertEmail address the alert path's own alarms reach outside LINE.
	EscalationSubscriptions(ctx context.Context) ([]Subscription, error)
}

// Run makes every check against t, in order.
func Run(ctx context.Context, t Target) []Result {
	var out []Result
	out = append(out, webhookChecks(ctx, t)...)
	bot, botUserID := botInfo(ctx, t)
	out = append(out, redelivery(ctx, t), bot, signedBody(ctx, t, botUserID), quota(ctx, t))
	out = append(out, dlqs(ctx, t), alarms(ctx, t), subscriptions(ctx, t), alertEmail(ctx, t))
	return out
}

// Failed reports whether any check failed.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// Print writes the report: one line per check, the fix under each failure.
func Print(w io.Writer, target string, rs []Result) {
	fmt.Fprintf(w, "linegate doctor: %s\n", target)
	passed := 0
	for _, r := range rs {
		fmt.Fprintf(w, "%-4s  %-22s %s\n", r.Status, r.Check, r.Detail)
		if r.Fix != "" && r.Status != Pass {
			fmt.Fprintf(w, "      fix: %s\n", r.Fix)
		}
		if r.Status != Fail {
			passed++
		}
	}
	fmt.Fprintf(w, "%d of %d checks passed\n", passed, len(rs))
}

func webhookChecks(ctx context.Context, t Target) []Result {
	want := t.WebhookURL()
	ep, err := t.Line().WebhookEndpoint(ctx)
	r := Result{Check: "webhook endpoint"}
	switch {
	case err != nil:
		r.Status, r.Detail = Fail, "not set ("+short(err)+")"
		r.Fix = fmt.Sprintf("set the webhook URL to %s in the LINE Developers console (Messaging API tab) and turn \"Use webhook\" on", want)
	case ep.Endpoint != want:
		r.Status, r.Detail = Fail, fmt.Sprintf("%q, not this deployment's %s", ep.Endpoint, want)
		r.Fix = fmt.Sprintf("set the webhook URL to %s in the LINE Developers console", want)
	case !ep.Active:
		r.Status, r.Detail = Fail, ep.Endpoint+", but \"Use webhook\" is off"
		r.Fix = "turn \"Use webhook\" on in the LINE Developers console (Messaging API tab)"
	default:
		r.Status, r.Detail = Pass, ep.Endpoint+", in use"
	}
	test := Result{Check: "test delivery"}
	res, err := t.Line().TestWebhook(ctx, "")
	switch {
	case err != nil:
		test.Status, test.Detail = Fail, short(err)
		test.Fix = "set the webhook URL first (see above), then press Verify in the console"
	case !res.Success:
		test.Status, test.Detail = Fail, fmt.Sprintf("the webhook answered %d %s", res.StatusCode, res.Reason)
		test.Fix = "check the webhook function's logs; a 401 means the deployed channel secret is not this channel's"
	default:
		test.Status, test.Detail = Pass, fmt.Sprintf("LINE's test webhook answered %d", res.StatusCode)
	}
	return []Result{r, test}
}

func redelivery(ctx context.Context, t Target) Result {
	r := Result{Check: "webhook redelivery"}
	on, known, err := t.Redelivery(ctx)
	fix := "turn \"Webhook redelivery\" on in the LINE Developers console (Messaging API tab): linegate answers 500 when the bus did not take an event and relies on LINE sending it again"
	switch {
	case err != nil:
		r.Status, r.Detail, r.Fix = Fail, short(err), fix
	case !known:
		r.Status, r.Detail, r.Fix = Skip, "LINE's API does not expose this setting", "check it in the console: "+fix[len("turn "):]
	case !on:
		r.Status, r.Detail, r.Fix = Fail, "off", fix
	default:
		r.Status, r.Detail = Pass, "on"
	}
	return r
}

// botInfo checks the token with LINE's bot info, and returns the bot's
// user ID ("" when it could not be read).
func botInfo(ctx context.Context, t Target) (Result, string) {
	r := Result{Check: "bot info"}
	info, err := t.Line().BotInfo(ctx)
	if err != nil {
		r.Status, r.Detail = Fail, short(err)
		r.Fix = "the channel access token is refused: check ChannelAccessTokenMode and its credentials in SSM (README 'Channel access tokens')"
		return r, ""
	}
	r.Status, r.Detail = Pass, fmt.Sprintf("%s (%s, %s)", info.DisplayName, info.BasicId, info.UserId)
	return r, info.UserId
}

// unknownBot is the verify body's destination when the bot's user ID could
// not be read (a webhook with a bot user ID check then refuses it: the bot
// info check has already failed).
const unknownBot = "Udoctor"

func signedBody(ctx context.Context, t Target, botUserID string) Result {
	if botUserID == "" {
		botUserID = unknownBot
	}
	status, err := t.PostSigned(ctx, botUserID)
	if err != nil {
		return Result{Check: "channel secret", Status: Fail, Detail: short(err),
			Fix: "the webhook could not be reached or the secret read: check the stack's WebhookUrl output and ChannelSecretParameter"}
	}
	if status != 200 {
		return Result{Check: "channel secret", Status: Fail, Detail: fmt.Sprintf("a body signed with the configured secret got %d", status),
			Fix: "the webhook refuses the configured secret: store the channel secret (LINE Developers console, Basic settings) in ChannelSecretParameter and start new webhook instances"}
	}
	return Result{Check: "channel secret", Status: Pass, Detail: "a body signed with the configured secret is accepted (200)"}
}

func quota(ctx context.Context, t Target) Result {
	r := Result{Check: "push quota"}
	q, err := t.Line().Quota(ctx)
	switch {
	case err != nil:
		r.Status, r.Detail, r.Fix = Fail, short(err), "the quota could not be read: check the channel access token"
	case !q.Limited:
		r.Status, r.Detail = Pass, fmt.Sprintf("%d messages sent this month, no limit set", q.Used)
	case q.Remaining() == 0:
		r.Status, r.Detail = Fail, fmt.Sprintf("spent: %d of %d", q.Used, q.Limit)
		r.Fix = "pushes are being held: raise the limit in LINE Official Account Manager, then run `linegate resend-held`"
	default:
		r.Status, r.Detail = Pass, fmt.Sprintf("%d of %d used (%.0f%%)", q.Used, q.Limit, float64(q.Used)*100/float64(max(q.Limit, 1)))
	}
	return r
}

func dlqs(ctx context.Context, t Target) Result {
	r := Result{Check: "dead-letter queues"}
	qs, err := t.DLQs(ctx)
	if err != nil {
		return unreadable(r, err)
	}
	var full, fixes []string
	for _, q := range qs {
		if q.Visible > 0 {
			full = append(full, fmt.Sprintf("%s holds %d", q.Name, q.Visible))
			fixes = append(fixes, q.Redrive)
		}
	}
	if len(full) > 0 {
		r.Status, r.Detail = Fail, strings.Join(full, "; ")
		r.Fix = "find the cause (crash cards, the worker's logs by webhookEventId), deploy the fix, then: " + strings.Join(fixes, "; ")
		return r
	}
	r.Status, r.Detail = Pass, fmt.Sprintf("%d queue(s), all empty", len(qs))
	return r
}

func alarms(ctx context.Context, t Target) Result {
	as, err := t.Alarms(ctx)
	if err != nil {
		return unreadable(Result{Check: "alarms"}, err)
	}
	named := func(keep func(Alarm) bool) []string {
		var out []string
		for _, a := range as {
			if keep(a) {
				out = append(out, a.Name)
			}
		}
		return out
	}
	firing := named(func(a Alarm) bool { return a.State == "ALARM" })
	r := Result{Check: "alarms", Status: Pass, Detail: fmt.Sprintf("%d alarm(s), none in ALARM", len(as))}
	if len(firing) > 0 {
		r.Status, r.Detail = Fail, "in ALARM: "+strings.Join(firing, ", ")
		r.Fix = "see README 'Alarms and what to do' for each alarm"
	}
	if muted := named(func(a Alarm) bool { return a.ActionsMuted }); len(muted) > 0 {
		r.Detail += "; silenced: " + strings.Join(muted, ", ")
	}
	return r
}

func subscriptions(ctx context.Context, t Target) Result {
	r := Result{Check: "ops topic"}
	subs, err := t.OpsSubscriptions(ctx)
	if err != nil {
		return unreadable(r, err)
	}
	var notifier bool
	var pending, seen []string
	for _, s := range subs {
		seen = append(seen, s.Protocol)
		// The notifier is subscribed directly, or reads the OpsQueue the
		// topic delivers to (docs/adr/0003).
		if s.Protocol == "lambda" || s.Protocol == "sqs" && strings.Contains(s.Endpoint, "OpsQueue") {
			notifier = true
		}
		if s.Pending {
			pending = append(pending, s.Endpoint)
		}
	}
	switch {
	case !notifier:
		r.Status, r.Detail = Fail, "neither the notifier nor the OpsQueue is subscribed ("+strings.Join(seen, ", ")+")"
		r.Fix = "the ops topic reaches no notifier (alerts are lost): redeploy the stack"
	case len(pending) > 0:
		r.Status, r.Detail = Fail, "email subscription not confirmed: "+strings.Join(pending, ", ")
		r.Fix = "open the confirmation email SNS sent to AlertEmail and confirm: held-result notices reach you only by email when LINE cannot carry them"
	default:
		r.Status, r.Detail = Pass, fmt.Sprintf("%d subscription(s): %s", len(subs), strings.Join(seen, ", "))
	}
	return r
}

// alertEmail warns when no email address hears the escalation topic: when
// LINE refuses the notifier (a revoked token, the quota spent), the alert
// path's own alarms would reach nobody.
func alertEmail(ctx context.Context, t Target) Result {
	r := Result{Check: "alert email"}
	subs, err := t.EscalationSubscriptions(ctx)
	if err != nil {
		return unreadable(r, err)
	}
	var confirmed, pending []string
	for _, s := range subs {
		switch {
		case s.Protocol != "email" || s.Filtered:
		case s.Pending:
			pending = append(pending, s.Endpoint)
		default:
			confirmed = append(confirmed, s.Endpoint)
		}
	}
	switch {
	case len(pending) > 0:
		r.Status, r.Detail = Fail, "escalation email not confirmed: "+strings.Join(pending, ", ")
		r.Fix = "open the confirmation email SNS sent to AlertEmail and confirm: until then the alert path's own failures reach nobody"
	case len(confirmed) == 0:
		r.Status, r.Detail = Warn, "no AlertEmail: when LINE refuses the notifier (a revoked token, the quota spent), its alarms reach nobody"
		r.Fix = "strongly advised: deploy with AlertEmail=you@example.com (`linegate local`: ALERT_EMAIL=...), then confirm SNS's email"
	default:
		r.Status, r.Detail = Pass, "the escalation topic emails "+strings.Join(confirmed, ", ")+" with no filter"
	}
	return r
}

// unreadable fails r because the AWS side could not be read.
func unreadable(r Result, err error) Result {
	r.Status, r.Detail, r.Fix = Fail, short(err), "check your AWS credentials, region and the stack name"
	return r
}

// short is an error's message without the call chain's prefixes.
func short(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
