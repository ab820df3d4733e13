package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/localstate"
	"github.com/linegate/linegate/pkg/bot"
)

// batches records what went into each commit of a state directory.
type batches struct {
	mu  sync.Mutex
	all [][]localstate.Change
}

func (b *batches) hook(batch []localstate.Change) {
	cp := make([]localstate.Change, len(batch))
	for i, c := range batch {
		cp[i] = localstate.Change{Bucket: c.Bucket, Key: c.Key, Value: bytes.Clone(c.Value)}
	}
	b.mu.Lock()
	b.all = append(b.all, cp)
	b.mu.Unlock()
}

// committedTogether reports whether one commit held a change matching
// each of the predicates.
func (b *batches) committedTogether(preds ...func(localstate.Change) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, batch := range b.all {
		all := true
		for _, p := range preds {
			found := false
			for _, c := range batch {
				if p(c) {
					found = true
					break
				}
			}
			all = all && found
		}
		if all {
			return true
		}
	}
	return false
}

// An event's final outcome in the event log is written in the very commit
// that completes its idempotency claim: a crash can leave neither without
// the other, so an event answered once never shows "duplicate" after a
// restart (its next receive finds the claim completed).
func TestFinalOutcomeCommitsWithTheCompletion(t *testing.T) {
	var b batches
	rt, p := start(t, Config{TimeScale: 30, StateDir: t.TempDir(), StateOptions: []localstate.Option{localstate.WithCommitHook(b.hook)}})
	id := deliver(t, p, p.Text("U00000000000000000000000000000d01", "hello"))
	waitEvent(t, rt, 10*time.Second, id, "handled", func(v eventView) bool { return v.Outcome == "ok" })
	completion := func(c localstate.Change) bool {
		return c.Bucket == "dynamodb.items" && strings.Contains(c.Key, `"`+id+`"`) && strings.Contains(string(c.Value), `"completed"`)
	}
	outcome := func(c localstate.Change) bool {
		return c.Bucket == bucketOutcomes && c.Key == id && string(c.Value) == "ok"
	}
	if !b.committedTogether(completion) {
		t.Fatal("no commit completed the event's claim")
	}
	if !b.committedTogether(completion, outcome) {
		t.Fatal("the event's final outcome was not committed with the completion of its claim")
	}
}

// The webhook answers only once the event log's entries of its events are
// on disk: the commit that holds the entry is held here, up to 2 s, and
// the answer must not come while it is held (bbolt commits are fsync'd:
// localstate's TestCommitsAreSynced).
func TestWebhookAnswersAfterItsEventLogIsDurable(t *testing.T) {
	// An event without a chat: only the bus takes it (no chat queue send
	// whose own wait for the disk could cover the entry's commit), and the
	// bus's deliveries are durable before the entry is appended, so only
	// the webhook's own wait for its entries can hold its answer.
	const id = "01M8DURAB1E000000000000001"
	ev := json.RawMessage(`{"type":"botResumed","mode":"active","timestamp":` + strconv.FormatInt(time.Now().UnixMilli(), 10) +
		`,"webhookEventId":"` + id + `","deliveryContext":{"isRedelivery":false}}`)
	answered := make(chan struct{}) // the webhook's answer came
	holding := make(chan struct{})  // the entry's commit is held
	released := make(chan struct{}) // and let go
	var onHold atomic.Bool          // the answer came while it was held
	var once sync.Once
	hook := func(batch []localstate.Change) {
		for _, c := range batch {
			if c.Bucket == bucketEvents && c.Key == id {
				once.Do(func() {
					close(holding)
					select {
					case <-answered:
						onHold.Store(true)
					case <-time.After(2 * time.Second):
					}
					close(released)
				})
				return
			}
		}
	}
	// The webhook's publish deadline (800 ms) raised past the hold.
	tmpl, err := os.ReadFile(testTemplate)
	if err != nil {
		t.Fatal(err)
	}
	patched := strings.Replace(string(tmpl), `PUBLISH_DEADLINE_MS: "800"`, `PUBLISH_DEADLINE_MS: "5000"`, 1)
	if patched == string(tmpl) {
		t.Fatal("template.yaml sets no PUBLISH_DEADLINE_MS of 800 to raise")
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(patched), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, _ := start(t, Config{Template: path, TimeScale: 30, StateDir: t.TempDir(), StateOptions: []localstate.Option{localstate.WithCommitHook(hook)}})
	p := lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret), lineplatform.WithTimeout(20*time.Second))
	d, err := p.Deliver(context.Background(), ev)
	select {
	case <-holding:
	default:
		t.Fatalf("the webhook answered (%+v, %v) before the event log's entry went to the disk", d, err)
	}
	close(answered)
	<-released
	if onHold.Load() {
		t.Fatal("the webhook answered while the commit of its event log entry was held")
	}
	if err != nil || !d.Delivered {
		t.Fatalf("delivery: %+v %v", d, err)
	}
}

