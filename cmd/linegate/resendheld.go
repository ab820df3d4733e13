package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/pkg/held"
)

func runResendHeld(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resend-held", flag.ContinueOnError)
	fs.SetOutput(stderr)
	df := addDeploymentFlags(fs, 5*time.Minute)
	queue := fs.String("queue", "linegate-HeldQueue", "the held queue's name (with --endpoint-url; a stack names it in its HeldQueueUrl output)")
	maxItems := fs.Int("max", 0, "send at most this many held results (0: all)")
	ctx, cancel, d, err := df.parse(ctx, fs, args, "usage: linegate resend-held (--endpoint-url URL | --stack NAME) [--max N]")
	defer cancel()
	if err != nil {
		return err
	}
	q := sqs.NewFromConfig(d.aws)
	var url string
	if d.local {
		out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(*queue)})
		if err != nil {
			return fmt.Errorf("find %s: %w", *queue, err)
		}
		url = aws.ToString(out.QueueUrl)
	} else if url, err = d.stack.Output("HeldQueueUrl"); err != nil {
		return err
	}
	rep, err := held.Resend(ctx, q, url, d.line, *maxItems, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	fmt.Fprintf(stdout, "resend-held: %s\n", rep)
	if errors.Is(err, held.ErrQuotaSpent) {
		return errors.New("LINE's monthly limit is still reached: raise it in LINE Official Account Manager, then run this again")
	}
	return err
}
