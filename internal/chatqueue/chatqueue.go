// Package chatqueue is the webhook's second hand-off: every event that has a
// chat goes to the chat queue, an SQS FIFO queue whose message group is the
// chat, so the worker handles one chat's events one at a time and in the
// order LINE sent them (docs/adr/0001-per-chat-order.md).
//
// Order is what this package is about. Messages go out in the order given,
// in SendMessageBatch calls of at most 10 entries and 1 MiB made one after
// the other (SQS enqueues a FIFO batch's entries in their order); a batch
// that fails is sent again before the next one goes, and only its failed
// entries are re-sent. Retries happen here only (the SDK's retryer is off):
// whole-call errors the SDK calls retryable and entry failures that were not
// the sender's fault, with capped, jittered backoff inside a deadline well
// within LINE's webhook timeout.
package chatqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/awserr"
	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/batch"
	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/telemetry"
)

// SQS limits (SendMessageBatch): 10 entries a call, and a message's size
// and a call's summed size are both at most 1 MiB.
const (
	MaxEntries      = 10
	MaxMessageBytes = 1 << 20
	MaxBatchBytes   = 1 << 20
)

// ErrNotQueued is returned by Send when at least one message did not reach
// the queue. The webhook answers 500 so that LINE redelivers; messages that
// did reach it are dropped by SQS's deduplication (same
// MessageDeduplicationId within 5 minutes) and by the worker's idempotency.
var ErrNotQueued = errors.New("chatqueue: not every event was queued")

// Metric names the sender records through WithMetrics (docs/metrics.md
// lists every metric of every function).
//
// A Send the queue took whole on the first try records nothing: SQS's own
// NumberOfMessagesSent counts the messages, and the X-Ray trace of a sampled
// request times the call (docs/cost.md).
const (
	// MetricQueueRetries counts messages sent again after a retryable
	// failure, once per message and retry.
	MetricQueueRetries = "QueueRetries"
	// MetricQueueFailures counts messages that did not reach the queue.
	MetricQueueFailures = "QueueFailures"
)

// Message is one chat event for the queue.
type Message struct {
	Body        []byte // the EventBridge-shaped envelope (envelope.Encode)
	Group       string // MessageGroupId: the chat
	DedupID     string // MessageDeduplicationId: the webhookEventId
	TraceHeader string // the trace header (telemetry.TraceHeader) the worker links its record to
	EventID     string // webhookEventId, for logs only
}

// size is what SQS counts of the message against its limits: the body and
// the trace header attribute.
func (m Message) size() int {
	return len(m.Body) + len(m.TraceHeader) + len(telemetry.SQSTraceAttribute) + len("String")
}

// Failure describes one message that did not reach the queue.
type Failure struct {
	EventID string
	Code    string
	Message string
}

// Result reports what Send did. Queued + len(Failed) == messages given.
type Result struct {
	Queued  int
	Calls   int // SendMessageBatch calls made, retries included
	Retried int // messages sent again after a retryable failure
	Failed  []Failure
}

// batchSender is the one SQS call the sender makes: the SQS client and the
// in-memory cloud both satisfy it.
type batchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// noSDKRetries turns the SDK's retryer off: Send retries itself, so there is
// one retry layer.
func noSDKRetries(o *sqs.Options) { o.Retryer = aws.NopRetryer{} }

