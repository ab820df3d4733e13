package webhookfn

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/linegate/linegate/internal/compose"
	"github.com/linegate/linegate/internal/motoserver"
	"github.com/linegate/linegate/internal/secrets"
	"github.com/linegate/linegate/internal/signature"
)

// A named channel added by configuration only, against moto's SSM: its
// secret under the channel's path is read at start, a body signed with it
// is accepted on its path and refused on the default's, its bot user ID
// (an optional parameter) checks the destination, a rotation of its secret
// is picked up by a re-read, and a channel whose secret is missing fails
// the start, naming the parameter.
func TestNamedChannelFromSSM(t *testing.T) {
	ep := motoserver.Start(t)
	api := ssm.NewFromConfig(motoserver.Config(ep))
	ctx := context.Background()
	put := func(name, value string) {
		t.Helper()
		_, err := api.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value),
			Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(secretParam, "default-secret")
	put("/linegate/channels/b/secret", "b-secret")
	put("/linegate/channels/tw/secret", "tw-secret")
	put("/linegate/channels/tw/bot-user-id", "U00000000000000000000000000000001")
	env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "webhook", "LINE_CHANNEL_SECRET_PARAM": secretParam,
		"LINE_CHANNELS": "b,tw", "LINE_CHANNEL_PARAMETER_PATH": "/linegate/channels", "SECRET_REFRESH_COOLDOWN_MS": "1000"}
	common := compose.Common{Logger: quiet, SSM: secrets.NewSSM(motoserver.Config(ep))}
	h, err := New(ctx, webhookConfig(t, env), acceptingBus{}, acceptingQueue{}, common)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(body)
	otherBot := []byte(strings.Replace(body, "U00000000000000000000000000000001", "U00000000000000000000000000000009", 1))
	sign := func(secret string, body []byte) string { return signature.Sign([]byte(secret), body) }
	if resp, err := h.HandleChannel(ctx, "b", "POST", sign("b-secret", b), b); resp.Status != 200 {
		t.Fatalf("b's secret: %d %v", resp.Status, err)
	}
	// A rotation of b's secret (before any other bad signature on b's path
	// starts its re-read's cooldown).
	put("/linegate/channels/b/secret", "b-rotated")
	put("/linegate/channels/b/secret-previous", "b-secret")
	if resp, err := h.HandleChannel(ctx, "b", "POST", sign("b-rotated", b), b); resp.Status != 200 {
		t.Fatalf("b's rotated secret: %d %v", resp.Status, err)
	}
	if resp, err := h.HandleChannel(ctx, "b", "POST", sign("b-secret", b), b); resp.Status != 200 {
		t.Fatalf("b's previous secret during the rotation: %d %v", resp.Status, err)
	}
	for _, tt := range []struct {
		name, channel, sig string
		body               []byte
		want               int
	}{
		{"b on b's path", "b", sign("b-rotated", b), b, 200},
		{"b on the default path", "", sign("b-rotated", b), b, 401},
		{"the default on b's path", "b", sign("default-secret", b), b, 401},
		{"tw, its own bot", "tw", sign("tw-secret", b), b, 200},
		{"tw, another bot", "tw", sign("tw-secret", otherBot), otherBot, 401},
		{"b, any bot (no bot user ID set)", "b", sign("b-rotated", otherBot), otherBot, 200},
		{"a channel not configured", "c", sign("b-secret", b), b, 404},
	} {
		if resp, err := h.HandleChannel(ctx, tt.channel, "POST", tt.sig, tt.body); resp.Status != tt.want {
			t.Errorf("%s: %d %v, want %d", tt.name, resp.Status, err, tt.want)
		}
	}

	env["LINE_CHANNELS"] = "b,missing"
	_, err = New(ctx, webhookConfig(t, env), acceptingBus{}, acceptingQueue{}, common)
	if !errors.Is(err, secrets.ErrMissing) || !strings.Contains(err.Error(), "/linegate/channels/missing/secret") {
		t.Fatalf("err %v, want the missing channel's secret named", err)
	}
	put("/linegate/channels/bad/secret", "x")
	put("/linegate/channels/bad/bot-user-id", "not-a-bot")
	env["LINE_CHANNELS"] = "bad"
	if _, err = New(ctx, webhookConfig(t, env), acceptingBus{}, acceptingQueue{}, common); err == nil || !strings.Contains(err.Error(), "/linegate/channels/bad/bot-user-id") {
		t.Fatalf("err %v, want the bad bot user ID named", err)
	}
}
