// Package replay sends events archived by EventBridge back through the bus,
// with EventBridge's StartReplay: the runbook step after a bad deploy, when
// the worker acknowledged events it handled wrongly (or dropped) and they must
// be processed again.
//
// What a replay is, and what it is not:
//
//   - The replayed events go to linegate's own rules on the bus again
//     (DefaultRules, named in the replay's FilterArns; without FilterArns
//     EventBridge sends them to every rule of the bus, yours included), each
//     with a "replay-name" field added. The replay rule puts chat events on
//     the replay queue, and the webhook sends each on to the chat queue
//     under its chat's message group: one at a time with that chat's live
//     events, chats in parallel. They carry no
//     X-Ray trace header: the webhook's trace is not linked to the work a
//     replay causes.
//   - Idempotency is by webhookEventId, and the worker keeps its completed
//     markers 48 h by default. A replay is therefore safe (a no-op) for events
//     still within that TTL whose first processing completed. Events OLDER
//     than the TTL WILL be processed again: their effects (pushes, counters,
//     writes) happen a second time. Replay windows older than the TTL need
//     care — that is usually the point (re-running what a bad deploy broke),
//     but make sure it is what you want.
//   - Reply tokens expire a minute after delivery, so a replayed message
//     event is answered by push (the worker's reply-or-push), which costs
//     push quota.
//   - EventBridge archives events with a delay of a few minutes, and replays
//     them in one-minute slices of the window; a replay of the last few
//     minutes may miss events not archived yet.
//   - EventBridge does not replay in order: events of one chat may come back
//     in another order than LINE sent them, and not interleaved with the
//     window's other events as they were. A chat's replayed events never run
//     at once, but their order is not LINE's.
package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// ErrInvalid is returned, wrapped with the reason, when Options cannot make
// a replay EventBridge would accept (callers treat it as a usage error).
var ErrInvalid = errors.New("replay: invalid options")

// ErrNoArchive is returned when Options.Archive is empty and the bus has no
// archive, or more than one so that the choice is ambiguous.
var ErrNoArchive = errors.New("replay: no single archive on the bus")

// ErrExists is returned when a replay of the same name was already started:
// EventBridge replay names are unique. A generated name is derived from the
// window, so this also guards against replaying one window twice by mistake;
// pass an explicit Options.Name to do it on purpose.
var ErrExists = errors.New("replay: a replay of that name already exists")

// ErrFailed is returned when the replay ends FAILED or CANCELLED; the error
// text carries EventBridge's reason, and Result.StateReason holds it too.
var ErrFailed = errors.New("replay: did not complete")

// MaxNameLen is EventBridge's limit on a replay name's length.
const MaxNameLen = 64

// DefaultRules are linegate's own rules on its bus (template.yaml's
// ReplayRule and BackgroundRule): a replay goes to them only, unless told
// otherwise.
var DefaultRules = []string{"replay", "background"}

// eventBridge is the EventBridge surface a replay uses.
type eventBridge interface {
	DescribeEventBus(ctx context.Context, in *eventbridge.DescribeEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error)
	DescribeArchive(ctx context.Context, in *eventbridge.DescribeArchiveInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeArchiveOutput, error)
	ListArchives(ctx context.Context, in *eventbridge.ListArchivesInput, optFns ...func(*eventbridge.Options)) (*eventbridge.ListArchivesOutput, error)
	StartReplay(ctx context.Context, in *eventbridge.StartReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.StartReplayOutput, error)
	DescribeRule(ctx context.Context, in *eventbridge.DescribeRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error)
	DescribeReplay(ctx context.Context, in *eventbridge.DescribeReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeReplayOutput, error)
}

// Options describe one replay.
type Options struct {
	// Bus is the name of the event bus the events are replayed to (the
	// stack's EventBusName, "linegate" by default). Required.
	Bus string
	// Archive is the name of the archive to replay from. Empty: the one
	// archive whose source is Bus (the stack creates exactly one, with a
	// name CloudFormation generates).
	Archive string
	// Rules are the names of the bus's rules the replay goes to (its
	// FilterArns; each must exist). Empty: DefaultRules.
	Rules []string
	// AllRules sends the replay to every rule of the bus (no FilterArns):
	// rules you added to linegate's bus see the replayed events too.
	AllRules bool
	// Since and Until bound the window, by the events' time: Since < Until,
	// and Until not in the future (EventBridge refuses it).
	Since, Until time.Time
	// Name of the replay. Empty: "linegate-<since>-<until>" in UTC compact
	// form, sanitised to EventBridge's name rules. An explicit name must
	// already follow them (1-64 of A-Z a-z 0-9 . - _).
	Name string
	// Wait until the replay ends, polling DescribeReplay every PollEvery
	// (default 2 s); ctx bounds the wait.
	Wait      bool
	PollEvery time.Duration
	// Now is the clock the window is checked against (default time.Now).
	Now func() time.Time
}

