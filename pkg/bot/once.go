package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Steps records an event's idempotent steps, so that a retried handler gets
// what a step produced the first time instead of producing it again. The
// worker binds one per record (BindSteps), backed by the idempotency table;
// tests may bind their own.
type Steps interface {
	// Begin claims step for this event. It returns done=true and the stored
	// result when the step completed in an earlier attempt; an error
	// wrapping ErrStepInProgress while another attempt holds the step; any
	// other error when the store cannot be reached.
	Begin(ctx context.Context, step string) (result []byte, done bool, err error)
	// Finish stores the result of a step that succeeded. The effect has
	// happened by then, so a store that cannot record it reports that
	// itself (logs, metrics) and Once goes on with the result: the claim then
	// expires and only a retry after that runs the step again.
	Finish(ctx context.Context, step string, result []byte)
	// Abandon releases the claim of a step that failed (or panicked), so a
	// retry runs it again. A release that fails leaves the claim to expire.
	Abandon(ctx context.Context, step string)
}

// ErrNoSteps is returned by Once for an event with no Steps bound: a handler
// run outside the worker (bind a Steps in tests).
var ErrNoSteps = errors.New("bot: no step store bound to the event (Once runs in the worker, or after BindSteps)")

// ErrStepInProgress is returned by Once while another attempt at the same
// event holds the step (a crashed attempt's claim that has not expired yet).
// Return it from the handler: the record is retried later.
var ErrStepInProgress = errors.New("bot: step in progress in another attempt")

// ErrStepResult is returned by Once when the step's result cannot be stored
// as JSON (a channel, a function, NaN) or a stored result no longer decodes
// into the result type. A type that cannot be stored is refused before the
// step runs.
var ErrStepResult = errors.New("bot: step result cannot be stored as JSON")

// BindSteps attaches the store Once records steps in. The worker binds one
// per record, after the record's claim.
func (e *Event) BindSteps(s Steps) { e.steps = s }

// Once runs fn at most once for this event and step name, and returns its
// result — on a retry of the event, the result stored the first time,
// without running fn again (Powertools' idempotent_function). A handler that
// charges a card and then replies can fail after the charge and be retried
// safely:
//
//	receipt, err := bot.Once(ctx, e, "charge", func(ctx context.Context) (Receipt, error) {
//		return payments.Charge(ctx, order)
//	})
//	if err != nil {
//		return err
//	}
//	return e.ReplyText(ctx, "Paid: "+receipt.ID)
//
// The result is stored as JSON (json.Marshal of T, at most 300 KB) for as
// long as the event's own completion marker. When fn fails or panics its
// claim is released, so the retry runs it again; its error is returned as
// is. Names are per event: two events never share a step; one handler may
// run any number of differently named steps. A claim held by a crashed
// attempt expires with the function timeout (ErrStepInProgress until then).
func Once[T any](ctx context.Context, e *Event, step string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if step == "" {
		return zero, errors.New("bot: Once needs a step name")
	}
	if e.steps == nil {
		return zero, ErrNoSteps
	}
	if _, err := json.Marshal(zero); err != nil {
		return zero, fmt.Errorf("once %q: %w: %v", step, ErrStepResult, err)
	}
	stored, done, err := e.steps.Begin(ctx, step)
	if err != nil {
		return zero, fmt.Errorf("once %q: %w", step, err)
	}
	if done {
		var v T
		if len(stored) > 0 {
			if err := json.Unmarshal(stored, &v); err != nil {
				return zero, fmt.Errorf("once %q: stored result: %w: %v", step, ErrStepResult, err)
			}
		}
		return v, nil
	}
	ran := false
	defer func() {
		if !ran { // fn failed or panicked: let the retry run it
			e.steps.Abandon(context.WithoutCancel(ctx), step)
		}
	}()
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	ran = true
	b, err := json.Marshal(v)
	if err != nil {
		// The effect happened but cannot be recorded: keep the claim, so no
		// retry repeats the effect before it expires.
		return v, fmt.Errorf("once %q: %w: %v", step, ErrStepResult, err)
	}
	e.steps.Finish(context.WithoutCancel(ctx), step, b)
	return v, nil
}

// Once runs a side effect without a result at most once for this event and
// step name: Once[struct{}] for effects whose only outcome is that they
// happened (send an e-mail, write a row).
func (e *Event) Once(ctx context.Context, step string, fn func(ctx context.Context) error) error {
	_, err := Once(ctx, e, step, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}
