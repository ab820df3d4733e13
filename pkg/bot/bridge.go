package bot

import (
	"maps"
	"slices"

	"github.com/linegate/linegate/internal/botbridge"
)

func init() {
	botbridge.RoutesOf = func(r *Router) []botbridge.Route { return r.routes() }
	botbridge.Delegate = func(r *Router, current func() *Router) { r.delegate = current }
}

// routes lists r's registrations for botbridge.RoutesOf: the text routes
// in registration order, the types sorted, the default.
func (r *Router) routes() []botbridge.Route {
	var out []botbridge.Route
	for _, tr := range r.text {
		out = append(out, bridgeRoute(botbridge.KindText, tr.prefix, tr.routeOptions))
	}
	types := slices.Sorted(maps.Keys(r.byType))
	for _, typ := range types {
		out = append(out, bridgeRoute(botbridge.KindType, typ, r.byType[typ].routeOptions))
	}
	if r.fallback.h != nil {
		out = append(out, bridgeRoute(botbridge.KindDefault, "", r.fallback.routeOptions))
	}
	return out
}

func bridgeRoute(kind, key string, o routeOptions) botbridge.Route {
	return botbridge.Route{Kind: kind, Key: key, Queue: o.queue, Window: o.window, MaxWait: o.maxWait}
}
