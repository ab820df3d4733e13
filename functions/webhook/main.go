// Command webhook is the API Gateway Lambda that verifies LINE's signature,
// hands every event to EventBridge and answers in milliseconds. All logic
// lives in pkg/ingress; this file reads configuration, builds the real
// clients and starts the Lambda runtime.
package main

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
)

func main() {
	ctx := context.Background()
	cfg, cfgErr := config.LoadWebhook(os.Getenv)
	awsCfg, awsErr := awsconfig.LoadDefaultConfig(ctx)
	obs := compose.NewObservability(os.Stdout, cfg.Metrics, compose.FunctionName(), &awsCfg)
	if err := errors.Join(cfgErr, awsErr); err != nil {
		obs.Logger.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	obs.SSM = ssm.NewFromConfig(awsCfg)
	h, err := compose.Webhook(ctx, cfg, eventbridge.NewFromConfig(awsCfg), obs.Common)
	if err != nil {
		obs.Logger.Error("webhook cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(compose.Flushing(obs.Metrics, h.APIGateway))
}
