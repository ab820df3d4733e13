// Package bottest tests a bot's handlers from the bot's own module, the
// way net/http/httptest tests an http.Handler: build an event as LINE
// would send it (Text, Postback, Follow, Event), Send it to a Bot, and look
// at what the bot sent LINE (Texts, Messages, Loading).
//
// A Bot runs the router as linegate's worker runs it in Lambda, with the
// same code: the event is claimed by its webhookEventId (sent again, it is
// a duplicate and runs nothing), bot.Once steps and sessions live in
// memory for the Bot's life, a reply goes out while the reply token is
// fresh and a push with a retry key after, and the messages reach a local
// LINE Messaging API that checks them as LINE does (at most five, valid
// message objects). Only the queues are not there: a route with bot.Queue
// or bot.Debounce runs at once, each event on its own.
//
// A Bot has its own clock: events are stamped with it when sent, and
// Advance moves it, so a test can let a reply token expire (the answer is
// then pushed) or a session lapse.
package bottest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// start is when a new Bot's clock starts.
var start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// token is the channel access token the Bot's LINE client and its local
// LINE API share.
const token = "bottest-channel-access-token"

// destination is the bot user ID events are sent to.
const destination = "U00000000000000000000000000b0t00"

// Bot runs a router as the worker does, against memory state and a local
// LINE Messaging API. It is safe for concurrent use.
type Bot struct {
	line *linemock.Server
	proc *worker.Processor

	mu       sync.Mutex
	now      time.Time
	received map[string]int // webhookEventId -> sends
	result   map[string]worker.Result
	store    *idempotency.Memory
}

// New returns a Bot running r.
func New(r *bot.Router) *Bot {
	b := &Bot{now: start, received: map[string]int{}, result: map[string]worker.Result{}}
	b.line = linemock.New(linemock.WithTokens(token), linemock.WithClock(b.Now))
	b.store = idempotency.NewMemory(idempotency.WithClock(b.Now))
	hc := &http.Client{Transport: handlerTransport{b.line}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	proc, err := worker.New(r, b.store,
		worker.WithMessenger(func() bot.Messenger {
			return lineapi.New(token, lineapi.WithHTTPClient(hc), lineapi.WithBaseURL("http://line.bottest"),
				lineapi.WithClock(b.Now), lineapi.WithLogger(log),
				lineapi.WithSleep(func(context.Context, time.Duration) error { return nil }))
		}),
		worker.WithStateStore(b.store),
		worker.WithClock(b.Now),
		worker.WithLogger(log),
		worker.WithConcurrency(1),
		worker.WithObserver(b.observe),
	)
	if err != nil {
		panic(fmt.Sprintf("bottest: %v", err)) // only a nil router gets here
	}
	b.proc = proc
	return b
}

// handlerTransport serves HTTP requests with an http.Handler in this
// process: the Bot's LINE client reaches its local LINE API without a
// listener.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func (b *Bot) observe(r worker.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.result[r.MessageID] = r
}

// Now is the Bot's clock.
func (b *Bot) Now() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

// Advance moves the Bot's clock forward by d: events sent before are d
// older (a reply token lives a minute), sessions d closer to expiry.
func (b *Bot) Advance(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
}

// Send delivers e to the bot as LINE's webhook would, and returns the
// handler's error (nil when it succeeded, the event was a duplicate, or no
// handler took it). A handler's panic comes back as an error that says so,
// with the panic's value. An event whose timestamp
// is 0 (the builders' events) is stamped with the Bot's clock, and its
// reply token is issued then; sending the same event again is LINE's
// redelivery: the worker finds it handled and runs nothing, or, after a
// failure, runs it again with its steps and session as the failed attempt
// left them.
func (b *Bot) Send(ctx context.Context, e *bot.Event) error {
	raw, at, err := b.stamp(e)
	if err != nil {
		return err
	}
	if e.ReplyToken != "" {
		b.line.IssueReplyTokenTo(e.ReplyToken, e.Source.ChatID(), at)
	}
	if tok := readToken(raw); tok != "" {
		b.line.IssueMarkAsReadToken(tok, e.Source.ChatID(), messageID(raw))
	}
	b.mu.Lock()
	b.received[e.WebhookEventID]++
	n := b.received[e.WebhookEventID]
	msgID := fmt.Sprintf("%s-%d", e.WebhookEventID, n)
	b.mu.Unlock()
	body, err := json.Marshal(map[string]any{
		"version": "0", "id": msgID, "detail-type": e.Type, "source": "line.webhook",
		"time": at.UTC().Format(time.RFC3339), "region": "ap-northeast-1", "resources": []string{},
		"detail": map[string]any{"destination": destination, "receivedAt": at.UTC().Format(time.RFC3339Nano), "event": raw},
	})
	if err != nil {
		return fmt.Errorf("bottest: %w", err)
	}
	msg := events.SQSMessage{MessageId: msgID, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(n)}}
	if _, err := b.proc.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
		return fmt.Errorf("bottest: %w", err)
	}
	b.mu.Lock()
	res := b.result[msgID]
	b.mu.Unlock()
	return res.Err
}

// stamp is e's raw event, with the Bot's clock as its timestamp when it
// has none, and the event's time.
func (b *Bot) stamp(e *bot.Event) (json.RawMessage, time.Time, error) {
	if e == nil {
		return nil, time.Time{}, fmt.Errorf("bottest: Send of a nil event")
	}
	if e.Timestamp.UnixMilli() != 0 {
		return e.Raw, e.Timestamp, nil
	}
	var m map[string]any
	if err := json.Unmarshal(e.Raw, &m); err != nil {
		return nil, time.Time{}, fmt.Errorf("bottest: the event's JSON: %w", err)
	}
	at := b.Now()
	m["timestamp"] = at.UnixMilli()
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("bottest: %w", err)
	}
	e.Raw, e.Timestamp = raw, at.Truncate(time.Millisecond)
	return raw, at, nil
}

