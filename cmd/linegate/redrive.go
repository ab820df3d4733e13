package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/pkg/redrive"
)

func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("redrive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.String("queue", "", "the dead-letter queue to empty back into its source queue (e.g. linegate-InteractiveDLQ)")
	endpoint := fs.String("endpoint-url", "", "an AWS-compatible endpoint: linegate local (http://127.0.0.1:3000), moto_server, LocalStack; default: AWS")
	rate := fs.Int("rate", 0, "messages per second (0: as fast as SQS allows)")
	to := fs.String("to", "", "move into this queue instead of the messages' source queue (needed for the rule-target DLQ)")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the move to finish")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *queue == "" {
		return usageError{"usage: linegate redrive --queue NAME [--endpoint-url URL]"}
	}
	cfg, err := awsConfig(ctx, *endpoint)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := redrive.Run(ctx, sqs.NewFromConfig(cfg), *queue, redrive.Options{RatePerSecond: int32(*rate), Destination: *to, Wait: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "redrive %s: %s, %d message(s) moved back to their source queue in %s\n", *queue, res.Status, res.Moved, res.Duration.Round(time.Millisecond))
	return nil
}

// awsConfig loads the default AWS configuration, or one for an
// AWS-compatible endpoint with placeholder credentials when none are set.
func awsConfig(ctx context.Context, endpoint string) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, fmt.Errorf("aws config: %w", err)
	}
	if endpoint == "" {
		return cfg, nil
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	// An emulator accepts any credentials; don't go looking for real ones.
	// A linegate local reachable beyond loopback takes its token as the
	// access key id.
	switch {
	case os.Getenv("LINEGATE_LOCAL_TOKEN") != "":
		cfg.Credentials = credentials.NewStaticCredentialsProvider(os.Getenv("LINEGATE_LOCAL_TOKEN"), "local", "")
	case os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "":
		cfg.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
	}
	return cfg, nil
}
