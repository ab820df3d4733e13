package alert

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queueDepth is the SQS call the sweep makes on each watched DLQ.
type queueDepth interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// DefaultGrace is how long a DLQ's depth must disagree with the dead
// letters announced before the sweep acts on it: longer than a notice
// takes to reach the notifier (the ops queue's batching window) and than
// SQS's approximate counts take to settle (about a minute).
const DefaultGrace = 3 * time.Minute

// WithSweep makes Sweep watch the dead-letter queues at dlqURLs through q:
// every message in one that no dead-letter notice announced (SQS moved it
// after maxReceiveCount receives, or EventBridge could not deliver it) is
// paged like a dead letter once its depth has disagreed for grace (<= 0:
// DefaultGrace). Reading the depths also keeps the queues active, which is
// what keeps CloudWatch receiving their metrics (an SQS queue nothing
// calls for six hours stops reporting them).
func WithSweep(q queueDepth, dlqURLs []string, grace time.Duration) Option {
	return func(n *Notifier) {
		if grace <= 0 {
			grace = DefaultGrace
		}
		n.sweepQ, n.sweepDLQs, n.grace = q, slices.Clone(dlqURLs), grace
	}
}

// SweepResult is what one sweep did.
type SweepResult struct {
	// Digests counts the digest cards sent (windows that held reports).
	Digests int
	// Unannounced counts the dead letters found with no notice.
	Unannounced int
	// Depths is each watched DLQ's depth, by name.
	Depths map[string]int
}

// Sweep runs on the notifier's schedule (every minute): it pages the
// digest of every ledger key whose window has passed with reports held,
// and compares each watched DLQ's depth with the dead letters announced,
// paging the rest. Without a ledger it does nothing. A DLQ whose depth
// cannot be read, a ledger that cannot be read or written and a push that
// fails make it return an error (the function's Errors alarm escalates);
// a failed card is taken back from the ledger, so the next sweep pages it.
func (n *Notifier) Sweep(ctx context.Context) (SweepResult, error) {
	res := SweepResult{Depths: map[string]int{}}
	if n.ledger == nil {
		return res, nil
	}
	var errs []error
	for _, url := range n.sweepDLQs {
		d, err := n.depth(ctx, url)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Depths[queueNameOf(url)] = d
	}
	var groups []*group
	var adms []*admitted
	err := n.ledger.update(ctx, func(st *ledgerState) error {
		groups, adms, res.Digests, res.Unannounced = nil, nil, 0, 0
		now := n.ledger.now()
		for _, key := range slices.Sorted(maps.Keys(st.Keys)) {
			k := st.Keys[key]
			if k.Held == 0 || now.Sub(k.LastCard) < n.ledger.window {
				continue
			}
			g, err := digestOf(key, k)
			if err != nil {
				n.log.ErrorContext(ctx, "alert: a digest's sample is unreadable: its count is dropped", "key", key, "error", err.Error())
				delete(st.Keys, key)
				continue
			}
			prev := *k
			st.Keys[key] = &keyState{LastCard: now, Cards: 1, State: alarmState(g.msg)}
			groups, adms = append(groups, g), append(adms, &admitted{g: g, prev: &prev, now: now})
			res.Digests++
		}
		for _, name := range slices.Sorted(maps.Keys(res.Depths)) {
			if g := n.account(st, name, res.Depths[name], now); g != nil {
				res.Unannounced += g.msg.unannounced.Count
				if v, a := n.ledger.decide(st, g, now); v == pageNow {
					groups, adms = append(groups, g), append(adms, a)
				}
			}
		}
		st.prune(now, n.ledger.window)
		return nil
	})
	if err != nil {
		n.metrics.Count(MetricLedgerErrors, 1)
		return res, errors.Join(append(errs, err)...)
	}
	if res.Unannounced > 0 {
		n.metrics.Count(MetricUnannounced, float64(res.Unannounced))
	}
	if len(groups) > 0 {
		failed, perr := n.pushGroups(ctx, groups, 0)
		n.undo(ctx, adms, failed)
		if perr != nil {
			errs = append(errs, perr)
		}
	}
	return res, errors.Join(errs...)
}

// account compares a DLQ's depth with the dead letters announced. The
// messages counted in the depth when it first rose above the announced
// ones must have their notices within the grace (notices keep coming while
// dead letters do, so a surplus of the moment proves nothing): those that
// still have none then become an unannounced finding (returned). A deficit
// that lasts the grace (messages redriven, purged or expired) lowers what
// is expected.
func (n *Notifier) account(st *ledgerState, name string, depth int, now time.Time) *group {
	s := st.dlq(name)
	switch {
	case depth > s.Expected:
		s.DeficitSince = time.Time{}
		if s.SurplusSince.IsZero() {
			s.SurplusSince, s.SurplusDepth = now, depth
			return nil
		}
		if now.Sub(s.SurplusSince) < n.grace {
			return nil
		}
		missing := s.SurplusDepth - s.Expected
		since := s.SurplusSince
		s.SurplusSince, s.SurplusDepth = now, depth // what is above now is watched anew
		if missing <= 0 {
			return nil
		}
		u := &unannounced{Queue: name, Count: missing, Depth: depth}
		id := fmt.Sprintf("unannounced:%s:%d:%d", name, s.Expected, since.UnixNano())
		s.Expected += missing
		if s.Expected >= depth {
			s.SurplusSince, s.SurplusDepth = time.Time{}, 0
		}
		m := opsMessage{id: id, unannounced: u, when: now}
		g := &group{msg: m, key: ledgerKey(m), dlqs: map[string]int{}, ids: []string{id}, records: []string{id}}
		g.add(m, u.Count)
		return g
	case depth < s.Expected:
		s.SurplusSince, s.SurplusDepth = time.Time{}, 0
		if s.DeficitSince.IsZero() {
			s.DeficitSince = now
		} else if now.Sub(s.DeficitSince) >= n.grace {
			s.Expected, s.DeficitSince = depth, time.Time{}
		}
	default:
		s.SurplusSince, s.SurplusDepth, s.DeficitSince = time.Time{}, 0, time.Time{}
	}
	return nil
}

// digestOf is the card of what key held in its window.
func digestOf(key string, k *keyState) (*group, error) {
	if k.Sample == nil {
		return nil, errors.New("no sample")
	}
	m, err := k.Sample.message()
	if err != nil {
		return nil, err
	}
	id := "digest:" + key + ":" + strconv.FormatInt(k.LastCard.UnixNano(), 10)
	g := &group{msg: m, key: key, count: k.Held, crashes: k.Crashes, deadLetters: k.DeadLetters + k.Folded,
		digest: true, ids: []string{id}, records: []string{id}, dlqs: map[string]int{}}
	if !k.LastCard.IsZero() {
		g.since = k.LastCard
	}
	g.span(k.FirstAt, k.LastAt)
	return g, nil
}

// depth is a queue's messages: visible, in flight and delayed.
func (n *Notifier) depth(ctx context.Context, url string) (int, error) {
	out, err := n.sweepQ.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, fmt.Errorf("alert: depth of %s: %w", queueNameOf(url), err)
	}
	total := 0
	for _, a := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
		v, _ := strconv.Atoi(out.Attributes[string(a)])
		total += v
	}
	return total, nil
}

// queueNameOf is the name at the end of a queue URL or ARN.
func queueNameOf(s string) string {
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		return s[i+1:]
	}
	return s
}
