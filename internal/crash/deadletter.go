package crash

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// KindDeadLetter is the AttributeKind value of a dead-letter notice: the
// worker's word that it sent an event to a dead-letter queue.
const KindDeadLetter = "dead-letter"

// MaxDeadLetterError caps DeadLetter.Error: the card shows the first lines.
const MaxDeadLetterError = 1 << 10

// DeadLetter is the notice the worker publishes on the ops topic for each
// record it sends to a dead-letter queue itself (a bot.Permanent error, an
// undecodable record, a transient failure on the last receive SQS allows).
// A CloudWatch depth alarm fires once per OK → ALARM edge, so without the
// notice a second dead letter, after the first was acknowledged, would page
// nobody. The notifier coalesces notices per DLQ (or, for an event that
// panicked, with the crash reports of the same Signature) and window.
// Error has been through Scrub. Queue, Reason and Time are required.
type DeadLetter struct {
	// Queue is the name of the dead-letter queue the record went to.
	Queue string `json:"queue"`
	// Source is the name of the queue the record came from.
	Source string `json:"source,omitempty"`
	// Reason is the worker's reason: permanent, malformed or
	// retries-exhausted.
	Reason string `json:"reason"`
	// Error is the failure's text, scrubbed and capped at MaxDeadLetterError.
	Error string `json:"error,omitempty"`
	// EventType and WebhookEventID name the LINE event ("" when the record
	// could not be decoded).
	EventType      string `json:"eventType,omitempty"`
	WebhookEventID string `json:"webhookEventId,omitempty"`
	// Signature is the crash's stack signature (Signature) when the event's
	// handler panicked, "" otherwise; Frames are its frames, for the card.
	Signature string   `json:"signature,omitempty"`
	Frames    []string `json:"frames,omitempty"`
	// Function and Region name the worker that dead-lettered it.
	Function string `json:"function,omitempty"`
	Region   string `json:"region,omitempty"`
	// ReceiveCount is the record's SQS ApproximateReceiveCount.
	ReceiveCount int `json:"receiveCount,omitempty"`
	// Time is when the record was dead-lettered.
	Time time.Time `json:"time"`
}

// NewDeadLetter builds the notice of a record dead-lettered at now; err is
// the failure (scrubbed of secrets and of anything token-shaped); panicked,
// when not nil, is the crash report of the handler's panic, whose
// Signature and frames the notice carries.
func NewDeadLetter(queue, source, reason string, err error, panicked *Report, now time.Time, secrets ...string) DeadLetter {
	d := DeadLetter{Queue: queue, Source: source, Reason: reason, Time: now.UTC()}
	if err != nil {
		d.Error = capBytes(Scrub(err.Error(), secrets...), MaxDeadLetterError)
	}
	if panicked != nil {
		d.Signature = panicked.Signature()
		for _, f := range TopFrames(panicked.Stack, SignatureFrames) {
			d.Frames = append(d.Frames, f.Func+" "+f.Loc)
		}
		d.Function = panicked.Function
	}
	return d
}

// Marshal encodes the notice as the SNS message body.
func (d DeadLetter) Marshal() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("crash: marshal dead-letter notice: %w", err)
	}
	return b, nil
}

// ParseDeadLetter decodes an SNS message body written by Marshal. It fails,
// wrapping ErrInvalid, when the body is not a JSON object or Queue, Reason
// or Time is missing.
func ParseDeadLetter(b []byte) (DeadLetter, error) {
	var d DeadLetter
	if err := json.Unmarshal(b, &d); err != nil {
		return DeadLetter{}, fmt.Errorf("crash: parse dead-letter notice: %w: %v", ErrInvalid, err)
	}
	var missing []string
	if strings.TrimSpace(d.Queue) == "" {
		missing = append(missing, "queue")
	}
	if strings.TrimSpace(d.Reason) == "" {
		missing = append(missing, "reason")
	}
	if d.Time.IsZero() {
		missing = append(missing, "time")
	}
	if len(missing) > 0 {
		return DeadLetter{}, fmt.Errorf("crash: parse dead-letter notice: %w: missing %s", ErrInvalid, strings.Join(missing, ", "))
	}
	return d, nil
}
