// Package secrets fetches the channel secret(s) and access token from SSM
// Parameter Store once per cold start and keeps them in memory.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/linegate/linegate/internal/config"
)

// ErrMissing is returned when a named parameter does not exist.
var ErrMissing = errors.New("secret parameter not found")

// Parameters is the one SSM call secrets are read with: GetParameters with
// decryption, returning the values by name and the names SSM does not know.
// *SSM is one.
type Parameters interface {
	GetParameters(ctx context.Context, names []string) (values map[string]string, invalid []string, err error)
}

// maxNames is the most names one GetParameters call takes.
const maxNames = 10

// Resolve returns the value of each secret, in order: SSM parameters are
// fetched with decryption, in as few calls as GetParameters allows (ten
// names a call); plain values are used as they are; unset secrets resolve
// to "". A parameter SSM does not know fails the whole resolution
// (ErrMissing, naming every one), unless its Secret is Optional: then it
// resolves to "". The api may be nil when no secret names a parameter.
func Resolve(ctx context.Context, api Parameters, secrets ...config.Secret) ([]string, error) {
	out := make([]string, len(secrets))
	var names []string
	for i, s := range secrets {
		if s.Param != "" {
			names = append(names, s.Param)
		} else {
			out[i] = s.Value
		}
	}
	if len(names) == 0 {
		return out, nil
	}
	if api == nil {
		return nil, errors.New("secrets: SSM parameters named but no SSM client given")
	}
	values := map[string]string{}
	unknown := map[string]bool{}
	names = unique(names)
	for chunk := range slices.Chunk(names, maxNames) {
		vals, invalid, err := api.GetParameters(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("get parameters %v: %w", chunk, err)
		}
		maps.Copy(values, vals)
		for _, n := range invalid {
			unknown[n] = true
		}
	}
	var missing []string
	for i, s := range secrets {
		if s.Param == "" {
			continue
		}
		if unknown[s.Param] {
			if !s.Optional {
				missing = append(missing, s.Param)
			}
			continue
		}
		v, ok := values[s.Param]
		if !ok || v == "" {
			if s.Optional {
				continue
			}
			return nil, fmt.Errorf("%w: %s is empty or was not returned", ErrMissing, s.Param)
		}
		out[i] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v (create them as SecureString parameters, see README 'Configuration')", ErrMissing, slices.Compact(missing))
	}
	return out, nil
}

// unique is names without repeats, in their first order.
func unique(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
