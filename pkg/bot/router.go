package bot

import (
	"context"
	"strings"
)

// Handler handles one event. A returned error fails the record, which is then
// retried (and dead-lettered if it keeps failing).
type Handler func(ctx context.Context, e *Event) error

// Middleware wraps a handler: logging, metrics, authorisation, recovery.
type Middleware func(Handler) Handler

// Router sends each event to the handler registered for it. Register handlers
// before the first Dispatch; Dispatch is safe for concurrent use afterwards.
type Router struct {
	byType   map[string]Handler
	text     []textRoute
	fallback Handler
	mw       []Middleware
}

type textRoute struct {
	prefix string
	h      func(ctx context.Context, e *Event, text string) error
}

// NewRouter returns an empty router; events nothing handles are acknowledged
// and dropped.
func NewRouter() *Router { return &Router{byType: map[string]Handler{}} }

// Use adds middleware around every handler, outermost first.
func (r *Router) Use(mw ...Middleware) { r.mw = append(r.mw, mw...) }

// On handles every event of a type, including types added to LINE after this
// code was written ("membership", …).
func (r *Router) On(eventType string, h Handler) { r.byType[eventType] = h }

// OnMessage handles every message event (text, image, sticker, …) that no
// OnText route took.
func (r *Router) OnMessage(h Handler) { r.On("message", h) }

// OnText handles text messages. With a prefix, only texts that start with it
// (the longest matching prefix wins); "" matches every text.
func (r *Router) OnText(prefix string, h func(ctx context.Context, e *Event, text string) error) {
	r.text = append(r.text, textRoute{prefix: prefix, h: h})
}

// OnFollow handles a user adding the bot as a friend (or unblocking it).
func (r *Router) OnFollow(h Handler) { r.On("follow", h) }

// OnUnfollow handles a user blocking the bot. There is no reply token.
func (r *Router) OnUnfollow(h Handler) { r.On("unfollow", h) }

// OnPostback handles postback actions with their data.
func (r *Router) OnPostback(h func(ctx context.Context, e *Event, data string) error) {
	r.On("postback", func(ctx context.Context, e *Event) error {
		d, _ := e.PostbackData()
		return h(ctx, e, d)
	})
}

// Default handles every event no other route took.
func (r *Router) Default(h Handler) { r.fallback = h }

// Dispatch runs the handler for e through the middleware. Events in standby
// mode are acknowledged and not answered: no handler runs.
func (r *Router) Dispatch(ctx context.Context, e *Event) error {
	if e.Standby() {
		return nil
	}
	h := r.route(e)
	if h == nil {
		return nil
	}
	for i := len(r.mw) - 1; i >= 0; i-- {
		h = r.mw[i](h)
	}
	return h(ctx, e)
}

func (r *Router) route(e *Event) Handler {
	if text, ok := e.Text(); ok {
		best := -1
		for i, tr := range r.text {
			if strings.HasPrefix(text, tr.prefix) && (best < 0 || len(tr.prefix) > len(r.text[best].prefix)) {
				best = i
			}
		}
		if best >= 0 {
			tr := r.text[best]
			return func(ctx context.Context, e *Event) error { return tr.h(ctx, e, text) }
		}
	}
	if h, ok := r.byType[e.Type]; ok {
		return h
	}
	return r.fallback
}
