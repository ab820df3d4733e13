package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/doctor"
	"github.com/linegate/linegate/internal/local"
)

// errChecksFailed makes doctor exit 1 after printing its report.
var errChecksFailed = errors.New("some checks failed (see the fixes above)")

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ctx, cancel, d, err := addDeploymentFlags(fs, time.Minute).parse(ctx, fs, args, "usage: linegate doctor (--endpoint-url URL | --stack NAME)")
	defer cancel()
	if err != nil {
		return err
	}
	var t doctor.Target
	if d.local {
		secret, _ := d.channelSecret(ctx)
		t = doctor.Local{URL: d.url, Token: envOr("LINE_CHANNEL_ACCESS_TOKEN", local.DefaultToken), Secret: secret}
	} else {
		t = doctor.Stack{Info: d.stack, LINE: d.line, Secret: d.channelSecret, SQS: sqs.NewFromConfig(d.aws),
			Alarmsrc: cloudwatch.NewFromConfig(d.aws), SNS: sns.NewFromConfig(d.aws)}
	}
	rs := doctor.Run(ctx, t)
	doctor.Print(stdout, t.Describe(), rs)
	if doctor.Failed(rs) {
		return errChecksFailed
	}
	return nil
}