// The event log comes back from the state directory in the order its
// events were first seen (not the key order the journal iterates in), with
// the final outcome recorded at a completion winning over an entry written
// before it; a smaller log keeps the newest first-seen and drops the rest
// from the disk, outcomes included.
func TestEventLogRestore(t *testing.T) {
	dir := t.TempDir()
	st, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(n uint64, id, outcome string) localstate.Change {
		b, _ := json.Marshal(savedEvent{N: n, Event: eventView{WebhookEventID: id, Type: "message", Outcome: outcome, Error: "was failing"}})
		return localstate.Change{Bucket: bucketEvents, Key: id, Value: b}
	}
	err = st.Write(context.Background(),
		entry(1, "EVc", "ok"), entry(2, "EVa", "queued"), entry(3, "EVd", "failed"), entry(4, "EVb", "duplicate"),
		localstate.Change{Bucket: bucketOutcomes, Key: "EVa", Value: []byte("ok")},
		localstate.Change{Bucket: bucketOutcomes, Key: "EVb", Value: []byte("held")},
		localstate.Change{Bucket: bucketOutcomes, Key: "EVgone", Value: []byte("ok")},
	)
	if err != nil {
		t.Fatal(err)
	}
	restore := func(size int) []eventView {
		t.Helper()
		s, err := newJournaledStore(size, st)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s.list()
	}
	got := restore(10)
	want := []struct{ id, outcome, err string }{{"EVc", "ok", "was failing"}, {"EVa", "ok", ""}, {"EVd", "failed", "was failing"}, {"EVb", "held", ""}}
	if len(got) != len(want) {
		t.Fatalf("restored %+v", got)
	}
	for i, w := range want {
		if got[i].WebhookEventID != w.id || got[i].Outcome != w.outcome || got[i].Error != w.err {
			t.Fatalf("entry %d: %+v, want %s %s (error %q); all: %+v", i, got[i], w.id, w.outcome, w.err, got)
		}
	}
	got = restore(2)
	if len(got) != 2 || got[0].WebhookEventID != "EVd" || got[1].WebhookEventID != "EVb" {
		t.Fatalf("a smaller log kept %+v, want EVd, EVb", got)
	}
	keys := func(bucket string) []string {
		var ks []string
		_ = st.Each(bucket, func(k, _ []byte) error { ks = append(ks, string(k)); return nil })
		return ks
	}
	if ks := keys(bucketEvents); strings.Join(ks, ",") != "EVb,EVd" {
		t.Errorf("entries on disk %v, want EVb, EVd", ks)
	}
	if ks := keys(bucketOutcomes); strings.Join(ks, ",") != "EVb" {
		t.Errorf("outcomes on disk %v, want EVb's only", ks)
	}
	_ = st.Close()
}

// An event the worker cannot decode keeps the webhookEventId LINE gave it
// in /_local/events: its one entry goes from queued to dead-lettered, and
// no second entry appears under its SQS message id.
func TestUndecodableEventKeepsItsEntry(t *testing.T) {
	rt, p := start(t, Config{TimeScale: 30})
	const id = "01M8UNDEC0DABLE00000000001"
	ev := json.RawMessage(`{"type":"message","webhookEventId":"` + id + `","mode":"active","timestamp":` + strconv.FormatInt(time.Now().UnixMilli(), 10) +
		`,"source":{"type":"user","userId":"U00000000000000000000000000000d03"},"replyToken":"r","deliveryContext":{"isRedelivery":"no"}}`)
	if got := deliver(t, p, ev); got != id {
		t.Fatalf("delivered %q", got)
	}
	waitEvent(t, rt, 10*time.Second, id, "dead-lettered", func(v eventView) bool { return v.Outcome == "dead-lettered" })
	for _, v := range rt.Events() {
		if v.WebhookEventID != id {
			t.Fatalf("a second entry %+v beside the event's own", v)
		}
	}
}

