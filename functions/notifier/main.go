// Command notifier is the SNS-triggered Lambda that tells the operator on
// LINE: CloudWatch alarm state changes and handler crash reports become Flex
// cards pushed to every operator ID. All logic lives in pkg/alert; this file
// reads configuration, builds the real clients and starts the runtime.
package main

import (
	"context"
	"errors"
	"os"
	_ "time/tzdata" // OPERATOR_TIMEZONE must load on provided.al2023 without zoneinfo

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
)

func main() {
	ctx := context.Background()
	cfg, cfgErr := config.LoadNotifier(os.Getenv)
	awsCfg, awsErr := awsconfig.LoadDefaultConfig(ctx)
	obs := compose.NewObservability(os.Stdout, cfg.Metrics, compose.FunctionName(), &awsCfg)
	if err := errors.Join(cfgErr, awsErr); err != nil {
		obs.Logger.Error("notifier cannot start", "error", err.Error())
		os.Exit(1)
	}
	obs.SSM = ssm.NewFromConfig(awsCfg)
	n, err := compose.Notifier(ctx, cfg, awsCfg.Region, obs.Common)
	if err != nil {
		obs.Logger.Error("notifier cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, ev events.SNSEvent) error {
		defer func() { _ = obs.Metrics.Flush() }()
		return n.Handle(ctx, ev)
	})
}
