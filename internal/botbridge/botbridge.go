// Package botbridge is how linegate's own packages reach what package bot
// keeps from bot authors: a router's route table, and a router that routes
// by another one chosen at each event. Package bot sets the variables in
// its init (gRPC's internal-variable pattern), so they are there before any
// caller can hold a router; internal/ keeps everyone else out.
package botbridge

import "time"

// Route is one registration of a router, as the bot process reports it to
// linegate local, which mirrors the router from the list (the handlers
// stay in the bot process).
type Route struct {
	// Kind is "text" (OnText, Key the prefix), "type" (On and the On…
	// methods, Key the event type) or "default".
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	// Queue is the route queue (bot.Queue), "" for none.
	Queue string `json:"queue,omitempty"`
	// Window and MaxWait are the route's debounce (bot.Debounce), zero
	// for none.
	Window  time.Duration `json:"window,omitempty"`
	MaxWait time.Duration `json:"maxWait,omitempty"`
}

// Kinds of Route.
const (
	KindText    = "text"
	KindType    = "type"
	KindDefault = "default"
)

// RoutesOf is a func(*bot.Router) []Route: the router's registrations, in
// the order their kind is matched (text routes in registration order).
var RoutesOf any

// Delegate is a func(r *bot.Router, current func() *bot.Router): from
// then on r routes every event (Dispatch, Queue, Debounced) by the router
// current returns at that moment, through that router's middleware; a
// current that returns nil routes by r's own registrations. Queues still
// lists r's own (current may wait for a router that is not there yet).
var Delegate any
