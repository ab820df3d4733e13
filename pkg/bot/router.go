package bot

import (
	"context"
	"strings"
)

// Handler handles one event. A returned error fails the record, which is then
// retried (and dead-lettered if it keeps failing); wrap it with Permanent
// when retrying cannot help, and it is dead-lettered at once.
type Handler func(ctx context.Context, e *Event) error

// Middleware wraps a handler: logging, metrics, authorisation, recovery.
type Middleware func(Handler) Handler

// RouteOption changes how a route's events are run: pass it to any On…
// registration.
type RouteOption func(*routeOptions)

// routeOptions are what the options of one registration set.
type routeOptions struct {
	long bool
}

// Long declares the route's work long (an LLM call, image generation, a
// slow API): the worker that receives the event shows the loading
// animation (one-to-one chats), hands the event to the long-work queue and
// moves on, so the chat's next messages and every other chat's quick
// replies never wait behind it. The handler then runs on the long-work
// queue's own capacity, with the event as LINE sent it: Reply answers by
// reply while the token is fresh and by push (with the retry key) after,
// and the loading animation is refreshed for work past a minute. Its
// result is not ordered with the chat's later messages (docs/adr/0002).
func Long() RouteOption { return func(o *routeOptions) { o.long = true } }

func optionsOf(opts []RouteOption) routeOptions {
	var o routeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// route is one registered handler with its options.
type route struct {
	h Handler
	routeOptions
}

// Router sends each event to the handler registered for it. Register handlers
// before the first Dispatch; Dispatch is safe for concurrent use afterwards.
type Router struct {
	byType   map[string]route
	text     []textRoute
	fallback route
	mw       []Middleware
}

type textRoute struct {
	prefix string
	h      func(ctx context.Context, e *Event, text string) error
	routeOptions
}

// NewRouter returns an empty router; events nothing handles are acknowledged
// and dropped.
func NewRouter() *Router { return &Router{byType: map[string]route{}} }

// Use adds middleware around every handler, outermost first.
func (r *Router) Use(mw ...Middleware) { r.mw = append(r.mw, mw...) }

// On handles every event of a type, including types added to LINE after this
// code was written ("membership", …).
func (r *Router) On(eventType string, h Handler, opts ...RouteOption) {
	r.byType[eventType] = route{h: h, routeOptions: optionsOf(opts)}
}

// OnMessage handles every message event (text, image, sticker, …) that no
// OnText route took.
func (r *Router) OnMessage(h Handler, opts ...RouteOption) { r.On("message", h, opts...) }

// OnText handles text messages. With a prefix, only texts that start with it
// (the longest matching prefix wins); "" matches every text.
func (r *Router) OnText(prefix string, h func(ctx context.Context, e *Event, text string) error, opts ...RouteOption) {
	r.text = append(r.text, textRoute{prefix: prefix, h: h, routeOptions: optionsOf(opts)})
}

// OnFollow handles a user adding the bot as a friend (or unblocking it).
func (r *Router) OnFollow(h Handler, opts ...RouteOption) { r.On("follow", h, opts...) }

// OnUnfollow handles a user blocking the bot. There is no reply token.
func (r *Router) OnUnfollow(h Handler, opts ...RouteOption) { r.On("unfollow", h, opts...) }

// OnPostback handles postback actions with their data.
func (r *Router) OnPostback(h func(ctx context.Context, e *Event, data string) error, opts ...RouteOption) {
	r.On("postback", func(ctx context.Context, e *Event) error {
		d, _ := e.PostbackData()
		return h(ctx, e, d)
	}, opts...)
}

// Default handles every event no other route took.
func (r *Router) Default(h Handler, opts ...RouteOption) {
	r.fallback = route{h: h, routeOptions: optionsOf(opts)}
}

// Dispatch runs the handler for e through the middleware. Events in standby
// mode are acknowledged and not answered: no handler runs.
func (r *Router) Dispatch(ctx context.Context, e *Event) error {
	if e.Standby() {
		return nil
	}
	h := r.route(e).h
	if h == nil {
		return nil
	}
	for i := len(r.mw) - 1; i >= 0; i-- {
		h = r.mw[i](h)
	}
	return h(ctx, e)
}

// Long reports whether e's route was registered with Long: the worker then
// hands the event to the long-work queue instead of dispatching it. An event
// in standby, or one no route takes, is never long.
func (r *Router) Long(e *Event) bool {
	if e.Standby() {
		return false
	}
	rt := r.route(e)
	return rt.h != nil && rt.long
}

func (r *Router) route(e *Event) route {
	if text, ok := e.Text(); ok {
		best := -1
		for i, tr := range r.text {
			if strings.HasPrefix(text, tr.prefix) && (best < 0 || len(tr.prefix) > len(r.text[best].prefix)) {
				best = i
			}
		}
		if best >= 0 {
			tr := r.text[best]
			return route{h: func(ctx context.Context, e *Event) error { return tr.h(ctx, e, text) }, routeOptions: tr.routeOptions}
		}
	}
	if rt, ok := r.byType[e.Type]; ok {
		return rt
	}
	return r.fallback
}
