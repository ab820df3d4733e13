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

	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	ctx := context.Background()
	cfg, err := config.LoadWebhook(os.Getenv)
	if err != nil {
		log.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	h, err := compose.Webhook(ctx, cfg, eventbridge.NewFromConfig(awsCfg), compose.Common{Logger: log, SSM: ssm.NewFromConfig(awsCfg)})
	if err != nil {
		log.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.APIGateway)
}
