// Package secrets fetches the channel secret(s) and access token from SSM
// Parameter Store once per cold start and keeps them in memory.
package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/config"
)

// ErrMissing is returned when a named parameter does not exist.
var ErrMissing = errors.New("secret parameter not found")

// parameterGetter is the one SSM call made.
type parameterGetter interface {
	GetParameters(ctx context.Context, in *ssm.GetParametersInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersOutput, error)
}

// Resolve returns the value of each secret, in order: SSM parameters are
// fetched together in one call with decryption; plain values are used as
// they are; unset secrets resolve to "". The api may be nil when no secret
// names a parameter.
func Resolve(ctx context.Context, api parameterGetter, secrets ...config.Secret) ([]string, error) {
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
	resp, err := api.GetParameters(ctx, &ssm.GetParametersInput{Names: names, WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get parameters %v: %w", names, err)
	}
	if len(resp.InvalidParameters) > 0 {
		return nil, fmt.Errorf("%w: %v (create them as SecureString parameters, see README 'Configuration')", ErrMissing, resp.InvalidParameters)
	}
	values := make(map[string]string, len(resp.Parameters))
	for _, p := range resp.Parameters {
		values[aws.ToString(p.Name)] = aws.ToString(p.Value)
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
