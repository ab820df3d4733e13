package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/busredrive"
	"github.com/linegate/linegate/internal/redrive"
)

// redriveCommand is `linegate redrive`: it moves a dead-letter queue's
// messages back to where they came from.
func redriveCommand(fs *flag.FlagSet) action {
	sf := addStackFlags(fs, "resolve logical ids (of --queue, --to) through this CloudFormation stack (e.g. linegate)")
	queue := fs.String("queue", "", "the dead-letter queue: a URL, an ARN, a name, or with --stack a logical id (InteractiveDLQ, RuleTargetDLQ)")
	kind := fs.String("kind", "auto", "sqs: a redrive-policy DLQ, moved back with StartMessageMoveTask; events: a rule target's DLQ, put back on the bus; auto: events when its messages carry EventBridge's RULE_ARN")
	bus := fs.String("bus", "", "with --kind events: put the events on this bus instead of the bus of the rule that dead-lettered them")
	rate := fs.Int("rate", 0, "with --kind sqs: messages per second (0: as fast as SQS allows)")
	to := fs.String("to", "", "with --kind sqs: move into this queue (URL, ARN, name or logical id) instead of the messages' source queue")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the redrive to finish")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if *queue == "" || len(args) != 0 || (*kind != "auto" && *kind != "sqs" && *kind != "events") {
			return usageError{"usage: linegate redrive --queue URL|ARN|NAME [--stack NAME (then --queue takes a logical id)] [--kind auto|sqs|events] [--endpoint-url URL]"}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		cfg, st, err := sf.open(ctx)
		if err != nil {
			return err
		}
		if st != nil {
			for _, ref := range []*string{queue, to} {
				if *ref == "" || strings.Contains(*ref, ":") {
					continue // a URL or an ARN
				}
				r, err := st.Physical(*ref)
				if err != nil {
					return err
				}
				*ref = r.PhysicalID
			}
		}
		q := sqs.NewFromConfig(cfg)
		url, err := redrive.QueueURL(ctx, q, *queue)
		if err != nil {
			return err
		}
		if *kind == "auto" {
			*kind = "sqs"
			if ev, err := busredrive.IsEventsDLQ(ctx, q, url); err != nil {
				return err
			} else if ev {
				*kind = "events"
			}
		}
		if *kind == "events" {
			res, err := busredrive.Events(ctx, q, eventbridge.NewFromConfig(cfg), url, busredrive.EventsOptions{Bus: *bus})
			fmt.Fprintf(stdout, "redrive %s: %d event(s) put back on the bus and deleted, %d refused, %d skipped, in %s\n",
				url, res.Put, res.Failed, res.Skipped, res.Duration.Round(time.Millisecond))
			return err
		}
		res, err := redrive.Run(ctx, q, url, redrive.Options{RatePerSecond: int32(*rate), Destination: *to, Wait: true})
		if err != nil {
			return err
		}
		where := "back to their source queue"
		if *to != "" {
			where = "to " + *to
		}
		fmt.Fprintf(stdout, "redrive %s: %s, %d message(s) moved %s in %s\n", url, res.Status, res.Moved, where, res.Duration.Round(time.Millisecond))
		return nil
	}
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
