package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/pkg/bot"
)

// Kinds of bench traffic. Every event's text is "<kind>:<n>", n being the
// event's index in the run, so that each effect can be counted per event.
const (
	KindNormal = "bench"  // works, then replies "done <n>"
	KindFlaky  = "flaky"  // fails its first attempt, then behaves as KindNormal
	KindPoison = "poison" // fails every attempt: must end in a DLQ
)

// Handler errors, so a reader of the worker's logs can tell an injected
// failure from a real one.
var (
	// ErrTransient is what a KindFlaky event fails with on its first attempt.
	ErrTransient = errors.New("bench: transient failure on the first attempt")
	// ErrPoison is what a KindPoison event fails with on every attempt.
	ErrPoison = errors.New("bench: poison event fails every attempt")
)

// eventText is the text of event n of the given kind.
func eventText(kind string, n int) string { return kind + ":" + strconv.Itoa(n) }

// doneText is the reply the handler sends for event n.
func doneText(n int) string { return "done " + strconv.Itoa(n) }

// parseText reads "<kind>:<n>" back. Only the canonical decimal form of a
// non-negative n is accepted, so one event cannot be counted under two texts.
func parseText(text string) (kind string, n int, ok bool) {
	kind, num, found := strings.Cut(text, ":")
	if !found {
		return "", 0, false
	}
	switch kind {
	case KindNormal, KindFlaky, KindPoison, KindSlow:
	default:
		return "", 0, false
	}
	n, ok = canonicalIndex(num)
	return kind, n, ok
}

// parseDone reads the event index out of one recorded LINE message object,
// {"type":"text","text":"done <n>"}; ok is false for anything else.
func parseDone(raw json.RawMessage) (int, bool) {
	var m struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Type != "text" {
		return 0, false
	}
	num, found := strings.CutPrefix(m.Text, "done ")
	if !found {
		return 0, false
	}
	return canonicalIndex(num)
}

func canonicalIndex(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// handler is the bot every system runs: the same code inside the webhook
// request (sync), in a goroutine (background), in the durable-direct
// worker and in linegate's worker.
type handler struct {
	work time.Duration
	fx   *sideEffects

	mu    sync.Mutex
	tried map[string]bool // webhookEventIds of flaky events already attempted
}

// newRouter returns the bench bot: each text "<kind>:<n>" does its work
// (sleeps work, then counts a side effect in fx) and replies "done <n>",
// except the injected failures of KindFlaky and KindPoison.
func newRouter(work time.Duration, fx *sideEffects) *bot.Router {
	h := &handler{work: work, fx: fx, tried: map[string]bool{}}
	r := bot.NewRouter()
	r.OnText("", h.handle)
	return r
}

// sideEffects counts, per event, how many times a handler did its work: the
// effect a user or a bill would see twice (a charge, an LLM call, a counter),
// whether or not the reply after it reached LINE.
type sideEffects struct {
	mu    sync.Mutex
	count []int
}

func newSideEffects(events int) *sideEffects { return &sideEffects{count: make([]int, events)} }

func (s *sideEffects) record(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= 0 && n < len(s.count) {
		s.count[n]++
	}
}

// counts returns a copy of the counts by event index.
func (s *sideEffects) counts() []int {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.count...)
}

func (h *handler) handle(ctx context.Context, e *bot.Event, text string) error {
	kind, n, ok := parseText(text)
	if !ok {
		return nil // not bench traffic: acknowledged, no effect
	}
	switch kind {
	case KindPoison:
		return fmt.Errorf("event %d: %w", n, ErrPoison)
	case KindFlaky:
		if h.firstAttempt(e.WebhookEventID) {
			return fmt.Errorf("event %d: %w", n, ErrTransient)
		}
	}
	if err := h.doWork(ctx, e, n); err != nil {
		return fmt.Errorf("event %d: simulated work: %w", n, err)
	}
	return e.ReplyText(ctx, doneText(n))
}

// doWork is the event's side effect: h.work of work, then counted. In
// linegate's worker it runs under bot.Once, as a linegate bot runs a side
// effect, so a retry after it (a reply LINE refused) does not do it again;
// the baselines have nothing of the kind and just do it.
func (h *handler) doWork(ctx context.Context, e *bot.Event, n int) error {
	work := func(ctx context.Context) (bool, error) {
		if err := backoff.Sleep(ctx, h.work); err != nil {
			return false, err
		}
		h.fx.record(n)
		return true, nil
	}
	_, err := bot.Once(ctx, e, "work", work)
	if errors.Is(err, bot.ErrNoSteps) {
		_, err = work(ctx)
	}
	return err
}

func (h *handler) firstAttempt(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tried[id] {
		return false
	}
	h.tried[id] = true
	return true
}
