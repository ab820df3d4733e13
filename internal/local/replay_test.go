package local

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/testbot"
	"github.com/linegate/linegate/pkg/bot"
)

// chatTracker wraps a bot to see how many handlers of each chat run at once
// (and of all chats), and which chats ever overlapped themselves.
type chatTracker struct {
	mu       sync.Mutex
	inFlight map[string]int
	total    int
	maxTotal int
	overlaps map[string]int
	handled  map[string]int // texts that ran, by text
	hold     time.Duration
}

func newChatTracker(hold time.Duration) *chatTracker {
	return &chatTracker{inFlight: map[string]int{}, overlaps: map[string]int{}, handled: map[string]int{}, hold: hold}
}

func (c *chatTracker) bot(config.Worker) *bot.Router {
	r := testbot.New()
	r.Use(func(next bot.Handler) bot.Handler {
		return func(ctx context.Context, e *bot.Event) error {
			chat := e.Source.ChatID()
			text, _ := e.Text()
			c.mu.Lock()
			c.inFlight[chat]++
			if c.inFlight[chat] > 1 {
				c.overlaps[chat]++
			}
			c.total++
			c.maxTotal = max(c.maxTotal, c.total)
			c.handled[text]++
			c.mu.Unlock()
			time.Sleep(c.hold) // the handler's I/O: an overlap has time to show
			defer func() {
				c.mu.Lock()
				c.inFlight[chat]--
				c.total--
				c.mu.Unlock()
			}()
			return next(ctx, e)
		}
	})
	return r
}

// archiveOnly records webhook events the way the bus's archive holds them,
// without handing them to the chat queue: events a bad deploy lost after
// LINE's delivery, which only a replay brings back.
func archiveOnly(rt *Runtime, lp *lineplatform.Platform, evs ...json.RawMessage) []string {
	body, _ := json.Marshal(map[string]any{"destination": lineplatform.DefaultDestination, "events": evs})
	rt.console.store.Webhook("", body, time.Now())
	var ids []string
	for _, ev := range evs {
		var h struct {
			WebhookEventID string `json:"webhookEventId"`
		}
		_ = json.Unmarshal(ev, &h)
		ids = append(ids, h.WebhookEventID)
	}
	return ids
}

// A replay of two chats' events (archived events the worker never saw, and
// events it already answered) runs each chat's replayed events in that
// chat's own message group: one at a time with each other and with the
// chat's live events arriving meanwhile, the two chats in parallel, and
// nothing answered twice (an answered event's replay is a duplicate).
func TestReplayKeepsEachChatOneAtATime(t *testing.T) {
	tr := newChatTracker(60 * time.Millisecond)
	rt, lp := start(t, Config{TimeScale: 60, Bot: tr.bot, LineRecords: 10_000})
	chats := []string{orderUser('r', 1), orderUser('r', 2)}
	text := func(chat, kind string, k int) string { return fmt.Sprintf("%s %s %02d", chat[len(chat)-4:], kind, k) }

	// Answered live first.
	var answered []string
	for _, c := range chats {
		for k := range 3 {
			answered = append(answered, deliver(t, lp, lp.Text(c, text(c, "live", k))))
		}
	}
	waitReplies(t, rt, chats, 3, 30*time.Second)
	// Lost: archived, never handled.
	var lost []string
	for _, c := range chats {
		for k := range 6 {
			lost = append(lost, archiveOnly(rt, lp, lp.Text(c, text(c, "lost", k)))...)
		}
	}

	// The replay (every event of the window, answered or not), while the
	// same chats keep talking.
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range append(append([]string{}, answered...), lost...) {
			if targets, err := rt.replay(ctx, id); err != nil || len(targets) != 1 || targets[0] != "ReplayQueue" {
				t.Errorf("replay %s: %v %v", id, targets, err)
			}
		}
	}()
	for k := range 4 {
		for _, c := range chats {
			deliver(t, lp, lp.Text(c, text(c, "during", k)))
		}
	}
	wg.Wait()

	// Every text answered exactly once: 3 live + 6 lost + 4 during per chat.
	waitReplies(t, rt, chats, 13, 60*time.Second)
	got := replyTexts(rt)
	for _, c := range chats {
		count := map[string]int{}
		for _, s := range got[c] {
			count[s]++
		}
		for _, kind := range []struct {
			name string
			n    int
		}{{"live", 3}, {"lost", 6}, {"during", 4}} {
			for k := range kind.n {
				if s := text(c, kind.name, k); count[s] != 1 {
					t.Errorf("%q answered %d times, want once", s, count[s])
				}
			}
		}
		if len(got[c]) != 13 {
			t.Errorf("chat %s got %d answers, want 13: %q", c, len(got[c]), got[c])
		}
	}
	for _, id := range answered {
		eventually(t, 10*time.Second, "the replay of an answered event received as a duplicate", func() bool {
			e, _ := event(t, rt, id)
			return e.Duplicates >= 1
		})
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range chats {
		if tr.overlaps[c] != 0 {
			t.Errorf("chat %s had %d handlers overlapping another of its own: replays ran beside its live events", c, tr.overlaps[c])
		}
	}
	for s, n := range tr.handled {
		if n != 1 {
			t.Errorf("the handler ran %d times for %q", n, s)
		}
	}
	if tr.maxTotal < 2 {
		t.Errorf("at most %d handler at once: the two chats' replays did not run in parallel", tr.maxTotal)
	}
}
