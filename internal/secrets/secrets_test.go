package secrets

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/motoserver"
)

// Against moto's SSM, with the functions' own client (NewSSM): SecureStrings
// decrypted, plain values passed through, a missing parameter named in the
// error.
func TestResolveAgainstMoto(t *testing.T) {
	ep := motoserver.Start(t)
	api := ssm.NewFromConfig(motoserver.Config(ep))
	client := NewSSM(motoserver.Config(ep))
	ctx := context.Background()
	for name, v := range map[string]string{"/linegate/channel-secret": "current", "/linegate/channel-secret-previous": "previous"} {
		if _, err := api.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(v), Type: types.ParameterTypeSecureString}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Resolve(ctx, client,
		config.Secret{Param: "/linegate/channel-secret"},
		config.Secret{Param: "/linegate/channel-secret-previous"},
		config.Secret{Value: "plain"},
		config.Secret{})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "current" || got[1] != "previous" || got[2] != "plain" || got[3] != "" {
		t.Fatalf("got %q", got)
	}
	_, err = Resolve(ctx, client, config.Secret{Param: "/linegate/nope"})
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("err = %v, want ErrMissing", err)
	}
}

type failingSSM struct{}

func (failingSSM) GetParameters(context.Context, []string) (map[string]string, []string, error) {
	return nil, nil, errors.New("AccessDeniedException")
}

func TestResolveWrapsAPIErrors(t *testing.T) {
	_, err := Resolve(context.Background(), failingSSM{}, config.Secret{Param: "/x"})
	if err == nil || err.Error() != "get parameters [/x]: AccessDeniedException" {
		t.Fatalf("err = %v", err)
	}
	if _, err := Resolve(context.Background(), nil, config.Secret{Param: "/x"}); err == nil {
		t.Fatal("nil client with a parameter: want error")
	}
	if v, err := Resolve(context.Background(), nil, config.Secret{Value: "v"}); err != nil || v[0] != "v" {
		t.Fatalf("plain only: %v %v", v, err)
	}
}