// The state file gives back what a burst left once it is over: a burst
// parks its messages in the chat queue (the bot is slower than the
// webhook), the worker then handles and deletes them, their deduplication
// ids (kept 5 minutes, 10 s at time scale 30) are forgotten as traffic goes
// on, and the committer compacts the file — its pages shrink, and what the
// 48-hour window still needs (the idempotency records, the event log) is
// all there.
func TestStateFileShrinksOnceABurstExpires(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	held := func(config.Worker) *bot.Router { // the burst waits in the queue until released
		r := bot.NewRouter()
		r.OnText("", func(ctx context.Context, e *bot.Event, text string) error {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return e.ReplyText(ctx, "ok")
		})
		return r
	}
	rt, _ := start(t, Config{TimeScale: 30, StateDir: dir, Bot: held, StateOptions: []localstate.Option{localstate.WithCompaction(256<<10, 0)}})
	// Redelivery on, as LINE's channel setting is: a body the webhook could
	// not hand off in time under load (a 500) comes again.
	p := lineplatform.New(rt.WebhookURL(), []byte(DefaultSecret), lineplatform.WithTimeout(10*time.Second),
		lineplatform.WithRedelivery(5, 500*time.Millisecond))
	const burst = 1200
	// Texts of 3,000 bytes (LINE allows 5,000): the burst's messages are
	// most of what it writes, next to the few hundred bytes each event
	// keeps for 48 hours.
	burstText := strings.Repeat("burst ", 500)
	var ids []string
	for i := 0; i < burst; i += 20 {
		var evs []json.RawMessage
		for j := i; j < i+20; j++ {
			evs = append(evs, p.Text(fmt.Sprintf("U%032x", 0xb000+j), burstText))
		}
		d, err := p.Deliver(context.Background(), evs...)
		if err != nil || !d.Delivered {
			t.Fatalf("delivery: %+v %v", d, err)
		}
		ids = append(ids, d.WebhookEventIDs...)
	}
	close(release)
	waitEvent(t, rt, 60*time.Second, ids[len(ids)-1], "the burst handled", func(v eventView) bool { return v.Outcome == "ok" })
	for _, id := range ids { // every one: the last acknowledged is not the last handled
		waitEvent(t, rt, 60*time.Second, id, "the burst handled", func(v eventView) bool { return v.Outcome == "ok" })
	}
	peak, err := rt.state.Size()
	if err != nil {
		t.Fatal(err)
	}
	compactions := rt.state.Stats().Compactions
	// Traffic goes on, one event at a time, until the compaction.
	for deadline := time.Now().Add(90 * time.Second); rt.state.Stats().Compactions == compactions; {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction 90 s after the burst (peak %+v)", peak)
		}
		if d, err := p.Deliver(context.Background(), p.Text("U0000000000000000000000000000b0ff", "trickle")); err != nil || !d.Delivered {
			t.Fatalf("trickle delivery: %+v %v", d, err)
		}
	}
	after, err := rt.state.Size()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pages %d KiB after the burst, %d KiB compacted (%d KiB in use)", peak.Pages>>10, after.Pages>>10, after.InUse>>10)
	if after.Pages >= peak.Pages*2/3 {
		t.Fatalf("pages %d after the compaction, %d at the burst: want at least a third given back", after.Pages, peak.Pages)
	}
	for _, id := range []string{ids[0], ids[len(ids)/2], ids[len(ids)-1]} {
		if err := samWorkerStore(t, rt).Claim(context.Background(), id, time.Minute); !errors.Is(err, idempotency.ErrCompleted) {
			t.Fatalf("the burst's event %s after the compaction: %v, want completed", id, err)
		}
		if v, ok := event(t, rt, id); !ok || v.Outcome != "ok" {
			t.Fatalf("the burst's event %s in the event log after the compaction: %+v", id, v)
		}
	}
}
