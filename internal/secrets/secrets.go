// Package secrets fetches the channel secret(s) and access token from SSM
// Parameter Store once per cold start and keeps them in memory.
package secrets

import (
	"context"
	"errors"
	"fmt"

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

// Resolve returns the value of each secret, in order: SSM parameters are
// fetched together in one call with decryption; plain values are used as
// they are; unset secrets resolve to "". The api may be nil when no secret
// names a parameter.
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
	values, invalid, err := api.GetParameters(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("get parameters %v: %w", names, err)
	}
	if len(invalid) > 0 {
		return nil, fmt.Errorf("%w: %v (create them as SecureString parameters, see README 'Configuration')", ErrMissing, invalid)
	}
	for i, s := range secrets {
		if s.Param == "" {
			continue
		}
		v, ok := values[s.Param]
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: %s is empty or was not returned", ErrMissing, s.Param)
		}
		out[i] = v
	}
	return out, nil
}
