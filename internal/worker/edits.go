package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/pkg/bot"
)

// eventEdited is the type of LINE's event for an edited message.
const eventEdited = "messageEdited"

// latestAttempts bounds the read-compare-write rounds of newestEdit: a
// conflict means another run of the same message's edits wrote in between,
// which the chat queue's one-at-a-time order makes rare.
const latestAttempts = 4

// editMark is the newest edit of a message seen, as kept under
// idempotency.EditKey: its timestamp (LINE's, in milliseconds) and event.
type editMark struct {
	Timestamp int64  `json:"timestamp"`
	Event     string `json:"event"`
}

// latestEdit lets only the newest edit of a message reach the handler. LINE
// may deliver a message's messageEdited events out of order, the largest
// timestamp being the message's latest state
// (https://developers.line.biz/en/reference/messaging-api/#edit-event): for
// each chat and message the store keeps the newest edit seen, written with
// a conditional put. An edit older than the one kept (or as old, with a
// smaller webhookEventId) is acknowledged as OutcomeStale without running
// the handler; a newer one replaces the mark before its handler runs. The
// mark names its event, so a retry of the edit that wrote it runs again,
// unless a newer edit came in between. Without a store every edit runs.
func latestEdit(store StateStore, keepFor time.Duration, log *slog.Logger) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			ev := r.event
			if store == nil || ev == nil || ev.Type != eventEdited || r.flush != nil {
				return next(ctx, r)
			}
			chat, msgID := ev.Source.ChatID(), editedMessageID(ev)
			if chat == "" || msgID == "" {
				return next(ctx, r)
			}
			newest, err := claimNewest(ctx, store, idempotency.EditKey(ev.Channel, chat, msgID),
				editMark{Timestamp: ev.Timestamp.UnixMilli(), Event: ev.WebhookEventID}, keepFor)
			if err != nil {
				return fmt.Errorf("edit order: %w", err)
			}
			if !newest {
				r.result.Outcome = OutcomeStale
				log.InfoContext(ctx, "edit older than one already handled: not run", "webhookEventId", ev.WebhookEventID)
				return nil
			}
			return next(ctx, r)
		}
	}
}

// claimNewest records mine as the newest edit under key unless the store
// holds a newer one, and reports whether mine is the newest.
func claimNewest(ctx context.Context, store StateStore, key string, mine editMark, keepFor time.Duration) (bool, error) {
	value, err := json.Marshal(mine)
	if err != nil {
		return false, err
	}
	for range latestAttempts {
		cur, err := store.Get(ctx, key)
		if err != nil {
			return false, err
		}
		if cur.Version != 0 {
			var kept editMark
			if err := json.Unmarshal(cur.Value, &kept); err != nil {
				return false, fmt.Errorf("stored edit mark %s: %w", key, err)
			}
			if kept.Event == mine.Event {
				return true, nil // this edit's own mark: a retry
			}
			if !newer(mine, kept) {
				return false, nil
			}
		}
		_, err = store.Put(ctx, key, value, cur.Version, keepFor)
		if errors.Is(err, idempotency.ErrConflict) {
			continue // written in between: decide again on what is there now
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
	return false, fmt.Errorf("%s: %w after %d attempts", key, idempotency.ErrConflict, latestAttempts)
}

// newer orders two edits of one message: by timestamp, then by
// webhookEventId (a ULID, so later-issued ids sort later) for a tie.
func newer(a, b editMark) bool {
	if a.Timestamp != b.Timestamp {
		return a.Timestamp > b.Timestamp
	}
	return a.Event > b.Event
}

// editedMessageID is the ID of the message a messageEdited event edits.
func editedMessageID(e *bot.Event) string {
	var raw struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if json.Unmarshal(e.Raw, &raw) != nil {
		return ""
	}
	return raw.Message.ID
}
