package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// queueRouter says which route queue an event's route runs on ("" where
// it is received); *bot.Router satisfies it.
type queueRouter interface {
	Queue(e *bot.Event) string
}

// loadingSeconds is how long each loading animation is asked for: LINE's
// longest.
const loadingSeconds = 60

// DefaultLoadingRefresh is how often long work re-shows the loading
// animation: inside the 60 s each one lasts.
const DefaultLoadingRefresh = 50 * time.Second

// longWork runs routes declared with bot.Queue on their route queue. On
// any other queue, an event whose route names one is not dispatched: the
// loading animation is shown (one-to-one chats), the record's body is sent
// unchanged to the route queue's URL in table, and the record completes as
// OutcomeForwarded, so its chat's next event and other chats' quick replies
// never wait behind it. On a route queue (r.long) the handler runs, and the
// loading animation is shown again every refresh until the event has
// answered or the handler returns. Without a router that knows route
// queues, an SQS client or the named queue in table, a route runs where it
// is received.
func longWork(router queueRouter, q *queues, table map[string]string, newMessenger func() bot.Messenger, refresh time.Duration, log *slog.Logger) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, r *record) error {
			if r.event == nil || router == nil {
				return next(ctx, r)
			}
			if r.long {
				stop := keepLoading(ctx, r.event, newMessenger, refresh, log)
				defer stop()
				return next(ctx, r)
			}
			name := router.Queue(r.event)
			longURL := table[name]
			if q == nil || name == "" || longURL == "" {
				if name != "" && q != nil && len(table) > 0 {
					log.WarnContext(ctx, "route queue not in the worker's queue table: the route runs where it is received",
						"webhookEventId", r.result.WebhookEventID, "queue", name)
				}
				return next(ctx, r)
			}
			if err := r.event.ShowLoading(ctx, loadingSeconds); err != nil {
				log.WarnContext(ctx, "loading animation not shown", "webhookEventId", r.result.WebhookEventID, "error", err.Error())
			}
			if err := q.forward(ctx, longURL, r.msg); err != nil {
				return fmt.Errorf("hand long work off: %w", err)
			}
			r.result.Outcome = OutcomeForwarded
			return nil
		}
	}
}

// keepLoading re-shows e's loading animation every refresh, with a LINE
// client of its own, until stop is called or e has answered. Only
// one-to-one chats show it; elsewhere nothing runs.
func keepLoading(ctx context.Context, e *bot.Event, newMessenger func() bot.Messenger, refresh time.Duration, log *slog.Logger) (stop func()) {
	if e.Source.Type != bot.SourceUser || e.Source.UserID == "" || newMessenger == nil || refresh <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(refresh)
		defer t.Stop()
		m := newMessenger()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if e.Answered() {
				return
			}
			if err := m.ShowLoading(ctx, e.Source.UserID, loadingSeconds); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "loading animation not refreshed", "webhookEventId", e.WebhookEventID, "error", err.Error())
			}
		}
	}()
	return func() { cancel(); <-done }
}
