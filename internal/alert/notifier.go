// Package alert is the notifier core: it turns the messages on the ops SNS
// topic — CloudWatch alarm notifications and linegate crash reports — into
// LINE Flex cards and pushes them to the operators.
//
// The ops topic delivers to an SQS queue (the envelope kept) that the
// notifier reads in large batches behind a batching window of a few seconds
// (docs/adr/0003-alert-coalescing.md), so one invocation sees a burst.
// functions/notifier is a thin adapter: it builds a LINE client that
// satisfies the pusher interface, calls New once and hands every batch to
// Notifier.HandleQueue. Nothing here imports the Lambda runtime.
//
// Push quota is precious, so the operator is paged once per problem: crash
// reports with the same stack signature (with the dead-letter notices of
// the events that crashed so), dead-letter notices of one DLQ and
// notifications of the same alarm become one card with their count and
// time span, and all cards of one invocation are pushed together, at most
// 5 messages per push (LINE's limit). With a paging ledger (WithLedger)
// that holds across invocations: one card per problem per window, the rest
// in a digest the sweep sends when the window has passed (ledger.go). Each
// push carries a retry key derived from the SNS message IDs behind it and
// the operator, so a redelivered batch makes LINE answer 409 instead of
// notifying twice.
package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/crash"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/telemetry"
)

// pusher sends messages to one LINE user, group or room. retryKey goes into
// X-Line-Retry-Key; an implementation treats LINE's 409 for a repeated key as
// success.
type pusher interface {
	Push(ctx context.Context, to string, retryKey string, msgs ...messaging_api.MessageInterface) error
}

// Metric names reported through WithMetrics (docs/metrics.md lists every
// metric of every function).
const (
	MetricRecords      = "AlertRecordsReceived"         // ops messages received
	MetricMalformed    = "AlertRecordsMalformed"        // records skipped as unreadable
	MetricAlarms       = "AlertAlarmCardsRendered"      // alarm cards rendered (one per alarm per batch)
	MetricCrashes      = "AlertCrashCardsRendered"      // crash cards rendered (one per stack signature per batch)
	MetricTextFallback = "AlertCardFallbacks"           // cards replaced by plain text (too big)
	MetricPushes       = "AlertPushesSent"              // successful pushes
	MetricPushErrors   = "AlertPushesFailed"            // failed pushes
	MetricPushDuration = "AlertPushLatency"             // duration of one push
	MetricDeadLetters  = "AlertDeadLetterCardsRendered" // dead-letter cards rendered (one per DLQ per batch)
	MetricHeld         = "AlertReportsHeld"             // reports held by the ledger for a digest
	MetricDigests      = "AlertDigestCardsRendered"     // digest cards the sweep rendered
	MetricLedgerErrors = "AlertLedgerFailures"          // ledger reads or writes that failed (paged unsuppressed)
	MetricUnannounced  = "AlertDeadLettersUnannounced"  // dead letters the sweep found with no notice
)

// ErrNoOperators is returned by New when there is nobody to notify.
var ErrNoOperators = errors.New("alert: no operator IDs")

// ErrBadOperator is returned by New for an ID that is not a LINE user, group
// or room ID ("U", "C" or "R" followed by 32 lowercase hex digits).
var ErrBadOperator = errors.New("alert: invalid operator ID")

// operatorRE is LINE's ID format: "U" (a user), "C" (a group) or "R" (a
// room) and 32 lowercase hex digits. `linegate local`'s placeholder operator,
// U0000000000000000000000000000cafe, has the same shape.
var operatorRE = regexp.MustCompile(`^[UCR][0-9a-f]{32}$`)

// retryKeyNamespace is the fixed UUID namespace of push retry keys. Changing
// it changes every key, which would let a redelivered event notify twice.
var retryKeyNamespace = uuid.MustParse("6f1d1c3e-5a7b-4f0e-9a57-1b0e3c2d4a68")

// DefaultTimeZone is the time zone alert times are shown in unless
// WithTimeZone says otherwise.
const DefaultTimeZone = "Asia/Tokyo"

// Notifier renders ops messages and pushes them to the operators. It is safe
// for concurrent use if its pusher is.
type Notifier struct {
	push      pusher
	operators []string
	loc       *time.Location
	region    string
	log       *slog.Logger
	metrics   telemetry.Recorder
	flexLimit int // bytes of JSON per Flex message; a variable only for tests
	signer    *postback.Signer
	buttonTTL time.Duration
	dlqs      []string
	ledger    *ledger       // nil: coalescing per invocation only
	sweepQ    queueDepth    // the DLQs' depths for Sweep; nil: none
	sweepDLQs []string      // their URLs
	grace     time.Duration // how long a depth must disagree with the notices before it counts
	now       func() time.Time
}

