package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/ring"
	"github.com/linegate/linegate/pkg/bot"
)

// Default bounds of a Store: a console left open all day shows the newest.
const (
	DefaultTranscript = 5000     // chat entries, every chat together
	DefaultActivity   = 2000     // events whose receives and raw JSON are kept
	transcriptBytes   = 16 << 20 // the transcript's events and messages together
	maxReceives       = 32       // receives kept per event (the first and the newest)
	maxRawEvent       = 16 << 10
)

// Entry is one thing that happened in a chat, numbered in the order the
// platform recorded it: a webhook event from the chat (From "user"), a
// message the bot sent (a reply or a push, From "bot"), a loading
// animation the bot started, or the bot marking the user's messages read.
type Entry struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Chat string    `json:"chat"`
	// Channel is the named channel the chat is with ("" for the default
	// channel): one user in two channels is two chats.
	Channel string `json:"channel,omitempty"`
	From    string `json:"from"`
	// Kind is "event", "reply", "push", "loading" or "read".
	Kind string `json:"kind"`
	// Event is the webhook event exactly as LINE sent it (Kind "event").
	Event          json.RawMessage `json:"event,omitempty"`
	WebhookEventID string          `json:"webhookEventId,omitempty"`
	// Messages, RetryKey and RequestID are a send's (Kind "reply" or "push").
	Messages  []json.RawMessage `json:"messages,omitempty"`
	RetryKey  string            `json:"retryKey,omitempty"`
	RequestID string            `json:"requestId,omitempty"`
	// LoadingSeconds is a loading animation's length (Kind "loading").
	LoadingSeconds int `json:"loadingSeconds,omitempty"`
	// ReadMessageID is the message a read mark covers the chat's messages
	// up to, itself included (Kind "read").
	ReadMessageID string `json:"readMessageId,omitempty"`
}

// Chat is one chat the transcript knows: its ID (a user, group or room),
// the channel it is with ("" for the default one), its type, and its
// newest entry's number.
type Chat struct {
	ID      string `json:"id"`
	Channel string `json:"channel,omitempty"`
	Type    string `json:"type"`
	LastSeq uint64 `json:"lastSeq"`
	Entries int    `json:"entries"`
}

// Receive is one worker receive of an event, as the console shows it.
type Receive struct {
	At               time.Time `json:"at"`
	ReceiveCount     int       `json:"receiveCount"`
	Outcome          string    `json:"outcome"`
	Queue            string    `json:"queue,omitempty"`
	Long             bool      `json:"long,omitempty"`
	DurationMs       float64   `json:"durationMs"`
	RetryInMs        float64   `json:"retryInMs,omitempty"`
	Error            string    `json:"error,omitempty"`
	Panicked         bool      `json:"panicked,omitempty"`
	DeadLetterReason string    `json:"deadLetterReason,omitempty"`
	TraceID          string    `json:"traceId,omitempty"`
}

// Activity is what the console knows of one webhook event beyond the event
// log: where it came from, when the webhook received it, its raw JSON (for
// replay), and every receive.
type Activity struct {
	WebhookEventID string          `json:"webhookEventId"`
	Type           string          `json:"type"`
	Chat           string          `json:"chat,omitempty"`
	Channel        string          `json:"channel,omitempty"`
	SourceType     string          `json:"sourceType,omitempty"`
	Destination    string          `json:"destination,omitempty"`
	ReceivedAt     time.Time       `json:"receivedAt"`
	Event          json.RawMessage `json:"event,omitempty"`
	Receives       []Receive       `json:"receives"`
	// HandledAt is when the first receive that ran it to the end (ok or
	// held) finished: ReceivedAt to HandledAt is its latency.
	HandledAt time.Time `json:"handledAt,omitzero"`
}

// Store keeps the console's transcript and per-event activity, both
// bounded. It is safe for concurrent use; onChange (if set) is called with
// the topics each write touched.
type Store struct {
	onChange func(topics ...string)

	mu       sync.Mutex
	seq      uint64
	entries  []Entry // oldest first; at most max entries and transcriptBytes
	size     int     // bytes of events and messages in entries
	max      int
	seen     map[string]bool // webhookEventIds in entries: a redelivery is not a new message
	activity map[string]*Activity
	order    *ring.Buffer[string]
}

