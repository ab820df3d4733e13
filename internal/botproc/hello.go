package botproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/botbridge"
	"github.com/linegate/linegate/pkg/bot"
)

// Protocol is the version of the bot-process protocol: the dispatch and
// call-back messages, their error classes, the hello. The child reports
// its own in its hello and the parent gives its own in $LINEGATE_BOT_PROTOCOL;
// either side refuses the other's when they differ, since a CLI installed
// at one linegate version runs bots built against another (the project's
// go.mod). Change it with any change to what crosses the sockets.
const Protocol = 2

// Module is linegate's module path: what a bot's build info names the
// version of linegate it was built with.
const Module = "github.com/linegate/linegate"

// ErrProtocol marks a bot process that speaks another version of the
// protocol than linegate local.
var ErrProtocol = errors.New("botproc: the bot and linegate local speak different versions of the bot-process protocol")

// Hello is what a bot process answers on /ready: the protocol it speaks,
// the linegate it was built with, and its router's routes, which the
// parent mirrors so its worker routes (route queues, debounce) as the
// bot's router does.
type Hello struct {
	Protocol int               `json:"protocol"`
	Linegate string            `json:"linegate"`
	Routes   []botbridge.Route `json:"routes"`
}

// hello is the child's Hello for router.
func hello(router *bot.Router) Hello {
	return Hello{Protocol: Protocol, Linegate: Version(), Routes: botbridge.RoutesOf.(func(*bot.Router) []botbridge.Route)(router)}
}

// Version is the version of linegate this binary was built with: the
// version of the module it requires, or of the main module when that is
// linegate itself ("(devel)" for a build from a checkout).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if info.Main.Path == Module {
		return orDevel(info.Main.Version)
	}
	for _, d := range info.Deps {
		if d.Path == Module {
			if d.Replace != nil {
				return orDevel(d.Version) + " => " + d.Replace.Path
			}
			return orDevel(d.Version)
		}
	}
	return "unknown"
}

func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}

// checkProtocol is the error for a peer that speaks peer (built with
// linegate peerVersion).
func checkProtocol(peer int, peerVersion string) error {
	if peer == Protocol {
		return nil
	}
	return fmt.Errorf("%w: the bot process was built with linegate %s (protocol %d), linegate local is %s (protocol %d): "+
		"run the linegate of the project's go.mod (`go tool linegate local`, or `go install %s/cmd/linegate@VERSION` with the version go.mod requires)",
		ErrProtocol, peerVersion, peer, Version(), Protocol, Module)
}

// Ready waits until the child behind c answers its hello, or ctx ends,
// and checks the hello: the protocol, and that every route queue its
// routes name is in the parent's queue table (SetQueues).
func (cl *Client) Ready(ctx context.Context, c *http.Client) (Hello, error) {
	for {
		h, err := askHello(ctx, c)
		if err == nil {
			return h, cl.check(h)
		}
		if errors.Is(err, ErrProtocol) {
			return Hello{}, err
		}
		select {
		case <-ctx.Done():
			return Hello{}, fmt.Errorf("botproc: the bot process never answered: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// askHello asks the child for its hello once.
func askHello(ctx context.Context, c *http.Client) (Hello, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://bot"+pathReady, nil)
	resp, err := c.Do(req)
	if err != nil {
		return Hello{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Hello{}, fmt.Errorf("%w: the bot process answered %d to its hello (a bot built before the protocol had versions)", ErrProtocol, resp.StatusCode)
	}
	var h Hello
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCall)).Decode(&h); err != nil {
		return Hello{}, fmt.Errorf("%w: the bot process's hello: %v", ErrProtocol, err)
	}
	return h, checkProtocol(h.Protocol, h.Linegate)
}

// SetQueues gives the Client the worker's queue table (its names): a child
// whose routes name a route queue outside it is refused, as the worker
// refuses such a bot at start.
func (cl *Client) SetQueues(table map[string]string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.queues = table
}

// check refuses a hello whose routes name route queues the worker lacks.
func (cl *Client) check(h Hello) error {
	cl.mu.Lock()
	table := cl.queues
	cl.mu.Unlock()
	if len(table) == 0 {
		return nil
	}
	var missing []string
	for _, rt := range h.Routes {
		names := []string{rt.Queue}
		if rt.Window > 0 {
			names = append(names, "long")
		}
		for _, q := range names {
			if _, ok := table[q]; q != "" && !ok && !slices.Contains(missing, strconv.Quote(q)) {
				missing = append(missing, strconv.Quote(q))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("botproc: the bot's routes name route queues the worker's queue table (ROUTE_QUEUES in the template) lacks: %s", strings.Join(missing, ", "))
	}
	return nil
}

// mirrorOf builds the parent's router for a child's routes: the same
// registrations and options, each forwarding to the child.
func (cl *Client) mirrorOf(routes []botbridge.Route) *bot.Router {
	r := bot.NewRouter()
	for _, rt := range routes {
		var opts []bot.RouteOption
		if rt.Queue != "" {
			opts = append(opts, bot.Queue(rt.Queue))
		}
		if rt.Window > 0 {
			opts = append(opts, bot.Debounce(rt.Window, rt.MaxWait))
		}
		switch rt.Kind {
		case botbridge.KindText:
			r.OnText(rt.Key, func(ctx context.Context, e *bot.Event, _ string) error { return cl.Forward(ctx, e) }, opts...)
		case botbridge.KindType:
			r.On(rt.Key, cl.Forward, opts...)
		case botbridge.KindDefault:
			r.Default(cl.Forward, opts...)
		}
	}
	return r
}