// Config tunes a Sender; the zero value takes every default.
type Config struct {
	// Deadline bounds a whole Send, retries included (default 800 ms, well
	// inside LINE's 1-2 s webhook timeout; the webhook gives it the bus's
	// deadline, as both run at once).
	Deadline time.Duration
	// Retry spaces the retries (default 25 ms doubling to 200 ms, equal
	// jitter, like the bus publisher's).
	Retry backoff.Policy
	// Log gets one line per message that was not queued (default
	// slog.Default()).
	Log *slog.Logger
	// Metrics records QueueRetries and QueueFailures (default discarded).
	Metrics telemetry.Recorder
	// Sleep waits between retries (default backoff.Sleep; tests).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Sender sends chat events to one FIFO queue, in order. It is safe for
// concurrent use; the order it keeps is the order of one Send's messages.
type Sender struct {
	api batchSender
	url string
	Config
}

// New returns a Sender for the FIFO queue at url.
func New(api batchSender, url string, cfg Config) *Sender {
	if cfg.Deadline <= 0 {
		cfg.Deadline = 800 * time.Millisecond
	}
	if cfg.Retry.First <= 0 {
		cfg.Retry = backoff.Policy{First: 25 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: backoff.Equal}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = telemetry.Discard
	}
	if cfg.Sleep == nil {
		cfg.Sleep = backoff.Sleep
	}
	return &Sender{api: api, url: url, Config: cfg}
}

// Send queues msgs in their order. It returns nil only when every message
// was accepted; otherwise the error wraps ErrNotQueued and Result.Failed
// names each message that did not make it (logged with its webhookEventId).
// After a message that failed, nothing later is sent: a later event of a
// chat never overtakes an earlier one that LINE will deliver again.
func (s *Sender) Send(ctx context.Context, msgs []Message) (Result, error) {
	var res Result
	if len(msgs) == 0 {
		return res, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.Deadline)
	defer cancel()
	for _, batch := range batches(msgs) {
		failed := s.sendBatch(ctx, msgs, batch, &res)
		if len(failed) == 0 {
			continue
		}
		// The rest was not sent: a later message must never overtake a
		// failed one of its chat.
		res.Failed = append(res.Failed, failed...)
		for _, i := range laterThan(batch, len(msgs)) {
			res.Failed = append(res.Failed, Failure{EventID: msgs[i].EventID, Code: "NotSent",
				Message: "not sent: an earlier event of this webhook was not queued"})
		}
		break
	}
	res.Queued = len(msgs) - len(res.Failed)
	s.account(ctx, res)
	if len(res.Failed) > 0 {
		first := res.Failed[0]
		return res, fmt.Errorf("%w: %d of %d events (%s: %s)", ErrNotQueued, len(res.Failed), len(msgs), first.Code, first.Message)
	}
	return res, nil
}

// account records a Send's metrics and logs each message that was not
// queued, with its webhookEventId.
func (s *Sender) account(ctx context.Context, res Result) {
	for _, f := range res.Failed {
		s.Log.ErrorContext(ctx, "event not queued", "webhookEventId", f.EventID, "code", f.Code, "reason", f.Message)
	}
	if len(res.Failed) > 0 {
		s.Metrics.Count(MetricQueueFailures, float64(len(res.Failed)))
	}
}

// laterThan lists the indexes after the batch's last one.
func laterThan(batch []int, n int) []int {
	var out []int
	for i := batch[len(batch)-1] + 1; i < n; i++ {
		out = append(out, i)
	}
	return out
}

// sendBatch sends one batch until every entry is queued, an entry fails for
// good, or the deadline passes; it returns the entries that did not make it.
func (s *Sender) sendBatch(ctx context.Context, msgs []Message, batch []int, res *Result) []Failure {
	pending := batch
	last := map[int]Failure{}
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			res.Retried += len(pending)
			s.Metrics.Count(MetricQueueRetries, float64(len(pending)))
			if s.Sleep(ctx, s.Retry.Delay(attempt-1)) != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		res.Calls++
		retry, failed := s.call(ctx, msgs, pending, last)
		if len(failed) > 0 {
			// Pending entries of this batch are reported with the ones
			// that failed for good: nothing after a failure is sent.
			for _, i := range retry {
				failed = append(failed, last[i])
			}
			return failed
		}
		if pending = retry; len(pending) == 0 {
			return nil
		}
	}
	var out []Failure
	for _, i := range pending {
		f := Failure{EventID: msgs[i].EventID, Code: awserr.CodeDeadline,
			Message: fmt.Sprintf("deadline (%v) passed before the queue accepted the event", s.Deadline)}
		if l, ok := last[i]; ok {
			f.Code, f.Message = l.Code, f.Message+"; last error: "+l.Message
		}
		out = append(out, f)
	}
	return out
}

