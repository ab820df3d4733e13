package linetoken

import (
	"context"
	"fmt"
	"net/http"
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
// A function calls it once at start; every LINE client of the container
// shares the source.
func FromConfig(ctx context.Context, a config.LineAuth, api parameterGetter, hc *http.Client, now func() time.Time) (Source, []string, error) {
	ep := Endpoint{BaseURL: a.APIBaseURL, HTTP: hc}
	switch a.Mode {
	case config.TokenStateless:
		vals, err := secrets.Resolve(ctx, api, a.ChannelSecret)
		if err != nil {
			return nil, nil, fmt.Errorf("channel secret: %w", err)
		}
		src := NewMinted(ep.Stateless(a.ChannelID, vals[0]), now)
		return src, vals, nil
	case config.TokenV21:
		vals, err := secrets.Resolve(ctx, api, a.AssertionKey)
		if err != nil {
			return nil, nil, fmt.Errorf("assertion signing key: %w", err)
		}
		key, err := ParseAssertionKey([]byte(vals[0]))
		if err != nil {
			return nil, nil, err
		}
		return NewMinted(ep.V21(a.ChannelID, key, a.TokenLife, now), now), vals, nil
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