// WithLedger keeps the paging ledger in store (the idempotency table):
// one card per ledger key and window, the rest held for the digest that
// Sweep sends once the window has passed (window <= 0: DefaultWindow).
func WithLedger(store LedgerStore, window time.Duration) Option {
	return func(n *Notifier) {
		if store == nil {
			return
		}
		if window <= 0 {
			window = DefaultWindow
		}
		n.ledger = &ledger{store: store, window: window}
	}
}

// WithClock sets the notifier's clock (the ledger's windows; tests).
func WithClock(now func() time.Time) Option {
	return func(n *Notifier) {
		if now != nil {
			n.now = now
		}
	}
}

// KindHeld is the linegate-kind attribute value of the worker's notice
// that pushed results are held (pkg/held.KindHeld).
const KindHeld = "held-results"

// WithButtons puts signed postback buttons on the cards (ChatOps): on an
// ALARM card Silence 1 h and Acknowledge, plus Redrive when the alarm
// watches one of dlqs; on a held-results card Resend held. Each button's
// data is signed with signer and valid for ttl.
func WithButtons(signer *postback.Signer, ttl time.Duration, dlqs []string) Option {
	return func(n *Notifier) { n.signer, n.buttonTTL, n.dlqs = signer, ttl, dlqs }
}

// Option configures a Notifier.
type Option func(*Notifier)

// WithTimeZone shows alarm and crash times in loc (default Asia/Tokyo). A nil
// loc is ignored.
func WithTimeZone(loc *time.Location) Option {
	return func(n *Notifier) {
		if loc != nil {
			n.loc = loc
		}
	}
}

// WithRegion sets the AWS region of console links. By default the region
// comes from the alarm ARN (or the crash report), then from the topic ARN.
func WithRegion(region string) Option { return func(n *Notifier) { n.region = region } }

// WithLogger sets the structured logger (default: JSON to stderr). The
// notifier never logs message text, reasons, stacks or tokens.
func WithLogger(l *slog.Logger) Option {
	return func(n *Notifier) {
		if l != nil {
			n.log = l
		}
	}
}

// WithMetrics sends counters and push timings (the Metric* names) to r.
func WithMetrics(r telemetry.Recorder) Option {
	return func(n *Notifier) {
		if r != nil {
			n.metrics = r
		}
	}
}

// New returns a Notifier that pushes through p to every operator (LINE user,
// group or room IDs; duplicates are pushed once). It fails with
// ErrNoOperators or ErrBadOperator, and when p is nil or an explicit region
// is not an AWS region name.
//
// The default time zone is loaded with time.LoadLocation; a binary that must
// not depend on the host's zoneinfo imports _ "time/tzdata". Without either,
// Asia/Tokyo falls back to a fixed UTC+9 zone (Japan has no daylight saving).
func New(p pusher, operators []string, opts ...Option) (*Notifier, error) {
	if p == nil {
		return nil, errors.New("alert: nil pusher")
	}
	n := &Notifier{
		push:      p,
		loc:       defaultLocation(),
		log:       slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		metrics:   telemetry.Discard,
		flexLimit: MaxFlexBytes,
		now:       time.Now,
	}
	seen := map[string]bool{}
	for _, id := range operators {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if !operatorRE.MatchString(id) {
			return nil, fmt.Errorf("%w: %q", ErrBadOperator, id)
		}
		if !seen[id] {
			seen[id] = true
			n.operators = append(n.operators, id)
		}
	}
	if len(n.operators) == 0 {
		return nil, ErrNoOperators
	}
	for _, opt := range opts {
		opt(n)
	}
	if n.ledger != nil {
		n.ledger.now = n.now
	}
	if n.region != "" && !regionRE.MatchString(n.region) {
		return nil, fmt.Errorf("alert: region %q is not an AWS region name", n.region)
	}
	return n, nil
}

func defaultLocation() *time.Location {
	if loc, err := time.LoadLocation(DefaultTimeZone); err == nil {
		return loc
	}
	return time.FixedZone("JST", 9*60*60)
}

// rendered is one group turned into one LINE message.
type rendered struct {
	id      string   // the identity of the group in retry keys
	records []string // the queue records behind it
	msg     messaging_api.MessageInterface
}

// inbound is one readable ops message and the queue record it came in ("" for
// a direct SNS delivery).
type inbound struct {
	msg    opsMessage
	record string
}

