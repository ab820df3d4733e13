// Command worker is the SQS-triggered Lambda that runs the bot: it processes
// batches from the interactive and background queues with partial batch
// failures. All logic lives in pkg/worker, pkg/bot and pkg/app; this file
// reads configuration, builds the real clients and starts the runtime.
package main

import (
	"context"
	"log/slog"
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
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	ctx := context.Background()
	cfg, err := config.LoadWorker(os.Getenv)
	if err != nil {
		log.Error("worker cannot start", "error", err.Error())
		os.Exit(1)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("worker cannot start", "error", err.Error())
		os.Exit(1)
	}
	p, err := compose.Worker(ctx, cfg, compose.WorkerDeps{
		Store:    idempotency.NewDynamoDB(dynamodb.NewFromConfig(awsCfg), cfg.IdempotencyTable),
		Ops:      sns.NewFromConfig(awsCfg),
		Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
		Region:   awsCfg.Region,
	}, compose.Common{Logger: log, SSM: ssm.NewFromConfig(awsCfg)})
	if err != nil {
		log.Error("worker cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(p.Handle)
}