// Result is what a replay was and, when waited for, how it ended.
type Result struct {
	Name        string // the replay's name
	ARN         string // the replay's ARN
	State       string // STARTING, RUNNING, COMPLETED, FAILED, CANCELLING, CANCELLED
	StateReason string // EventBridge's reason for the state, if any
	Bus         string // the destination bus's name
	BusARN      string
	Archive     string // the source archive's name
	ArchiveARN  string
	Since       time.Time
	Until       time.Time
	// LastReplayed is the event time of the last event replayed so far (zero
	// when EventBridge did not say).
	LastReplayed time.Time
	// Rules are the ARNs of the rules the replay goes to (its FilterArns);
	// nil when it goes to every rule of the bus.
	Rules []string
}

// Start validates opts, resolves the bus, archive and rule ARNs, starts
// replaying the archive's events of [Since, Until] to the bus's rules and,
// with opts.Wait,
// polls until the replay is COMPLETED (nil error), FAILED or CANCELLED
// (ErrFailed with the reason). Without Wait it returns after the start, in
// state STARTING. The Result is filled as far as Start got, also on error.
func Start(ctx context.Context, api eventBridge, opts Options) (Result, error) {
	res := Result{Bus: opts.Bus, Archive: opts.Archive, Since: opts.Since, Until: opts.Until}
	name, err := validate(opts)
	if err != nil {
		return res, err
	}
	res.Name = name

	bus, err := api.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(opts.Bus)})
	if err != nil {
		return res, fmt.Errorf("describe event bus %s: %w", opts.Bus, err)
	}
	res.BusARN = aws.ToString(bus.Arn)
	if res.BusARN == "" {
		return res, fmt.Errorf("describe event bus %s: no ARN in the answer", opts.Bus)
	}

	if res.Archive == "" {
		if res.Archive, err = findArchive(ctx, api, res.BusARN); err != nil {
			return res, err
		}
	}
	arch, err := api.DescribeArchive(ctx, &eventbridge.DescribeArchiveInput{ArchiveName: aws.String(res.Archive)})
	if err != nil {
		return res, fmt.Errorf("describe archive %s: %w", res.Archive, err)
	}
	res.ArchiveARN = aws.ToString(arch.ArchiveArn)
	if src := aws.ToString(arch.EventSourceArn); src != res.BusARN {
		return res, fmt.Errorf("%w: archive %s archives %s, not bus %s (EventBridge replays only to an archive's own bus)", ErrInvalid, res.Archive, src, res.BusARN)
	}

	if !opts.AllRules {
		rules := opts.Rules
		if len(rules) == 0 {
			rules = DefaultRules
		}
		for _, r := range rules {
			out, err := api.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(r), EventBusName: aws.String(opts.Bus)})
			if err != nil {
				var nf *types.ResourceNotFoundException
				if errors.As(err, &nf) {
					return res, fmt.Errorf("%w: bus %s has no rule %q (name the rules to replay to, or replay to all of them): %v", ErrInvalid, opts.Bus, r, err)
				}
				return res, fmt.Errorf("describe rule %s on %s: %w", r, opts.Bus, err)
			}
			if aws.ToString(out.Arn) == "" {
				return res, fmt.Errorf("describe rule %s on %s: no ARN in the answer", r, opts.Bus)
			}
			res.Rules = append(res.Rules, aws.ToString(out.Arn))
		}
	}
	started, err := api.StartReplay(ctx, &eventbridge.StartReplayInput{
		ReplayName:     aws.String(name),
		Description:    aws.String(fmt.Sprintf("linegate replay of %s to %s", res.Archive, opts.Bus)),
		EventSourceArn: aws.String(res.ArchiveARN),
		EventStartTime: aws.Time(opts.Since),
		EventEndTime:   aws.Time(opts.Until),
		Destination:    &types.ReplayDestination{Arn: aws.String(res.BusARN), FilterArns: res.Rules},
	})
	if err != nil {
		var exists *types.ResourceAlreadyExistsException
		if errors.As(err, &exists) {
			return res, fmt.Errorf("%w: %s (pass another name to replay the window again): %v", ErrExists, name, err)
		}
		return res, fmt.Errorf("start replay %s of archive %s: %w", name, res.Archive, err)
	}
	res.ARN = aws.ToString(started.ReplayArn)
	res.State = string(started.State)
	res.StateReason = aws.ToString(started.StateReason)
	if !opts.Wait {
		return res, nil
	}

	every := opts.PollEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		out, err := api.DescribeReplay(ctx, &eventbridge.DescribeReplayInput{ReplayName: aws.String(name)})
		if err != nil {
			return res, fmt.Errorf("describe replay %s: %w", name, err)
		}
		res.State = string(out.State)
		res.StateReason = aws.ToString(out.StateReason)
		if out.ReplayArn != nil {
			res.ARN = aws.ToString(out.ReplayArn)
		}
		if out.EventLastReplayedTime != nil {
			res.LastReplayed = *out.EventLastReplayedTime
		}
		switch out.State {
		case types.ReplayStateCompleted:
			return res, nil
		case types.ReplayStateFailed, types.ReplayStateCancelled:
			reason := res.StateReason
			if reason == "" {
				reason = "no reason given"
			}
			return res, fmt.Errorf("%w: replay %s %s: %s", ErrFailed, name, out.State, reason)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("wait for replay %s (last state %s): %w", name, res.State, ctx.Err())
		case <-t.C:
		}
	}
}

