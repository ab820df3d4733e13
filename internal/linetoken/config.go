package linetoken

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/secrets"
)

// parameterGetter is the one SSM call secrets are read with (secrets.Resolve
// makes it).
type parameterGetter interface {
	GetParameters(ctx context.Context, names []string) (values map[string]string, invalid []string, err error)
}

// Source is what lineapi.WithTokenSource takes.
type Source interface {
	Token(ctx context.Context) (string, error)
	Refresh(ctx context.Context, stale string) (string, error)
}

// FromConfig builds the token source of a function from its configuration:
// the long-lived token (read from SSM now, re-read on a 401), or a minting
// source for stateless and v2.1 tokens whose credentials are read from SSM
// once. It also returns the secret values read, for crash-report scrubbing.
// A function calls it once at start (once per channel); every LINE client
// of the container (of that channel) shares the source. A named channel's
// ID is read with its credential when a.ChannelIDFrom names where
// (config.Channel.Auth).
func FromConfig(ctx context.Context, a config.LineAuth, api parameterGetter, hc *http.Client, now func() time.Time) (Source, []string, error) {
	ep := Endpoint{BaseURL: a.APIBaseURL, HTTP: hc}
	switch a.Mode {
	case config.TokenStateless:
		vals, err := secrets.Resolve(ctx, api, a.ChannelSecret, a.ChannelIDFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("channel secret: %w", err)
		}
		id, err := channelID(a, vals[1])
		if err != nil {
			return nil, nil, err
		}
		src := NewMinted(ep.Stateless(id, vals[0]), now)
		return src, vals[:1], nil
	case config.TokenV21:
		vals, err := secrets.Resolve(ctx, api, a.AssertionKey, a.ChannelIDFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("assertion signing key: %w", err)
		}
		id, err := channelID(a, vals[1])
		if err != nil {
			return nil, nil, err
		}
		key, err := ParseAssertionKey([]byte(vals[0]))
		if err != nil {
			return nil, nil, err
		}
		return NewMinted(ep.V21(id, key, a.TokenLife, now), now), vals[:1], nil
	default:
		read := func(ctx context.Context) (string, error) {
			vals, err := secrets.Resolve(ctx, api, a.AccessToken)
			if err != nil {
				return "", err
			}
			return vals[0], nil
		}
		if a.AccessToken.Param == "" {
			return Fixed(a.AccessToken.Value), []string{a.AccessToken.Value}, nil
		}
		src := NewReread(read)
		tok, err := src.Token(ctx) // fail at start, not on the first event
		if err != nil {
			return nil, nil, fmt.Errorf("channel access token: %w", err)
		}
		return src, []string{tok}, nil
	}
}

// channelID is a's channel ID: LINE_CHANNEL_ID, or the value read from
// a.ChannelIDFrom (a named channel's), which must be digits.
func channelID(a config.LineAuth, read string) (string, error) {
	if a.ChannelID != "" || !a.ChannelIDFrom.IsSet() {
		return a.ChannelID, nil
	}
	id := strings.TrimSpace(read)
	if id == "" || strings.Trim(id, "0123456789") != "" {
		return "", fmt.Errorf("channel ID (%s) must be the channel's ID, digits only", cmp.Or(a.ChannelIDFrom.Param, "a plain value"))
	}
	return id, nil
}