// NewStore returns a Store keeping at most transcript chat entries and the
// activity of at most events events (defaults when ≤ 0).
func NewStore(transcript, events int, onChange func(topics ...string)) *Store {
	if transcript <= 0 {
		transcript = DefaultTranscript
	}
	if events <= 0 {
		events = DefaultActivity
	}
	if onChange == nil {
		onChange = func(...string) {}
	}
	return &Store{onChange: onChange, max: transcript, seen: map[string]bool{},
		activity: map[string]*Activity{}, order: ring.New[string](events)}
}

// wireEvent is what the store reads of a webhook event: its chat is the
// bot's (bot.Source: the group, the room, else the user).
type wireEvent struct {
	Type           string     `json:"type"`
	WebhookEventID string     `json:"webhookEventId"`
	Source         bot.Source `json:"source"`
}

// Webhook records the events of a webhook body the webhook of channel ch
// ("" for the default one) received at at (the caller has verified its
// signature): each event with a chat joins its chat's transcript once (a
// redelivery carries the same webhookEventId), and every event gets its
// activity entry.
func (s *Store) Webhook(ch string, body []byte, at time.Time) {
	var b struct {
		Destination string            `json:"destination"`
		Events      []json.RawMessage `json:"events"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Events) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, raw := range b.Events {
		var e wireEvent
		if json.Unmarshal(raw, &e) != nil || e.WebhookEventID == "" || s.seen[e.WebhookEventID] {
			continue
		}
		raw = compact(raw)
		chat := e.Source.ChatID()
		if chat != "" {
			s.seen[e.WebhookEventID] = true
			s.pushLocked(Entry{At: at, Chat: chat, Channel: ch, From: "user", Kind: "event", Event: raw, WebhookEventID: e.WebhookEventID})
		}
		if _, ok := s.activity[e.WebhookEventID]; ok {
			continue
		}
		a := &Activity{WebhookEventID: e.WebhookEventID, Type: e.Type, Chat: chat, Channel: ch, SourceType: string(e.Source.Type),
			Destination: b.Destination, ReceivedAt: at, Receives: []Receive{}}
		if len(raw) <= maxRawEvent {
			a.Event = raw
		}
		s.activity[e.WebhookEventID] = a
		if old, evicted := s.order.Push(e.WebhookEventID); evicted {
			delete(s.activity, old)
		}
	}
	s.onChange(TopicChat, TopicEvents)
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return slices.Clone(raw)
	}
	return b.Bytes()
}

// pushLocked numbers e and appends it. Past a quarter over the count, or
// over the byte budget, the oldest entries are forgotten down to the count
// and the budget (in one move, so a full transcript costs no copy per push).
func (s *Store) pushLocked(e Entry) {
	s.seq++
	e.Seq = s.seq
	s.entries = append(s.entries, e)
	s.size += entrySize(e)
	if len(s.entries) <= s.max+s.max/4 && s.size <= transcriptBytes {
		return
	}
	drop := 0
	for len(s.entries)-drop > s.max || (s.size > transcriptBytes && len(s.entries)-drop > 1) {
		old := s.entries[drop]
		s.size -= entrySize(old)
		if old.WebhookEventID != "" {
			delete(s.seen, old.WebhookEventID)
		}
		drop++
	}
	s.entries = slices.Delete(s.entries, 0, drop)
}

func entrySize(e Entry) int {
	n := len(e.Event)
	for _, m := range e.Messages {
		n += len(m)
	}
	return n
}

// Sent records a message the bot of channel ch sent to chat (a reply or a
// push).
func (s *Store) Sent(ch, chat, via, retryKey, requestID string, messages []json.RawMessage, at time.Time) {
	s.mu.Lock()
	s.pushLocked(Entry{At: at, Chat: chat, Channel: ch, From: "bot", Kind: via, Messages: messages, RetryKey: retryKey, RequestID: requestID})
	s.mu.Unlock()
	s.onChange(TopicChat)
}

// Loading records a loading animation the bot of channel ch started in
// chat.
func (s *Store) Loading(ch, chat string, seconds int, at time.Time) {
	s.mu.Lock()
	s.pushLocked(Entry{At: at, Chat: chat, Channel: ch, From: "bot", Kind: "loading", LoadingSeconds: seconds})
	s.mu.Unlock()
	s.onChange(TopicChat)
}

// Read records the bot of channel ch marking chat's messages read up to
// and including the message messageID (LINE's mark as read). A mark
// without a chat (a token the local LINE API did not issue) belongs to no
// transcript.
func (s *Store) Read(ch, chat, messageID string, at time.Time) {
	if chat == "" {
		return
	}
	s.mu.Lock()
	s.pushLocked(Entry{At: at, Chat: chat, Channel: ch, From: "bot", Kind: "read", ReadMessageID: messageID})
	s.mu.Unlock()
	s.onChange(TopicChat)
}

// Observe records one worker receive of the event id.
func (s *Store) Observe(id string, r Receive) {
	s.mu.Lock()
	a, ok := s.activity[id]
	if ok {
		if len(a.Receives) >= maxReceives {
			// Keep the first receive and the newest ones.
			a.Receives = append(a.Receives[:1], a.Receives[2:]...)
		}
		a.Receives = append(a.Receives, r)
		if (r.Outcome == "ok" || r.Outcome == "held") && a.HandledAt.IsZero() {
			a.HandledAt = r.At
		}
	}
	s.mu.Unlock()
	if ok {
		s.onChange(TopicEvents)
	}
}

// Activity returns a copy of the event id's activity.
func (s *Store) Activity(id string) (Activity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.activity[id]
	if !ok {
		return Activity{}, false
	}
	c := *a
	c.Receives = slices.Clone(a.Receives)
	return c, true
}

// Chats lists the chats in the transcript, the most recently active first:
// one per channel and chat ID.
func (s *Store) Chats() []Chat {
	s.mu.Lock()
	defer s.mu.Unlock()
	type key struct{ channel, chat string }
	byID := map[key]*Chat{}
	var out []*Chat
	for _, e := range s.entries {
		k := key{e.Channel, e.Chat}
		c := byID[k]
		if c == nil {
			c = &Chat{ID: e.Chat, Channel: e.Channel, Type: chatType(e.Chat)}
			byID[k] = c
			out = append(out, c)
		}
		c.LastSeq = e.Seq
		c.Entries++
	}
	slices.SortFunc(out, func(a, b *Chat) int { return cmp.Compare(b.LastSeq, a.LastSeq) })
	res := make([]Chat, len(out))
	for i, c := range out {
		res[i] = *c
	}
	return res
}

// chatType is a LINE ID's kind by its first letter.
func chatType(id string) string {
	switch {
	case id == "":
		return ""
	case id[0] == 'C':
		return "group"
	case id[0] == 'R':
		return "room"
	}
	return "user"
}

// Transcript returns the entries of chat in channel ch ("" for the default
// one) numbered after after, oldest first, at most limit of the newest.
func (s *Store) Transcript(ch, chat string, after uint64, limit int) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Entry{}
	for _, e := range s.entries {
		if e.Chat == chat && e.Channel == ch && e.Seq > after {
			out = append(out, e)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// ChatsHandler serves GET /_local/chats: Chats as JSON.
func (s *Store) ChatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, http.StatusOK, s.Chats()) })
}

// TranscriptHandler serves GET
// /_local/chat?chatId=ID[&channel=NAME][&after=SEQ][&limit=N]: the chat's
// entries (in the default channel, or the named one) in the platform's
// order (default limit 500).
func (s *Store) TranscriptHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		chat := q.Get("chatId")
		if chat == "" {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "chatId is required"})
			return
		}
		after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
		limit := 500
		if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
			limit = min(n, 5000)
		}
		WriteJSON(w, http.StatusOK, s.Transcript(q.Get("channel"), chat, after, limit))
	})
}

// WriteJSON answers status with v as indented JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