// HandleQueue handles a batch from the ops queue (SQS records whose bodies
// are SNS notifications of the ops topic, the envelope kept): it coalesces
// the batch — crash reports by stack signature, alarms by alarm name — and
// pushes one card per group to every operator, at most MaxMessagesPerPush
// per push, with the group's count and time span on it.
//
// A record that cannot be read (not an SNS notification, not a CloudWatch
// alarm, a crash report that fails crash.Parse, an unknown linegate-kind) is
// logged and skipped: retrying it can never help. A failed push lists the
// records behind its cards in the response's BatchItemFailures, so SQS
// delivers only those again (the event source mapping must report batch item
// failures); redelivered together, they regroup into the same cards under the
// same retry keys, and operators already notified are not notified twice.
// The error is always nil.
func (n *Notifier) HandleQueue(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	n.metrics.Count(MetricRecords, float64(len(ev.Records)))
	var in []inbound
	for i, rec := range ev.Records {
		m, err := parseQueueRecord(rec)
		if err != nil {
			n.skip(ctx, i, rec.MessageId, err)
			continue
		}
		in = append(in, inbound{msg: m, record: rec.MessageId})
	}
	failed, _ := n.deliver(ctx, in, len(ev.Records))
	var resp events.SQSEventResponse
	for _, rec := range ev.Records {
		if failed[rec.MessageId] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

// Handle handles an SNS event delivered straight to the function (a topic
// subscription without the ops queue): the same cards as HandleQueue, with
// the event's records coalesced.
//
// A failed push makes Handle return an error naming the operator (all
// failures joined with errors.Join) so that SNS/Lambda retries the event;
// the remaining pushes are still attempted. On the retry, pushes that had
// succeeded carry the same retry keys and are not delivered twice.
// Unreadable records are skipped as in HandleQueue; they never make Handle
// fail.
func (n *Notifier) Handle(ctx context.Context, ev events.SNSEvent) error {
	n.metrics.Count(MetricRecords, float64(len(ev.Records)))
	var in []inbound
	for i, rec := range ev.Records {
		m, err := parseRecord(rec)
		if err != nil {
			n.skip(ctx, i, rec.SNS.MessageID, err)
			continue
		}
		in = append(in, inbound{msg: m, record: "sns:" + m.id})
	}
	_, err := n.deliver(ctx, in, len(ev.Records))
	return err
}

// skip logs and counts an unreadable record.
func (n *Notifier) skip(ctx context.Context, i int, id string, err error) {
	n.metrics.Count(MetricMalformed, 1)
	n.log.ErrorContext(ctx, "alert: skipping unreadable record", "record", i, "messageId", id, "error", err.Error())
}

// deliver coalesces the readable messages of one invocation, lets the
// ledger (when there is one) decide which groups page now, renders a card
// per group and pushes the cards to every operator. It returns the records
// behind cards some push failed for, and the push failures joined; a card
// that failed is taken back from the ledger, so its retry pages again.
func (n *Notifier) deliver(ctx context.Context, in []inbound, records int) (map[string]bool, error) {
	groups, adms := n.admit(ctx, in)
	if len(groups) == 0 {
		if records > 0 && len(in) == 0 {
			n.log.WarnContext(ctx, "alert: no readable record; nothing pushed", "records", records)
		}
		return nil, nil
	}
	failed, err := n.pushGroups(ctx, groups, records)
	n.undo(ctx, adms, failed)
	return failed, err
}

// admit coalesces in and, with a ledger, keeps the groups that page now
// (the rest are held or folded, and their records done). Without a ledger,
// or when it cannot be read or written, every group pages.
func (n *Notifier) admit(ctx context.Context, in []inbound) ([]*group, []*admitted) {
	if n.ledger == nil || len(in) == 0 {
		return coalesce(in), nil
	}
	var out []*group
	var adms []*admitted
	held := 0
	err := n.ledger.update(ctx, func(st *ledgerState) error {
		out, adms, held = nil, nil, 0
		now := n.ledger.now()
		var fresh []inbound
		var ids []string
		for _, x := range in {
			if !st.seen(x.msg.id) {
				fresh = append(fresh, x)
				ids = append(ids, x.msg.id)
			}
		}
		for _, g := range coalesce(fresh) {
			for q, c := range g.dlqs {
				st.dlq(q).Expected += c
			}
			v, a := n.ledger.decide(st, g, now)
			switch v {
			case pageNow:
				out, adms = append(out, g), append(adms, a)
			default:
				held += g.count
			}
		}
		st.remember(slices.Compact(ids)...)
		st.prune(now, n.ledger.window)
		return nil
	})
	if err != nil {
		n.metrics.Count(MetricLedgerErrors, 1)
		n.log.ErrorContext(ctx, "alert: paging ledger unavailable: paging every group", "error", err.Error())
		return coalesce(in), nil
	}
	if held > 0 {
		n.metrics.Count(MetricHeld, float64(held))
		n.log.InfoContext(ctx, "alert: reports held for the window's digest", "held", held)
	}
	return out, adms
}

// undo takes the admitted groups whose push failed back from the ledger.
func (n *Notifier) undo(ctx context.Context, adms []*admitted, failed map[string]bool) {
	var back []*admitted
	for _, a := range adms {
		if a != nil && slices.ContainsFunc(a.g.records, func(r string) bool { return failed[r] }) {
			back = append(back, a)
		}
	}
	if len(back) == 0 || n.ledger == nil {
		return
	}
	err := n.ledger.update(context.WithoutCancel(ctx), func(st *ledgerState) error {
		for _, a := range back {
			st.undo(a)
			st.forget(a.g.ids...)
			for q, c := range a.g.dlqs {
				st.dlq(q).Expected -= c
			}
			if a.g.msg.unannounced != nil {
				st.dlq(a.g.msg.unannounced.Queue).Expected -= a.g.msg.unannounced.Count
			}
		}
		return nil
	})
	if err != nil {
		n.metrics.Count(MetricLedgerErrors, 1)
		n.log.ErrorContext(ctx, "alert: a failed card was not taken back from the ledger: its reports wait for the digest", "error", err.Error())
	}
}

// pushGroups renders a card per group and pushes the cards to every operator.
func (n *Notifier) pushGroups(ctx context.Context, groups []*group, records int) (map[string]bool, error) {
	var msgs []rendered
	heldOnly := true
	for _, g := range groups {
		m, fallback := n.render(g)
		if fallback {
			n.metrics.Count(MetricTextFallback, 1)
			n.log.WarnContext(ctx, "alert: card too large, sending plain text",
				"messageId", g.msg.id, "kind", g.msg.kind())
		}
		switch {
		case g.digest:
			n.metrics.Count(MetricDigests, 1)
		case g.msg.alarm != nil:
			n.metrics.Count(MetricAlarms, 1)
		case g.msg.crash != nil:
			n.metrics.Count(MetricCrashes, 1)
		case g.msg.deadLetter != nil, g.msg.unannounced != nil:
			n.metrics.Count(MetricDeadLetters, 1)
		}
		heldOnly = heldOnly && g.msg.held != nil
		msgs = append(msgs, rendered{id: strings.Join(g.ids, "\x00"), records: g.records, msg: m})
	}
	return n.send(ctx, msgs, heldOnly, records)
}

// send pushes msgs to every operator, at most MaxMessagesPerPush per push,
// each push with a retry key derived from the operator and its messages. It
// returns the records behind the messages of failed pushes, and the failures
// joined. heldOnly says the messages are held notices, which LINE cannot
// carry when the quota is spent (the AlertEmail subscription does): such a
// refusal is not an error to retry.
func (n *Notifier) send(ctx context.Context, msgs []rendered, heldOnly bool, records int) (map[string]bool, error) {
	failed := map[string]bool{}
	var errs []error
	pushes := 0
	for _, op := range n.operators {
		for start := 0; start < len(msgs); start += MaxMessagesPerPush {
			chunk := msgs[start:min(start+MaxMessagesPerPush, len(msgs))]
			key := retryKey(op, chunk)
			batch := make([]messaging_api.MessageInterface, len(chunk))
			for i, r := range chunk {
				batch[i] = r.msg
			}
			began := time.Now()
			err := n.push.Push(ctx, op, key, batch...)
			n.metrics.Duration(MetricPushDuration, time.Since(began))
			if err != nil && heldOnly && errors.Is(err, lineapi.ErrMonthlyLimit) {
				// LINE cannot carry the held notice while the quota is spent:
				// the AlertEmail subscription does; a retry would fail alike.
				n.metrics.Count(MetricPushErrors, 1)
				n.log.WarnContext(ctx, "alert: held notice not pushed: LINE's monthly limit; email carries it", "operator", op)
				continue
			}
			if err != nil {
				n.metrics.Count(MetricPushErrors, 1)
				n.log.ErrorContext(ctx, "alert: push failed",
					"operator", op, "messages", len(batch), "retryKey", key, "error", crash.Scrub(err.Error()))
				errs = append(errs, fmt.Errorf("alert: push %d message(s) to operator %s: %w", len(batch), op, err))
				for _, r := range chunk {
					for _, id := range r.records {
						failed[id] = true
					}
				}
				continue
			}
			pushes++
			n.metrics.Count(MetricPushes, 1)
		}
	}
	n.log.InfoContext(ctx, "alert: notified",
		"records", records, "messages", len(msgs), "operators", len(n.operators),
		"pushes", pushes, "failedPushes", len(errs))
	return failed, errors.Join(errs...)
}

// retryKey is a UUID (v5) derived from the operator and the identities of the
// records in the chunk: the same chunk to another operator gets another key,
// the same chunk redelivered gets the same key.
func retryKey(operator string, chunk []rendered) string {
	var b strings.Builder
	b.WriteString(operator)
	for _, r := range chunk {
		b.WriteByte(0)
		b.WriteString(r.id)
	}
	return uuid.NewSHA1(retryKeyNamespace, []byte(b.String())).String()
}
