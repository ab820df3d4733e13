// Command webhook is the API Gateway Lambda that verifies LINE's signature,
// hands every event to EventBridge and answers in milliseconds. All logic
// lives in pkg/ingress; this file reads configuration, builds the real
// clients and starts the Lambda runtime.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/eventbus"
	"github.com/linegate/linegate/pkg/ingress"
	"github.com/linegate/linegate/pkg/secrets"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h, err := setup(context.Background(), log)
	if err != nil {
		log.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.APIGateway)
}

func setup(ctx context.Context, log *slog.Logger) (*ingress.Handler, error) {
	cfg, err := config.LoadWebhook(os.Getenv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	var ssmAPI *ssm.Client
	if cfg.Secret.Param != "" || cfg.PreviousSecret.Param != "" {
		ssmAPI = ssm.NewFromConfig(awsCfg)
	}
	vals, err := secrets.Resolve(ctx, ssmAPI, cfg.Secret, cfg.PreviousSecret)
	if err != nil {
		return nil, err
	}
	pub := eventbus.NewPublisher(eventbridge.NewFromConfig(awsCfg), cfg.BusName,
		eventbus.WithSource(cfg.Source), eventbus.WithDeadline(cfg.PublishDeadline), eventbus.WithLogger(log))
	return ingress.New(pub,
		ingress.WithSecrets(vals...),
		ingress.WithMaxBodyBytes(cfg.MaxBodyBytes),
		ingress.WithBotUserID(cfg.BotUserID),
		ingress.WithLogger(log))
}
