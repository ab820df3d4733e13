package postback

import (
	"context"
	"fmt"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/secrets"
)

// parameterGetter is the one SSM call secrets are read with (secrets.Resolve
// makes it).
type parameterGetter interface {
	GetParameters(ctx context.Context, names []string) (values map[string]string, invalid []string, err error)
}

// FromConfig reads the ChatOps key (CHATOPS_KEY_PARAM names the Secrets
// Manager secret the stack generated, through SSM's
// /aws/reference/secretsmanager/ path; CHATOPS_KEY is a plain local key)
// and returns its signer. The notifier, the quota governor and the worker
// all build theirs here.
func FromConfig(ctx context.Context, cfg config.ChatOps, api parameterGetter) (*Signer, error) {
	vals, err := secrets.Resolve(ctx, api, cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("chatops key: %w", err)
	}
	return NewSigner([]byte(vals[0]), nil)
}
