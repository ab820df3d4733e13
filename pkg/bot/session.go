package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// SessionStore keeps one versioned value per chat: the raw form of a
// Session. The worker binds one per record (BindSessions), backed by the
// idempotency table with a TTL.
type SessionStore interface {
	// Load returns the chat's value and its version (nil and 0 when the
	// chat has none, or it expired).
	Load(ctx context.Context, chatID string) (value []byte, version int64, err error)
	// Save writes value if the chat is still at version, and returns the new
	// version; otherwise it fails with an error wrapping ErrSessionConflict.
	Save(ctx context.Context, chatID string, value []byte, version int64) (int64, error)
}

// ErrSessionConflict is returned by Session.Save and Session.End when the
// chat's session changed since this handler loaded it (another event of
// the chat saved first). Nothing was written. Return it to have the event
// retried with the new state, or load the session again.
var ErrSessionConflict = errors.New("bot: session changed since it was loaded")

// ErrNoSessions is returned by Event.Session for an event with no
// SessionStore bound: a handler run outside the worker.
var ErrNoSessions = errors.New("bot: no session store bound to the event (sessions work in the worker, or after BindSessions)")

// ErrNoChat is returned by Event.Session for an event without a chat
// (no user, group or room in its source).
var ErrNoChat = errors.New("bot: the event has no chat to keep a session for")

// BindSessions attaches the store Event.Session reads and writes. The
// worker binds one per record.
func (e *Event) BindSessions(s SessionStore) { e.sessions = s }

// Session is the conversation state of the chat an event came from (the
// group or room when there is one, else the user): what a multi-step flow
// remembers between messages. Load it with Event.Session, change the state,
// Save it.
//
// Writes are optimistic: Save succeeds only if nobody saved the chat's
// session since it was loaded (ErrSessionConflict otherwise). A session
// expires when it has not been saved for the worker's session TTL.
//
// A retried event sees the session as it was before its first attempt:
// every save remembers the state it replaced and which event saved it, so
// a handler that saved and then failed repeats the same transition instead
// of applying it twice.
type Session struct {
	// ChatID is the user, group or room the session belongs to.
	ChatID string
	// Version is the version loaded or last saved; 0 for a chat with no
	// state.
	Version int64

	e      *Event
	before json.RawMessage // the state before this event: what Load returned
}

// record is a session as stored: the state, the state the saving event
// found, and the event's webhookEventId.
type record struct {
	State json.RawMessage `json:"state"`
	Prev  json.RawMessage `json:"prev,omitempty"`
	Event string          `json:"event,omitempty"`
}

// Session loads the chat's conversation state into state (a pointer, as
// for json.Unmarshal), leaving it untouched when the chat has none: start
// from a zero value. It fails with ErrNoChat, ErrNoSessions, or the store's
// error.
func (e *Event) Session(ctx context.Context, state any) (*Session, error) {
	chat := e.Source.ChatID()
	if chat == "" {
		return nil, ErrNoChat
	}
	if e.sessions == nil {
		return nil, ErrNoSessions
	}
	raw, version, err := e.sessions.Load(ctx, chat)
	if err != nil {
		return nil, fmt.Errorf("session: load: %w", err)
	}
	s := &Session{ChatID: chat, Version: version, e: e}
	if len(raw) == 0 {
		return s, nil
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("session: stored record: %w", err)
	}
	s.before = rec.State
	if rec.Event != "" && rec.Event == e.WebhookEventID {
		s.before = rec.Prev // this event saved already, then failed: replay from before it
	}
	if !isNull(s.before) {
		if err := json.Unmarshal(s.before, state); err != nil {
			return nil, fmt.Errorf("session: state does not decode into %T: %w", state, err)
		}
	}
	return s, nil
}

// Save stores state (as JSON, at most about 150 KB: the stored record also
// keeps the state it replaced, within the store's 300 KB) as the chat's
// session, if the
// session has not changed since it was loaded or last saved by this
// handler; otherwise it fails with ErrSessionConflict and writes nothing.
func (s *Session) Save(ctx context.Context, state any) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("session: state: %w", err)
	}
	return s.write(ctx, b)
}

// End finishes the conversation: the next event of the chat starts from a
// zero state. Like Save it fails with ErrSessionConflict when the session
// changed since it was loaded.
func (s *Session) End(ctx context.Context) error { return s.write(ctx, []byte("null")) }

func (s *Session) write(ctx context.Context, state []byte) error {
	prev := s.before
	if len(prev) == 0 {
		prev = json.RawMessage("null")
	}
	rec, err := json.Marshal(record{State: state, Prev: prev, Event: s.e.WebhookEventID})
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	v, err := s.e.sessions.Save(ctx, s.ChatID, rec, s.Version)
	if err != nil {
		return fmt.Errorf("session: save: %w", err)
	}
	s.Version = v
	return nil
}

func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}
