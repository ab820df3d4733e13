// Package lineclients wires what a LINE-calling function (the worker, the
// notifier, the quota governor) needs of each channel it serves: a token
// source per channel (the default channel's from the function's own
// settings, each named channel's from its SSM path), LINE clients that
// answer through it, and the channel's operators. It is the one place a
// channel's credentials become clients, so the three functions resolve
// them alike. The webhook links none of it: it calls no LINE API.
package lineclients

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linetoken"
	"github.com/linegate/linegate/internal/secrets"
)

// Clients makes LINE clients for each channel of a function: a new client
// per call (the SDK client is not goroutine-safe), all of a channel's
// sharing its token source and the process's connections.
type Clients struct {
	opts  map[string][]lineapi.Option // by channel name ("" for the default)
	names []string                    // the named channels, in configuration order
}

// New resolves the token source of the default channel (auth) and of each
// named channel (channels, in auth's token mode), and returns the clients
// and every secret value read (for crash-report scrubbing). A channel
// whose credentials cannot be read fails the whole start, naming it: a
// function never serves some channels with half a configuration.
func New(ctx context.Context, auth config.LineAuth, channels []config.Channel, c compose.Common) (Clients, []string, error) {
	c = c.WithDefaults()
	cl := Clients{opts: map[string][]lineapi.Option{}}
	var vals []string
	add := func(name string, a config.LineAuth) error {
		tokens, v, err := linetoken.FromConfig(ctx, a, c.SSM, c.HTTPClient, nil)
		if err != nil {
			if name == channel.Default {
				return err
			}
			return fmt.Errorf("channel %s: %w", name, err)
		}
		vals = append(vals, v...)
		cl.opts[name] = []lineapi.Option{lineapi.WithBaseURL(a.APIBaseURL), lineapi.WithLogger(c.Logger),
			lineapi.WithMetrics(c.Metrics), lineapi.WithHTTPClient(c.HTTPClient), lineapi.WithTokenSource(tokens)}
		return nil
	}
	if err := add(channel.Default, auth); err != nil {
		return Clients{}, nil, err
	}
	for _, ch := range channels {
		if err := add(ch.Name, ch.Auth(auth)); err != nil {
			return Clients{}, nil, err
		}
		cl.names = append(cl.names, ch.Name)
	}
	return cl, vals, nil
}

// For is a new client of channel ch; false for a channel the function was
// not configured with.
func (c Clients) For(ch string) (*lineapi.Client, bool) {
	opts, ok := c.opts[ch]
	if !ok {
		return nil, false
	}
	return lineapi.New("", opts...), true
}

// Default is a new client of the default channel.
func (c Clients) Default() *lineapi.Client {
	line, _ := c.For(channel.Default)
	return line
}

// Named lists the named channels, in configuration order.
func (c Clients) Named() []string { return slices.Clone(c.names) }

// Pushers resends each channel's held items through its own client.
func (c Clients) Pushers() held.Pushers {
	return func(ch string) (held.Pusher, bool) {
		line, ok := c.For(ch)
		return line, ok
	}
}

// Operators resolves each named channel's operators (config.Channel's
// Operators: its SSM parameter, or a plain value locally; all channels'
// in one read) and checks them: the IDs by channel name, channels without
// operators left out.
func Operators(ctx context.Context, channels []config.Channel, ssm compose.ParameterGetter) (map[string][]string, error) {
	var api secrets.Parameters
	if ssm != nil {
		api = ssm
	}
	var from []config.Secret
	var names []string
	for _, ch := range channels {
		if ch.Operators.IsSet() {
			from, names = append(from, ch.Operators), append(names, ch.Name)
		}
	}
	out := map[string][]string{}
	if len(from) == 0 {
		return out, nil
	}
	vals, err := secrets.Resolve(ctx, api, from...)
	if err != nil {
		return nil, fmt.Errorf("channel operators: %w", err)
	}
	for i, v := range vals {
		if v == "" {
			continue
		}
		ids, err := config.ParseOperators(v)
		if err != nil {
			return nil, fmt.Errorf("channel %s operators (%s): %w", names[i], cmp.Or(from[i].Param, "OPERATOR_LINE_IDS_"+channel.EnvSuffix(names[i])), err)
		}
		if len(ids) > 0 {
			out[names[i]] = ids
		}
	}
	return out, nil
}