// validate checks opts against EventBridge's rules and returns the replay
// name to use.
func validate(opts Options) (string, error) {
	if opts.Bus == "" {
		return "", fmt.Errorf("%w: the bus name is required", ErrInvalid)
	}
	if opts.Since.IsZero() || opts.Until.IsZero() {
		return "", fmt.Errorf("%w: both since and until are required", ErrInvalid)
	}
	if opts.Since.Equal(opts.Until) {
		return "", fmt.Errorf("%w: the window is empty (since = until = %s)", ErrInvalid, opts.Since.Format(time.RFC3339))
	}
	if opts.Until.Before(opts.Since) {
		return "", fmt.Errorf("%w: since %s is after until %s", ErrInvalid, opts.Since.Format(time.RFC3339), opts.Until.Format(time.RFC3339))
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	if n := now(); opts.Until.After(n) {
		return "", fmt.Errorf("%w: until %s is in the future (now %s); EventBridge refuses a replay that ends later than now", ErrInvalid, opts.Until.Format(time.RFC3339), n.UTC().Format(time.RFC3339))
	}
	if opts.Name == "" {
		return DefaultName(opts.Since, opts.Until), nil
	}
	if err := checkName(opts.Name); err != nil {
		return "", err
	}
	return opts.Name, nil
}

// DefaultName is the replay name used when none is given:
// "linegate-<since>-<until>" with both times in UTC as 20060102T150405Z,
// sanitised to EventBridge's replay name rules. Equal windows give equal
// names, so EventBridge refuses to run the same window twice by accident.
func DefaultName(since, until time.Time) string {
	const layout = "20060102T150405Z"
	return SanitizeName("linegate-" + since.UTC().Format(layout) + "-" + until.UTC().Format(layout))
}

// SanitizeName turns any string into a valid EventBridge replay name: every
// character outside A-Z a-z 0-9 . - _ becomes '-', the result is cut to
// MaxNameLen, and an empty result becomes "linegate".
func SanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() == MaxNameLen {
			break
		}
		if nameChar(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "linegate"
	}
	return b.String()
}

func checkName(s string) error {
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: replay name %q is longer than %d characters", ErrInvalid, s, MaxNameLen)
	}
	for _, r := range s {
		if !nameChar(r) {
			return fmt.Errorf("%w: replay name %q has %q; allowed are A-Z a-z 0-9 . - _", ErrInvalid, s, r)
		}
	}
	return nil
}

func nameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
}

// findArchive returns the name of the one archive whose source is busARN.
func findArchive(ctx context.Context, api eventBridge, busARN string) (string, error) {
	var names []string
	in := &eventbridge.ListArchivesInput{EventSourceArn: aws.String(busARN)}
	for {
		out, err := api.ListArchives(ctx, in)
		if err != nil {
			return "", fmt.Errorf("list archives of %s: %w", busARN, err)
		}
		for _, a := range out.Archives {
			// Filter again: an emulator may ignore the filter.
			if aws.ToString(a.EventSourceArn) == busARN {
				names = append(names, aws.ToString(a.ArchiveName))
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("%w: %s has none (is the stack deployed, and in this region?)", ErrNoArchive, busARN)
	default:
		return "", fmt.Errorf("%w: %s has %d (%s); choose one", ErrNoArchive, busARN, len(names), strings.Join(names, ", "))
	}
}
