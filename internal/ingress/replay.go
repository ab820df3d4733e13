package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/chatqueue"
)

// Metric names of the replay forwarding (docs/metrics.md).
const (
	// MetricReplaysForwarded counts replayed chat events sent on to the chat
	// queue under their chat's message group.
	MetricReplaysForwarded = "ReplaysForwarded"
	// MetricReplaysFailed counts replayed events that were not (left on the
	// replay queue: received again, then its dead-letter queue).
	MetricReplaysFailed = "ReplaysFailed"
)

// ErrReplay marks a replay queue record that is not an EventBridge event
// with a chat: it cannot be routed to a chat's message group.
var ErrReplay = errors.New("not a replayed chat event")

// replayed is what forwarding reads of a replayed EventBridge event (the
// SQS body of the replay rule's target): the chat the webhook wrote into the
// Detail, and the event's webhookEventId.
type replayed struct {
	ReplayName string `json:"replay-name"`
	Detail     struct {
		Channel string          `json:"channel"`
		Chat    string          `json:"chat"`
		Event   json.RawMessage `json:"event"`
	} `json:"detail"`
}

// Replays sends each replayed chat event of an SQS batch from the replay
// queue on to the chat queue, unchanged, with its chat as the message group,
// exactly as a live event of that chat is sent. So a chat's replayed events
// run one at a time with its live ones and with each other, and chats'
// replays run in parallel. The deduplication id is the replay's name and
// the webhookEventId: the replay queue's second delivery of a record within
// five minutes is dropped by SQS, while a replay of an event delivered live
// minutes ago is not mistaken for LINE's redelivery of it (the worker's
// idempotency then decides whether it runs again).
// EventBridge replays in no particular order, and the replay queue is a
// standard queue: the order among a chat's replayed events is not LINE's.
//
// Records that did not reach the chat queue are reported as batch item
// failures: SQS hands them out again, and after the replay queue's
// maxReceiveCount moves them to its dead-letter queue. A record that is
// not a replayed chat event fails the same way (it is kept, not dropped).
func (h *Handler) Replays(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	if h.queue == nil {
		return resp, errors.New("ingress: replays need the chat queue (WithChatQueue)")
	}
	fail := func(r events.SQSMessage) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
	}
	var msgs []chatqueue.Message
	var records []events.SQSMessage // records[i] is msgs[i]'s
	for _, r := range ev.Records {
		m, err := replayMessage(r)
		if err != nil {
			h.log.ErrorContext(ctx, "replayed record not forwarded", "messageId", r.MessageId, "error", err.Error())
			fail(r)
			continue
		}
		msgs, records = append(msgs, m), append(records, r)
	}
	failedIDs := map[string]bool{}
	if len(msgs) > 0 {
		res, err := h.queue.Send(ctx, msgs)
		if err != nil {
			for _, f := range res.Failed {
				failedIDs[f.EventID] = true
			}
			if len(res.Failed) == 0 { // a sender that says nothing of which: all of them
				for _, m := range msgs {
					failedIDs[m.EventID] = true
				}
			}
		}
	}
	forwarded := 0
	for i, m := range msgs {
		if failedIDs[m.EventID] {
			fail(records[i])
			continue
		}
		forwarded++
	}
	h.metrics.Count(MetricReplaysForwarded, float64(forwarded))
	if n := len(resp.BatchItemFailures); n > 0 {
		h.metrics.Count(MetricReplaysFailed, float64(n))
	}
	return resp, nil
}

// replayMessage is the chat queue message of one replayed record.
func replayMessage(r events.SQSMessage) (chatqueue.Message, error) {
	var e replayed
	if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
		return chatqueue.Message{}, fmt.Errorf("%w: %v", ErrReplay, err)
	}
	if e.Detail.Chat == "" || len(e.Detail.Event) == 0 {
		return chatqueue.Message{}, fmt.Errorf("%w: no detail.chat or detail.event", ErrReplay)
	}
	var head struct {
		WebhookEventID string `json:"webhookEventId"`
	}
	_ = json.Unmarshal(e.Detail.Event, &head)
	if len(r.Body) > chatqueue.MaxMessageBytes {
		return chatqueue.Message{}, fmt.Errorf("%w: %d bytes, over the chat queue's %d", ErrReplay, len(r.Body), chatqueue.MaxMessageBytes)
	}
	return chatqueue.Message{
		Body:    []byte(r.Body),
		Group:   chatqueue.ChannelGroupID(e.Detail.Channel, e.Detail.Chat),
		DedupID: replayDedupID(e.ReplayName, chatqueue.ChannelDedupID(e.Detail.Channel, head.WebhookEventID, e.Detail.Event)),
		EventID: head.WebhookEventID,
	}, nil
}

// replayDedupID is "replay:" and the hex SHA-256 of the replay's name and
// the event's own deduplication id: 71 characters SQS takes, the same for
// every delivery of one replayed event, and never the live event's.
func replayDedupID(replayName, eventDedupID string) string {
	sum := sha256.Sum256([]byte(replayName + "\x00" + eventDedupID))
	return "replay:" + hex.EncodeToString(sum[:])
}
