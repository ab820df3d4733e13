package worker

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/envelope"
	"github.com/linegate/linegate/pkg/bot"
)

// record is one SQS message on its way through the pipeline: what the steps
// have learnt of it so far, and the Result being built. Each field is set by
// one step and read by the steps inside it.
type record struct {
	msg       events.SQSMessage
	detail    envelope.Detail // set by decode
	head      bot.Head        // set by decode: enough to deduplicate
	event     *bot.Event      // set by parse, after the claim
	messenger bot.Messenger   // set by parse: the event's LINE client (nil: none)
	panicked  *panicked       // set by recoverPanics when the handler panicked
	long      bool            // set by process: the record came from the long-work queue
	only      bool            // set by process: the record is its invocation's only one
	flush     *flushSpec      // set by decode: the record is a debounce flush
	result    Result
}

// panicked is a recovered handler panic: its value and the stack taken where
// it was recovered.
type panicked struct {
	value any
	stack []byte
}

// settle turns the pipeline's error into the record's outcome: an error
// fails the record; nil acknowledges it, as handled unless a step already
// named it a duplicate. Settling twice with the same error changes nothing.
func (r *record) settle(err error) {
	switch {
	case err != nil:
		r.result.Outcome, r.result.Err = OutcomeFailed, err
	case r.result.Outcome == "":
		r.result.Outcome = OutcomeOK
	}
}

// handler runs the rest of the pipeline for one record. A non-nil error
// fails the record (SQS delivers it again); nil acknowledges it.
type handler func(ctx context.Context, r *record) error

// middleware is one step of the pipeline: it wraps the steps after it, and
// may work before them, after them, or instead of them.
type middleware func(next handler) handler

// chain wraps last in steps, the first step outermost.
func chain(steps []middleware, last handler) handler {
	h := last
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}

// pipeline lists the steps every record goes through, outermost first; the
// router's dispatch comes last. The order is the design:
//   - trace first: the span covers every step, and the context it returns
//     carries the trace id into the record's log line.
//   - account around everything that can fail or skip a record, so each
//     record is counted, logged and observed exactly once, whatever happened.
//   - announceDeadLetter between account and settleFailure: it sees the
//     dead letter settleFailure decided (and the panic recoverPanics
//     recorded) and tells the operator, whatever the outcome's accounting.
//   - settleFailure right inside account, around everything that can fail:
//     it sees every error (an undecodable record included) and turns it into
//     a dead letter or a growing retry delay before account reports it.
//   - decode before idempotent: the claim needs only the envelope and the
//     event's head (bot.Peek), not the SDK's full decode.
//   - idempotent before parse: a duplicate costs a claim, never the SDK's
//     full decode nor a LINE client; a parse failure releases the claim.
//   - latestEdit after parse (the edited message's chat and ID are in the
//     full event) and inside idempotent: an edit older than one handled is
//     acknowledged (its claim completes) without running anything else.
//   - debounce after latestEdit and parse (the route is known from the full
//     event), inside idempotent (an append completes the event's claim; a
//     flush is claimed under a key of its own) and before bindState and
//     longWork: a flush replaces the record's event with its batch's newest,
//     which the later steps and the handler then see, and a debounced route
//     is never handed off as long work (its flush runs on the long-work
//     queue anyway).
//   - bindState after parse: it gives the parsed event its step and
//     session stores (bot.Once, Event.Session).
//   - trackHeld inside idempotent: a record whose push was held succeeded
//     (its claim completes) with outcome "held".
//   - longWork after parse (the route is known only from the full event)
//     and inside idempotent: a hand-off completes the event's claim here,
//     and the long-work queue's run claims its own key.
//   - reportCrash outside timeout and recoverPanics: it reads the panic that
//     recoverPanics recorded, and publishes even after the record's deadline.
//   - timeout bounds the handler only: claim, complete, release and the
//     crash report run on the invocation's context.
//   - recoverPanics: it catches the handler's panics (with the handler's
//     stack) and nothing of the worker's own.
//   - intercept innermost, right before the router: linegate's own
//     postbacks (ChatOps) are handled with the handler's deadline and
//     panic recovery, and never reach the bot.
//
// A new step goes in this list where its comment says why.
func (p *Processor) pipeline() []middleware {
	return []middleware{
		trace(p.startSpan, p.traceID),
		account(p.metrics, p.log, p.observe, p.now),
		announceDeadLetter(p.crash, p.now, p.log, p.metrics),
		settleFailure(p.queues, p.retry, p.log),
		decode(p.eventContext),
		idempotent(p.store, p.inProgressFor, p.keepFor, p.log, p.completing),
		parse(p.newMessenger, p.state, p.keepFor),
		latestEdit(p.state, p.keepFor, p.log),
		debounce(debounceConfig{router: p.debounced, store: p.state, queues: p.queues, longURL: p.routeQueues[longQueue],
			newMessenger: p.newMessenger, inProgressFor: p.inProgressFor, keepFor: p.keepFor, now: p.now, sleep: p.sleep, log: p.log}),
		bindState(p.state, p.inProgressFor, p.keepFor, p.sessionTTL, p.log, p.metrics),
		trackHeld(),
		longWork(p.long, p.queues, p.routeQueues, p.newMessenger, p.loadingEvery, p.log),
		reportCrash(p.crash, p.now, p.log),
		timeout(p.recordTimeout, p.margin),
		recoverPanics(),
		intercept(p.intercept),
	}
}
