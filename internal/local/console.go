package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/telemetry"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// printer writes the human-readable console of `linegate local`: what
// happened, never message text or tokens. Every line is one line: control
// characters in what it prints (an event type is whatever the request said)
// are escaped, so no input can forge or hide a console line.
//
// A worker line about an event never precedes the webhook line of the
// request that brought it: the bus accepts an event inside the webhook's
// invocation, before a worker can receive it, and the printer holds that
// event's worker lines until the webhook line is out.
type printer struct {
	mu   sync.Mutex
	w    io.Writer
	held map[string]*heldLines // by webhookEventId
}

// heldLines are the lines about one event waiting for the webhook line of
// every request (refs) that is bringing it.
type heldLines struct {
	refs  int
	lines []string
}

func newPrinter(w io.Writer) *printer { return &printer{w: w, held: map[string]*heldLines{}} }

func (p *printer) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeLocked(stamp(format, args...))
}

func stamp(format string, args ...any) string {
	return time.Now().Format("15:04:05.000") + "  " + escapeControl(fmt.Sprintf(format, args...))
}

func (p *printer) writeLocked(line string) { _, _ = io.WriteString(p.w, line+"\n") }

// eventLine prints a line about event id, or holds it while the webhook
// line of the request that brought the event is not out yet.
func (p *printer) eventLine(id, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := stamp(format, args...)
	if h, ok := p.held[id]; ok {
		h.lines = append(h.lines, l)
		return
	}
	p.writeLocked(l)
}

// hold makes lines about id wait for release.
func (p *printer) hold(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[id]
	if !ok {
		h = &heldLines{}
		p.held[id] = h
	}
	h.refs++
}

// release prints the webhook line, then whatever was held for ids.
func (p *printer) release(ids []string, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeLocked(stamp(format, args...))
	for _, id := range ids {
		h, ok := p.held[id]
		if !ok {
			continue
		}
		if h.refs--; h.refs > 0 {
			continue
		}
		for _, l := range h.lines {
			p.writeLocked(l)
		}
		delete(p.held, id)
	}
}

// webhook prints the outcome of one webhook request and releases the lines
// held for its events. accepted counts the events the bus took; reason is
// the error the response carried.
func (p *printer) webhook(status int, held []string, accepted int, reason string, d time.Duration) {
	d = d.Round(10 * time.Microsecond)
	switch {
	case status/100 == 2:
		p.release(held, "webhook   %d  %d event(s) acknowledged in %s", status, accepted, d)
	case accepted > 0:
		p.release(held, "webhook   %d  %s: %d event(s) reached the bus before it failed; LINE redelivers the request (in %s)", status, reason, accepted, d)
	default:
		p.release(held, "webhook   %d  rejected: %s; nothing published (in %s)", status, reason, d)
	}
}

// record prints one record's outcome, with its chat's lane (the hashed
// message group: each chat is one lane, handled one event at a time) or
// "long" for the long-work queue.
func (p *printer) record(res worker.Result) {
	why := ""
	switch {
	case res.Outcome == worker.OutcomeDeadLettered:
		why = ": dead-lettered by the worker (" + res.DeadLetterReason + ")"
	case res.Outcome == worker.OutcomeDeferred:
		why = ": an earlier event of its chat failed; it follows that one"
	case res.Outcome == worker.OutcomeForwarded:
		why = ": long work, handed to the long-work queue"
	case res.Outcome == worker.OutcomeDebounced && res.Long:
		why = ": a flush with nothing due: a newer message of the chat ends the burst"
	case res.Outcome == worker.OutcomeDebounced:
		why = ": waits for the end of its chat's burst (bot.Debounce)"
	case res.Outcome == worker.OutcomeStale:
		why = ": an edit older than one already handled: not run"
	case len(res.Batch) > 0 && res.Outcome == worker.OutcomeOK:
		why = fmt.Sprintf(": ran the chat's burst of %d message(s)", len(res.Batch))
	case res.Outcome != worker.OutcomeFailed:
	case res.Panicked:
		why = ": handler panicked, crash report sent once per event (24 h)"
	case errors.Is(res.Err, idempotency.ErrInProgress):
		why = ": still in progress in another invocation; retried after the visibility timeout"
	case errors.Is(res.Err, context.DeadlineExceeded):
		why = ": handler ran out of time"
	case errors.Is(res.Err, envelope.ErrMalformed) || errors.Is(res.Err, bot.ErrEvent):
		why = ": malformed record, will end in the DLQ"
	default:
		why = ": handler returned an error"
	}
	if res.RetryIn > 0 {
		why += fmt.Sprintf(", next receive in %s", res.RetryIn)
	}
	lane := "-"
	switch {
	case res.Long:
		lane = "long"
	case res.Group != "":
		lane = telemetry.HashUserID(res.Group)
	}
	id := cmp.Or(res.WebhookEventID, res.MessageID)
	if res.Channel != "" {
		why += " [channel " + res.Channel + "]"
	}
	p.eventLine(res.WebhookEventID, "worker    %-14s %-9s %s  %s (receive %d)%s", "lane "+lane, res.Type, id, res.Outcome, res.ReceiveCount, why)
}

func (p *printer) deadLettered(id, dlq string) {
	p.eventLine(id, "sqs       %s failed its last receive: moving to %s", id, dlq)
}

func (p *printer) alarm(name, from, to string) {
	p.line("alarm     %s  %s → %s", name, from, to)
}

// notifiedBatch reports one notifier invocation on the ops queue.
func (p *printer) notifiedBatch(records, failed int, operators []string) {
	if failed > 0 {
		p.line("notifier  %d alert(s): %d failed to push, retried after the visibility timeout", records, failed)
		return
	}
	p.line("notifier  %d alert(s) coalesced for %s (a card now, or counted in the window's digest)", records, strings.Join(operators, ", "))
}

func (p *printer) notified(records int, operators []string, err error) {
	if err != nil {
		p.line("notifier  %d alert(s): push failed: %v", records, err)
		return
	}
	p.line("notifier  %d alert(s) pushed to %s", records, strings.Join(operators, ", "))
}

func (p *printer) read(chatID string) {
	p.line("line      messages marked read in %s", chatID)
}

func (p *printer) loading(chatID string, seconds int) {
	p.line("line      loading animation shown in %s for %d s", chatID, seconds)
}

// escapeControl quotes what a terminal would act on instead of print: C0
// and C1 control characters (newline, NUL, ESC…), DEL, invalid UTF-8, and
// the bidirectional overrides that reorder what is displayed. Everything
// else, non-ASCII text included, is kept as it is.
func escapeControl(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x00', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029'
}
