package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// A stack with several channels reads more than GetParameters takes in one
// call (ten names): against moto's SSM, which refuses an eleventh name as
// SSM does, every value comes back, a missing Optional parameter (a
// channel's previous secret between rotations) resolves to "", and a
// missing required one is named.
func TestResolveManyAndOptionalAgainstMoto(t *testing.T) {
	ep := motoserver.Start(t)
	api := ssm.NewFromConfig(motoserver.Config(ep))
	client := NewSSM(motoserver.Config(ep))
	ctx := context.Background()
	var want []config.Secret
	for i := range 12 {
		name := fmt.Sprintf("/linegate/channels/c%d/secret", i)
		if _, err := api.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(fmt.Sprint("s", i)), Type: types.ParameterTypeSecureString}); err != nil {
			t.Fatal(err)
		}
		want = append(want, config.Secret{Param: name})
	}
	if _, _, err := client.GetParameters(ctx, []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i", "/j", "/k"}); err == nil {
		t.Fatal("moto took eleven names in one call: this test would not show the chunking")
	}
	secrets := append(want, config.Secret{Param: "/linegate/channels/c0/secret-previous", Optional: true}, config.Secret{Param: "/linegate/channels/c0/secret"})
	got, err := Resolve(ctx, client, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if got[i] != fmt.Sprint("s", i) {
			t.Fatalf("secret %d = %q", i, got[i])
		}
	}
	if got[12] != "" || got[13] != "s0" {
		t.Fatalf("optional %q, repeated %q", got[12], got[13])
	}
	_, err = Resolve(ctx, client, config.Secret{Param: "/linegate/channels/c0/secret"}, config.Secret{Param: "/linegate/channels/c9/token"})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "/linegate/channels/c9/token") {
		t.Fatalf("err = %v, want ErrMissing naming the token", err)
	}
}
