package local

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/pkg/bot"
)

// slowingBot is the example bot with handlers that take 0-40 ms, as a bot
// with a database or an API behind it does: without per-chat exclusivity a
// later message overtakes an earlier one still being handled.
func slowingBot(c config.Worker) *bot.Router {
	r := app.NewWith(app.Config{Probes: c.Probes})
	r.Use(func(next bot.Handler) bot.Handler {
		return func(ctx context.Context, e *bot.Event) error {
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			return next(ctx, e)
		}
	})
	return r
}

// orderUser is the user of trial i of an ordering test.
func orderUser(prefix byte, i int) string { return fmt.Sprintf("U%c%031x", prefix, i) }

// eachUser runs one trial per user, n of them (users prefix+0…), at most
// parallel at once, and returns the users once every trial has sent.
func eachUser(prefix byte, n, parallel int, trial func(user string)) []string {
	users := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range users {
		users[i] = orderUser(prefix, i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			trial(users[i])
		}()
	}
	wg.Wait()
	return users
}

// replyTexts returns, per user, the texts the bot sent them, in the order
// the local Messaging API received them.
func replyTexts(rt *Runtime) map[string][]string {
	out := map[string][]string{}
	for _, r := range rt.LINE().Messages() {
		for _, m := range r.Messages {
			var msg struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(m, &msg) == nil {
				out[r.To] = append(out[r.To], msg.Text)
			}
		}
	}
	return out
}

// checkOrder fails unless every user got exactly their 10 texts in order,
// and reports whether users' replies interleaved (another user's reply
// arrived between two of one user's).
func checkOrder(t *testing.T, rt *Runtime, users []string, text func(user string, k int) string) (interleaved bool) {
	t.Helper()
	got := replyTexts(rt)
	for _, u := range users {
		want := make([]string, 10)
		for k := range want {
			want[k] = text(u, k)
		}
		if fmt.Sprint(got[u]) != fmt.Sprint(want) {
			t.Fatalf("user %s got %q, want %q", u, got[u], want)
		}
	}
	// Interleaving: the arrival order of all replies is not one user's
	// block after another's.
	var to []string
	for _, r := range rt.LINE().Messages() {
		to = append(to, r.To)
	}
	seen := map[string]bool{}
	for i := 1; i < len(to); i++ {
		if to[i] != to[i-1] && seen[to[i]] {
			return true
		}
		seen[to[i-1]] = true
	}
	return false
}

// waitReplies waits until every user has n replies and the chat queue is
// drained, so a reply sent twice or out of order has been sent by then.
func waitReplies(t *testing.T, rt *Runtime, users []string, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d replies to each of %d users", n, len(users)), func() bool {
		got := replyTexts(rt)
		for _, u := range users {
			if len(got[u]) < n {
				return false
			}
		}
		return true
	})
	waitDrained(t, rt, timeout, "linegate-InteractiveQueue.fifo")
}

// Ten events from one user in one webhook body are answered in body order,
// in every one of 100 trials; chats (the trials, run 20 at a time) interleave
// freely. (Not on moto: it hands a FIFO group's messages to concurrent
// consumers at once, the divergence cloudtest names; through moto the chat
// queue's FIFO attributes, deduplication and order per receive are checked
// by the conformance suite and TestEndpointBackendAgainstMoto.)
func TestChatOrderWithinOneBody(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60, Bot: slowingBot, LineRecords: 100_000})
	text := func(u string, k int) string { return fmt.Sprintf("%s says %02d", u[len(u)-4:], k) }
	users := eachUser('a', 100, 20, func(u string) {
		evs := make([]json.RawMessage, 10)
		for k := range evs {
			evs[k] = lp.Text(u, text(u, k))
		}
		if d, err := lp.Deliver(context.Background(), evs...); err != nil || !d.Delivered {
			t.Errorf("delivery for %s: %+v %v", u, d, err)
		}
	})
	waitReplies(t, rt, users, 10, 60*time.Second)
	if !checkOrder(t, rt, users, text) {
		t.Error("no two chats' replies interleaved: chats are not handled in parallel")
	}
}

