// Package events_test runs every sample event in this folder through the core
// it is meant for, with the settings in env.json, and checks the outcome the
// sample is documented to produce, so the files given to `sam local invoke`
// can never rot.
package events_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/pkg/eventbus"
	"github.com/linegate/linegate/pkg/ingress"
)

// expected is the outcome of each sample. A new file here must be added to
// this table, or TestEverySampleIsCovered fails.
var expected = map[string]int{
	"webhook-text-message.json":  200,
	"webhook-multi-event.json":   200,
	"webhook-verify.json":        200,
	"webhook-bad-signature.json": 401,
	"webhook-base64-body.json":   200,
}

// published events per webhook sample with status 200.
var expectedEvents = map[string]int{
	"webhook-text-message.json": 1,
	"webhook-multi-event.json":  3,
	"webhook-verify.json":       0,
	"webhook-base64-body.json":  1,
}

func env(t *testing.T, function string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("env.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("env.json: %v", err)
	}
	vars, ok := all[function]
	if !ok {
		t.Fatalf("env.json has no %s section", function)
	}
	return vars
}

func TestEverySampleIsCovered(t *testing.T) {
	files, _ := filepath.Glob("*.json")
	sort.Strings(files)
	for _, f := range files {
		if f == "env.json" {
			continue
		}
		if _, ok := expected[f]; !ok {
			t.Errorf("%s has no expected outcome in samples_test.go", f)
		}
	}
	for f := range expected {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("expected sample %s is missing", f)
		}
	}
}

type countingPublisher struct{ n int }

func (c *countingPublisher) Publish(_ context.Context, e []eventbus.Entry) (eventbus.Result, error) {
	c.n += len(e)
	return eventbus.Result{Accepted: len(e)}, nil
}

func TestWebhookSamples(t *testing.T) {
	secret := env(t, "WebhookFunction")["LINE_CHANNEL_SECRET"]
	for name, want := range expected {
		if filepath.Ext(name) != ".json" || name[:8] != "webhook-" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var req events.APIGatewayProxyRequest
			if err := json.Unmarshal(b, &req); err != nil {
				t.Fatalf("not an API Gateway proxy event: %v", err)
			}
			pub := &countingPublisher{}
			h, err := ingress.New(pub, ingress.WithSecrets(secret))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := h.APIGateway(context.Background(), req)
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, want, resp.Body)
			}
			if pub.n != expectedEvents[name] {
				t.Fatalf("published %d events, want %d", pub.n, expectedEvents[name])
			}
		})
	}
}