// Message is one message the bot sent LINE.
type Message struct {
	// Via is "reply" or "push".
	Via string
	// To is the chat it went to.
	To string
	// Type is the message object's type: "text", "flex", "image", …
	Type string
	// Text is a text message's text ("" for other types).
	Text string
	// JSON is the message object as LINE received it.
	JSON json.RawMessage
}

// Messages lists every message the bot sent, in order: each reply or push
// of up to five messages gives one Message per message object.
func (b *Bot) Messages() []Message {
	var out []Message
	for _, rec := range b.line.Messages() {
		for _, raw := range rec.Messages {
			var m struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(raw, &m)
			out = append(out, Message{Via: string(rec.Via), To: rec.To, Type: m.Type, Text: m.Text, JSON: raw})
		}
	}
	return out
}

// Texts lists the text of every text message the bot sent, in order.
func (b *Bot) Texts() []string {
	var out []string
	for _, m := range b.Messages() {
		if m.Type == "text" {
			out = append(out, m.Text)
		}
	}
	return out
}

// Loading lists the chats the bot showed the loading animation in, once
// per animation.
func (b *Bot) Loading() []string {
	var out []string
	for _, l := range b.line.Loading() {
		out = append(out, l.ChatID)
	}
	return out
}

// Session reads the session the bot keeps for chatID (a user, group or
// room ID) into state, as Event.Session would; ok is false when the chat
// has none (never saved, ended, or expired).
func (b *Bot) Session(ctx context.Context, chatID string, state any) (ok bool, err error) {
	raw, ok, err := sessionOf(ctx, b.store, chatID)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(raw, state); err != nil {
		return false, fmt.Errorf("bottest: the session of %s does not decode into %T: %w", chatID, state, err)
	}
	return true, nil
}

// sessionOf is the stored state of chatID's session through the worker's
// own session store.
func sessionOf(ctx context.Context, store *idempotency.Memory, chatID string) (json.RawMessage, bool, error) {
	e, err := bot.Parse(json.RawMessage(`{"type":"bottest","webhookEventId":"bottest-session-read","source":{"type":"user","userId":`+quote(chatID)+`}}`), destination, time.Time{}, nil)
	if err != nil {
		return nil, false, fmt.Errorf("bottest: %w", err)
	}
	worker.BindState(e, store, 24*time.Hour)
	var state json.RawMessage
	s, err := e.Session(ctx, &state)
	if err != nil {
		return nil, false, fmt.Errorf("bottest: %w", err)
	}
	if s.Version == 0 || len(state) == 0 || string(state) == "null" {
		return nil, false, nil
	}
	return state, true, nil
}

// seq numbers the builders' events.
var seq atomic.Int64

// ids returns a fresh webhookEventId, reply token, message ID and
// markAsReadToken.
func ids() (event, reply, message, read string) {
	n := seq.Add(1)
	return fmt.Sprintf("01BOTTEST%017d", n), fmt.Sprintf("bottest-reply-%d", n), fmt.Sprint(100000 + n), fmt.Sprintf("bottest-read-%d", n)
}

// Text is a text message from userID in a one-to-one chat with the bot.
func Text(userID, text string) *bot.Event {
	id, reply, msg, read := ids()
	return must(fmt.Sprintf(`{"type":"message","mode":"active","timestamp":0,"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":%q,"source":{"type":"user","userId":%s},"message":{"id":%q,"type":"text","quoteToken":"q-%s","markAsReadToken":%q,"text":%s}}`,
		id, reply, quote(userID), msg, msg, read, quote(text)))
}

// Postback is a postback action with data from userID (a button, a quick
// reply, a rich menu area).
func Postback(userID, data string) *bot.Event {
	id, reply, _, _ := ids()
	return must(fmt.Sprintf(`{"type":"postback","mode":"active","timestamp":0,"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":%q,"source":{"type":"user","userId":%s},"postback":{"data":%s}}`,
		id, reply, quote(userID), quote(data)))
}

// Follow is userID adding the bot as a friend.
func Follow(userID string) *bot.Event {
	id, reply, _, _ := ids()
	return must(fmt.Sprintf(`{"type":"follow","mode":"active","timestamp":0,"webhookEventId":%q,"deliveryContext":{"isRedelivery":false},"replyToken":%q,"source":{"type":"user","userId":%s},"follow":{"isUnblocked":false}}`,
		id, reply, quote(userID)))
}

// Event is the event raw as LINE sends it in a webhook's events array (a
// group message, a sticker, an event type of the future): what the other
// builders cannot make. A timestamp of 0 is the Bot's clock when sent.
func Event(raw string) (*bot.Event, error) {
	e, err := bot.Parse(json.RawMessage(raw), destination, time.Time{}, nil)
	if err != nil {
		return nil, fmt.Errorf("bottest: %w", err)
	}
	return e, nil
}

func must(raw string) *bot.Event {
	e, err := Event(raw)
	if err != nil {
		panic(err) // the builders' own JSON
	}
	return e
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// readToken and messageID read what the local LINE API must know of a
// message event to accept its mark-as-read.
func readToken(raw json.RawMessage) string {
	var m struct {
		Message struct {
			MarkAsReadToken string `json:"markAsReadToken"`
		} `json:"message"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Message.MarkAsReadToken
}

func messageID(raw json.RawMessage) string {
	var m struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Message.ID
}