// Ten events from one user in ten bodies 20 ms apart are answered in order,
// in each of 100 trials, while other users keep the pipeline busy (quick
// messages and long work). The load leaves the pollers free enough to take
// a user's next message while the previous one is still being handled: the
// case in which, without per-chat order, the next one overtakes it.
func TestChatOrderAcrossBodies(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60, Bot: slowingBot, LineRecords: 100_000})
	text := func(u string, k int) string { return fmt.Sprintf("%s body %02d", u[len(u)-4:], k) }
	// Background load: other users' messages, every other one long work.
	ctx, stop := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for g := range 2 {
		load.Add(1)
		go func() {
			defer load.Done()
			for n := 0; ctx.Err() == nil; n++ {
				msg := fmt.Sprint("load ", n)
				if n%2 == 0 {
					msg = "slow load"
				}
				_, _ = lp.Deliver(ctx, lp.Text(orderUser('f', g*100000+n), msg))
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	users := eachUser('b', 100, 4, func(u string) {
		for k := range 10 {
			if k > 0 {
				time.Sleep(20 * time.Millisecond)
			}
			if d, err := lp.Deliver(context.Background(), lp.Text(u, text(u, k))); err != nil || !d.Delivered {
				t.Errorf("delivery %d for %s: %+v %v", k, u, d, err)
			}
		}
	})
	stop()
	load.Wait()
	waitReplies(t, rt, users, 10, 60*time.Second)
	checkOrder(t, rt, users, text)
}

// probe:permanent fails with bot.Permanent: the worker dead-letters it on its
// first receive, the chat's next message is answered at once, and the DLQ
// alarm fires.
func TestPermanentFailureIsDeadLetteredOnFirstReceive(t *testing.T) {
	rt, lp := start(t, Config{TimeScale: 60})
	const user = "U5555555555555555555555555555555d"
	d, err := lp.Deliver(context.Background(), lp.Text(user, "probe:permanent"), lp.Text(user, "after it"))
	if err != nil || !d.Delivered {
		t.Fatalf("%+v %v", d, err)
	}
	id := d.WebhookEventIDs[0]
	eventually(t, 10*time.Second, "probe:permanent dead-lettered", func() bool {
		e, _ := event(t, rt, id)
		return e.Outcome == "dead-lettered"
	})
	if e, _ := event(t, rt, id); e.ReceiveCount != 1 {
		t.Fatalf("dead-lettered after %d receives, want 1", e.ReceiveCount)
	}
	eventually(t, 5*time.Second, "the next message answered", func() bool { _, ok := findMessage(t, rt, user, "reply", "after it"); return ok })
	if q := getQueue(t, rt, "linegate-InteractiveDLQ.fifo"); q.Visible != 1 {
		t.Fatalf("DLQ holds %d, want the one event", q.Visible)
	}
	eventually(t, 10*time.Second, "the DLQ alarm", func() bool { return getAlarm(t, rt, "linegate-interactive-dlq") == StateAlarm })
}

// A transient failure's receives are spaced by growing intervals: the
// worker hides the message for a delay that doubles with each receive
// (observed here compressed 5 times by the time scale).
func TestTransientRetriesBackOff(t *testing.T) {
	const scale = 5
	rt, lp := start(t, Config{TimeScale: scale})
	const user = "U6666666666666666666666666666666e"
	id := deliver(t, lp, lp.Text(user, "probe:fail"))
	eventually(t, 30*time.Second, "probe:fail dead-lettered after 5 receives", func() bool {
		e, _ := event(t, rt, id)
		return e.Outcome == "dead-lettered" && e.ReceiveCount == 5
	})
	attempts := rt.events.attempts(id)
	if len(attempts) != 5 {
		t.Fatalf("%d attempts recorded, want 5", len(attempts))
	}
	var gaps []time.Duration
	for i := 1; i < len(attempts); i++ {
		gaps = append(gaps, attempts[i].Sub(attempts[i-1]))
	}
	const slack = 100 * time.Millisecond // polling and handler time, under -race on a busy machine
	for i := 1; i < len(gaps); i++ {
		if gaps[i]+slack < gaps[i-1] {
			t.Fatalf("receive gaps %v: gap %d shorter than the one before", gaps, i+1)
		}
	}
	// Equal jitter: receive n waits 2^(n-1) to 2^n seconds (cloud time).
	first, last := gaps[0]*scale, gaps[len(gaps)-1]*scale
	if first > 2*time.Second+slack*scale || last < 8*time.Second || last < 3*first {
		t.Fatalf("receive gaps %v (x%d): want about 1-2 s growing to 8-16 s", gaps, scale)
	}
}
