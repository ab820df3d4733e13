// Package notifierfn wires the notifier function: the access token from
// SSM, a LINE client, the paging ledger in the idempotency table, and the
// alert core that turns ops queue batches into cards for the operators and
// sweeps on its schedule (digests, DLQ depths). functions/notifier and
// `linegate local` both build the notifier here.
package notifierfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/compose/pager"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
)

// Ledger is where the paging ledger is kept: a versioned value in the
// idempotency table (idempotency.DynamoDB, or Memory).
type Ledger interface {
	Get(ctx context.Context, key string) (idempotency.Versioned, error)
	Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error)
}

// ledgerStore adapts an idempotency.VersionedStore to the alert core's
// LedgerStore (which links no store of its own: the quota governor links
// the core and no DynamoDB).
type ledgerStore struct{ Ledger }

func (l ledgerStore) Get(ctx context.Context, key string) ([]byte, int64, error) {
	v, err := l.Ledger.Get(ctx, key)
	return v.Value, v.Version, err
}

func (l ledgerStore) Put(ctx context.Context, key string, value []byte, expected int64, keepFor time.Duration) (int64, error) {
	v, err := l.Ledger.Put(ctx, key, value, expected, keepFor)
	if errors.Is(err, idempotency.ErrConflict) {
		return v, fmt.Errorf("%w: %w", alert.ErrLedgerConflict, err)
	}
	return v, err
}

// QueueDepths is the SQS call the sweep makes on the watched DLQs.
type QueueDepths interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Deps are the notifier's AWS ports: the ledger's table (nil when
// ALERT_STATE_TABLE is unset: paging per invocation only) and the SQS
// client of the sweep (nil: no DLQ depths).
type Deps struct {
	Ledger Ledger
	Queues QueueDepths
}

// New resolves the access token and builds the notifier; region makes the
// cards' console links point at the right CloudWatch and X-Ray consoles.
func New(ctx context.Context, cfg config.Notifier, region string, d Deps, c compose.Common) (*alert.Notifier, error) {
	var extra []alert.Option
	if d.Ledger != nil && cfg.StateTable != "" {
		extra = append(extra, alert.WithLedger(ledgerStore{d.Ledger}, cfg.Window))
		if d.Queues != nil && len(cfg.DLQs) > 0 {
			extra = append(extra, alert.WithSweep(d.Queues, cfg.DLQs, cfg.Grace))
		}
	}
	n, _, err := pager.Cards(ctx, pager.Operators{Auth: cfg.Auth, IDs: cfg.Operators, TimeZone: cfg.TimeZone, ChatOps: cfg.ChatOps, Region: region}, c, extra...)
	return n, err
}

// Handler is the notifier's Lambda handler: an SQS batch of the ops queue
// goes to HandleQueue (its response reports the failed records), an
// EventBridge scheduled event to Sweep. Anything else is refused with
// ErrUnknownEvent.
func Handler(n *alert.Notifier) func(ctx context.Context, raw json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records    []json.RawMessage `json:"Records"`
			DetailType string            `json:"detail-type"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnknownEvent, err)
		}
		switch {
		case probe.Records != nil:
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnknownEvent, err)
			}
			return n.HandleQueue(ctx, ev)
		case probe.DetailType == "Scheduled Event":
			_, err := n.Sweep(ctx)
			return nil, err
		}
		return nil, ErrUnknownEvent
	}
}

// ErrUnknownEvent is what Handler answers to an event that is neither an
// SQS batch nor a scheduled event.
var ErrUnknownEvent = errors.New("notifier: neither an SQS batch of the ops queue nor the sweep's scheduled event")
