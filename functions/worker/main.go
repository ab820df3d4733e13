// Command worker is the SQS-triggered Lambda that runs the bot: it processes
// batches from the interactive and background queues with partial batch
// failures. All logic lives in pkg/worker, pkg/bot and pkg/app; this file
// reads configuration, builds the real clients and starts the runtime.
package main

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/pkg/compose"
	"github.com/linegate/linegate/pkg/config"
	"github.com/linegate/linegate/pkg/idempotency"
)

func main() {
	ctx := context.Background()
	cfg, cfgErr := config.LoadWorker(os.Getenv)
	awsCfg, awsErr := awsconfig.LoadDefaultConfig(ctx)
	obs := compose.NewObservability(os.Stdout, cfg.Metrics, compose.FunctionName(), &awsCfg)
	if err := errors.Join(cfgErr, awsErr); err != nil {
		obs.Logger.Error("worker cannot start", "error", err.Error())
		os.Exit(1)
	}
	obs.SSM = ssm.NewFromConfig(awsCfg)
	p, err := compose.Worker(ctx, cfg, compose.WorkerDeps{
		Store:    idempotency.NewDynamoDB(dynamodb.NewFromConfig(awsCfg), cfg.IdempotencyTable),
		Ops:      sns.NewFromConfig(awsCfg),
		Function: compose.FunctionName(),
		Region:   awsCfg.Region,
	}, obs.Common)
	if err != nil {
		obs.Logger.Error("worker cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(compose.Flushing(obs.Metrics, p.Handle))
}
