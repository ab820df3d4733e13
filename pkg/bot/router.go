package bot

import (
	"context"
	"slices"
	"strings"
	"time"
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
	queue           string        // Queue; "": where the event is received
	window, maxWait time.Duration // Debounce; a zero window: not debounced
}

// longQueue is the route queue every linegate template declares for long
// work (the LongQueue resource), and the queue debounced routes wait on.
const longQueue = "long"

// Queue runs the route's handler on the named route queue, for long work
// (an LLM call, image generation, a slow API): the worker that receives
// the event shows the loading animation (one-to-one chats), hands the
// event to that queue and moves on, so the chat's next messages and every
// other chat's quick replies never wait behind it. The handler then runs on
// the queue's own capacity (its event source's concurrency), with the
// event as LINE sent it: Reply answers by reply while the token is fresh
// and by push (with the retry key) after, and the loading animation is
// refreshed for work past a minute. Its result is not ordered with the
// chat's later messages (docs/adr/0002).
//
// A name is a queue of the worker's queue table, ROUTE_QUEUES in
// template.yaml (LongQueue, "long", is declared there); a worker whose bot
// names a queue the table lacks fails at start with the name. Queue("")
// runs the route where its event is received.
func Queue(name string) RouteOption { return func(o *routeOptions) { o.queue = name } }

// maxDebounce is the longest debounce window and wait: SQS delays a
// message at most 15 minutes, and the worker waits for a burst's end with
// such a delay.
const maxDebounce = 15 * time.Minute

// Debounce hands one handler call all of a chat's messages of this route
// that arrive in a burst: people split one thought into several quick
// messages, and an LLM bot should answer the thought once. An event of the
// route waits until no newer one of its chat (and route) has arrived for
// window, and at most maxWait after the burst's first; then the handler
// runs once, on the newest event (its reply token is the freshest), with
// every event of the burst, oldest first, in e.Batch(). Each event is in
// exactly one batch, and a chat's batches run one after another.
//
// The window is conversational time, measured on the clock (never
// compressed by `linegate local --time-scale`). A debounced handler runs
// on the long-work queue ("long"), as a route with Queue does (docs/adr/0009-debounce.md): its answer
// is not ordered with the chat's later messages of other routes, which are
// answered while the burst waits. Without a long-work queue (a worker
// built without one) every event runs on its own. A window of 0 or less
// turns debouncing off; window and maxWait are capped at 15 minutes, and
// a maxWait under window is window.
func Debounce(window, maxWait time.Duration) RouteOption {
	return func(o *routeOptions) {
		if window <= 0 {
			o.window, o.maxWait = 0, 0
			return
		}
		o.window = min(window, maxDebounce)
		o.maxWait = min(max(maxWait, o.window), maxDebounce)
	}
}

func optionsOf(opts []RouteOption) routeOptions {
	var o routeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// route is one registered handler with its options, and its name: what
// a chat's debounce buffer is kept under.
type route struct {
	h    Handler
	name string
	routeOptions
}

// Router sends each event to the handler registered for it. Register handlers
// before the first Dispatch; Dispatch is safe for concurrent use afterwards.
type Router struct {
	byType   map[string]route
	text     []textRoute
	fallback route
	mw       []Middleware
	delegate func() *Router // botbridge.Delegate: the router to route by instead
}

// current is the router r routes by: the delegate's when it has one.
func (r *Router) current() *Router {
	if r.delegate != nil {
		if d := r.delegate(); d != nil {
			return d
		}
	}
	return r
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
	r.byType[eventType] = route{h: h, name: "type:" + eventType, routeOptions: optionsOf(opts)}
}

// OnMessage handles every message event (text, image, sticker, …) that no
// OnText route took.
func (r *Router) OnMessage(h Handler, opts ...RouteOption) { r.On("message", h, opts...) }

// OnText handles text messages. With a prefix, only texts that start with it
// (the longest matching prefix wins); "" matches every text.
func (r *Router) OnText(prefix string, h func(ctx context.Context, e *Event, text string) error, opts ...RouteOption) {
	r.text = append(r.text, textRoute{prefix: prefix, h: h, routeOptions: optionsOf(opts)})
}

// OnEdited handles a user editing a text they sent (LINE's messageEdited
// event, sent for group chats only so far), with what the message says
// now ("" when its content is not a text). The edit's message ID is the
// typed event's (webhook.MessageEditedEvent). LINE may deliver a message's
// edits out of order and the largest timestamp is the latest state: the
// worker keeps, per chat and message, the newest edit it has seen, and an
// older edit arriving after a newer one is acknowledged without running
// the handler (outcome "stale"), so a handler never acts on text that was
// already replaced. A chat's edits run one at a time in LINE's order, like
// every event of the chat.
func (r *Router) OnEdited(h func(ctx context.Context, e *Event, text string) error, opts ...RouteOption) {
	r.On("messageEdited", func(ctx context.Context, e *Event) error {
		return h(ctx, e, e.editedText())
	}, opts...)
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
	r.fallback = route{h: h, name: "default", routeOptions: optionsOf(opts)}
}

// Dispatch runs the handler for e through the middleware. Events in standby
// mode are acknowledged and not answered: no handler runs.
func (r *Router) Dispatch(ctx context.Context, e *Event) error {
	if e.Standby() {
		return nil
	}
	r = r.current()
	h := r.route(e).h
	if h == nil {
		return nil
	}
	for i := len(r.mw) - 1; i >= 0; i-- {
		h = r.mw[i](h)
	}
	return h(ctx, e)
}

// Queue reports the route queue of e's route, registered with Queue: the
// worker then hands the event to that queue instead of dispatching it. It
// reports "" for an event whose route runs where it is received, in
// standby, or that no route takes.
func (r *Router) Queue(e *Event) string {
	if e.Standby() {
		return ""
	}
	rt := r.current().route(e)
	if rt.h == nil {
		return ""
	}
	return rt.queue
}

// Queues lists the route queues the router's routes name (Queue), and
// "long" when a route is debounced, sorted: the worker checks at start
// that its queue table has each.
func (r *Router) Queues() []string {
	var out []string
	add := func(o routeOptions) {
		if o.queue != "" {
			out = append(out, o.queue)
		}
		if o.window > 0 {
			out = append(out, longQueue)
		}
	}
	for _, rt := range r.byType {
		add(rt.routeOptions)
	}
	for _, tr := range r.text {
		add(tr.routeOptions)
	}
	add(r.fallback.routeOptions)
	slices.Sort(out)
	return slices.Compact(out)
}

// Debounced reports the debounce of e's route, registered with Debounce:
// the route's name (what the worker keeps the chat's burst under), its
// window and its longest wait. It reports "" for an event whose route is
// not debounced, in standby, or that no route takes.
func (r *Router) Debounced(e *Event) (route string, window, maxWait time.Duration) {
	if e.Standby() {
		return "", 0, 0
	}
	rt := r.current().route(e)
	if rt.h == nil || rt.window <= 0 {
		return "", 0, 0
	}
	return rt.name, rt.window, rt.maxWait
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
			return route{h: func(ctx context.Context, e *Event) error { return tr.h(ctx, e, text) }, name: "text:" + tr.prefix, routeOptions: tr.routeOptions}
		}
	}
	if rt, ok := r.byType[e.Type]; ok {
		return rt
	}
	return r.fallback
}