// call makes one SendMessageBatch call for the pending entries, in order,
// and sorts the outcome into entries worth another try (their reason kept in
// last) and entries that failed for good.
func (s *Sender) call(ctx context.Context, msgs []Message, pending []int, last map[int]Failure) (retry []int, failed []Failure) {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.url), Entries: make([]sqstypes.SendMessageBatchRequestEntry, len(pending))}
	for k, i := range pending {
		m := msgs[i]
		e := sqstypes.SendMessageBatchRequestEntry{
			Id:                     aws.String(strconv.Itoa(i)),
			MessageBody:            aws.String(string(m.Body)),
			MessageGroupId:         aws.String(m.Group),
			MessageDeduplicationId: aws.String(m.DedupID),
		}
		if m.TraceHeader != "" {
			e.MessageSystemAttributes = map[string]sqstypes.MessageSystemAttributeValue{
				telemetry.SQSTraceAttribute: {DataType: aws.String("String"), StringValue: aws.String(m.TraceHeader)},
			}
		}
		in.Entries[k] = e
	}
	out, err := s.api.SendMessageBatch(ctx, in, noSDKRetries)
	if err == nil && out == nil {
		err = errors.New("send message batch: no output")
	}
	if err != nil {
		// The whole call failed: every entry shares its fate.
		code, msg, again := awserr.Classify(err)
		for _, i := range pending {
			f := Failure{EventID: msgs[i].EventID, Code: code, Message: msg}
			if again {
				retry = append(retry, i)
				if code != awserr.CodeDeadline || last[i].Code == "" {
					last[i] = f
				}
			} else {
				failed = append(failed, f)
			}
		}
		return retry, failed
	}
	byID := map[string]sqstypes.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		byID[aws.ToString(f.Id)] = f
	}
	ok := map[string]bool{}
	for _, r := range out.Successful {
		ok[aws.ToString(r.Id)] = true
	}
	for _, i := range pending {
		id := strconv.Itoa(i)
		fe, bad := byID[id]
		switch {
		case ok[id] && !bad:
			continue
		case !bad:
			// Neither listed: SQS's answer is incomplete; try again.
			last[i] = Failure{EventID: msgs[i].EventID, Code: "NoResult", Message: "the batch answer did not list this entry"}
			retry = append(retry, i)
		case fe.SenderFault:
			failed = append(failed, Failure{EventID: msgs[i].EventID, Code: aws.ToString(fe.Code), Message: aws.ToString(fe.Message)})
		default:
			// Not the sender's fault (throttling, an internal error): the
			// same entry can pass on another try.
			last[i] = Failure{EventID: msgs[i].EventID, Code: aws.ToString(fe.Code), Message: aws.ToString(fe.Message)}
			retry = append(retry, i)
		}
	}
	return retry, failed
}

// batches splits msgs, in order, into runs of at most MaxEntries messages
// whose summed size stays within MaxBatchBytes.
func batches(msgs []Message) [][]int {
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	return batch.Split(idx, MaxEntries, MaxBatchBytes, func(i int) int { return msgs[i].size() })
}

// maxID is the longest MessageGroupId or MessageDeduplicationId SQS takes.
const maxID = 128

// validID reports whether s is one SQS takes as a MessageGroupId or
// MessageDeduplicationId: 1 to 128 letters, digits and ASCII punctuation.
func validID(s string) bool {
	if s == "" || len(s) > maxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '!' || c > '~' { // ASCII letters, digits and punctuation lie between
			return false
		}
	}
	return true
}

// hashID is "sha256:" and the hex SHA-256 of b: 71 characters SQS takes.
func hashID(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// GroupID is the MessageGroupId of a chat: the chat's ID (a LINE user,
// group or room ID) when SQS takes it as is, its hash otherwise, so that
// every chat maps to one group.
func GroupID(chat string) string {
	if validID(chat) {
		return chat
	}
	return hashID([]byte(chat))
}

// ChannelGroupID is the MessageGroupId of a chat of a channel: GroupID of
// the chat for the default channel (a stack with one channel keeps its
// groups), GroupID of the chat scoped to the channel (channel.Scope) for a
// named one, so two channels' events of one user ID (one provider's user
// IDs are the same in all its channels) are two chats, each in order.
func ChannelGroupID(ch, chat string) string { return GroupID(channel.Scope(ch, chat)) }

// ChannelDedupID is the MessageDeduplicationId of an event of a channel:
// DedupID for the default channel, and for a named one the hash of the
// channel and that id, so that the same webhookEventId (or, for an event
// without one, the same bytes) on two channels is never dropped as a
// duplicate.
func ChannelDedupID(ch, webhookEventID string, rawEvent []byte) string {
	id := DedupID(webhookEventID, rawEvent)
	if ch == channel.Default {
		return id
	}
	return hashID([]byte(channel.Scope(ch, id)))
}

// DedupID is the MessageDeduplicationId of an event: its webhookEventId
// (stable across LINE's redeliveries) when SQS takes it as is, else the
// hash of the webhookEventId, or of the raw event for an event without one
// (the idempotency key's rule).
func DedupID(webhookEventID string, rawEvent []byte) string {
	switch {
	case validID(webhookEventID):
		return webhookEventID
	case webhookEventID != "":
		return hashID([]byte(webhookEventID))
	default:
		return hashID(rawEvent)
	}
}
