package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/doctor"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linetoken"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/secrets"
	"github.com/linegate/linegate/internal/stack"
)

// stackFlags are how the commands that call AWS directly (redrive, replay,
// env-json) name what they act on: a deployed CloudFormation stack whose
// resources they find by logical id, and an endpoint to call instead of AWS.
type stackFlags struct {
	stack    *string
	endpoint *string
}

// addStackFlags adds --stack (its usage says what the command reads from
// the stack) and --endpoint-url to fs.
func addStackFlags(fs *flag.FlagSet, stackUsage string) stackFlags {
	return stackFlags{
		stack:    fs.String("stack", "", stackUsage),
		endpoint: fs.String("endpoint-url", "", "an AWS-compatible endpoint: linegate local (http://127.0.0.1:3000), moto_server, LocalStack; default: AWS"),
	}
}

// open loads the AWS configuration for --endpoint-url and, with --stack,
// describes the stack (nil without).
func (f stackFlags) open(ctx context.Context) (aws.Config, *stack.Stack, error) {
	cfg, err := awsConfig(ctx, *f.endpoint)
	if err != nil || *f.stack == "" {
		return cfg, nil, err
	}
	st, err := stack.Describe(ctx, cloudformation.NewFromConfig(cfg), *f.stack)
	return cfg, st, err
}

// deploymentFlags are how doctor and resend-held name what they act on:
// a `linegate local` (--endpoint-url) or a deployed stack (--stack).
type deploymentFlags struct {
	endpoint *string
	stack    *string
	timeout  *time.Duration
}

// addDeploymentFlags adds --endpoint-url, --stack and --timeout (default
// timeout) to fs.
func addDeploymentFlags(fs *flag.FlagSet, timeout time.Duration) deploymentFlags {
	return deploymentFlags{
		endpoint: fs.String("endpoint-url", "", "a linegate local, e.g. http://127.0.0.1:3000"),
		stack:    fs.String("stack", "", "a deployed stack's name (your default AWS credentials and region)"),
		timeout:  fs.Duration("timeout", timeout, "how long the command may take"),
	}
}

// connect opens the deployment the flags name, with a context bounded by
// --timeout (cancel it when done).
func (f deploymentFlags) connect(ctx context.Context, usage string) (context.Context, context.CancelFunc, *deployment, error) {
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	d, err := f.open(ctx, usage)
	return ctx, cancel, d, err
}

// deployment is what a command acts on: AWS clients' configuration, the
// LINE client with the deployment's credentials, and (for a stack) its
// outputs and parameters.
type deployment struct {
	local bool
	url   string // linegate local's URL
	aws   aws.Config
	stack *stack.Stack
	line  *lineapi.Client
}

// open resolves the flags: exactly one of --endpoint-url and --stack.
func (f deploymentFlags) open(ctx context.Context, usage string) (*deployment, error) {
	if (*f.endpoint == "") == (*f.stack == "") {
		return nil, usageError{usage}
	}
	quiet := slog.New(slog.DiscardHandler)
	hc := &http.Client{Timeout: 10 * time.Second}
	if *f.endpoint != "" {
		cfg, err := awsConfig(ctx, *f.endpoint)
		if err != nil {
			return nil, err
		}
		token := envOr("LINE_CHANNEL_ACCESS_TOKEN", local.DefaultToken)
		return &deployment{local: true, url: *f.endpoint, aws: cfg,
			line: lineapi.New(token, lineapi.WithBaseURL(*f.endpoint), lineapi.WithHTTPClient(hc), lineapi.WithLogger(quiet))}, nil
	}
	cfg, err := awsConfig(ctx, "")
	if err != nil {
		return nil, err
	}
	st, err := stack.Describe(ctx, cloudformation.NewFromConfig(cfg), *f.stack)
	if err != nil {
		return nil, err
	}
	tokens, _, err := linetoken.FromConfig(ctx, st.LineAuth(), sdkParameters{ssm.NewFromConfig(cfg)}, hc, nil)
	if err != nil {
		return nil, fmt.Errorf("the stack's channel access token: %w", err)
	}
	return &deployment{aws: cfg, stack: st,
		line: lineapi.New("", lineapi.WithTokenSource(tokens), lineapi.WithHTTPClient(hc), lineapi.WithLogger(quiet))}, nil
}

// sdkParameters is secrets.Parameters over the SDK's SSM client: the CLI
// runs with a developer's whole AWS configuration (profiles, endpoints),
// where the functions use secrets.SSM.
type sdkParameters struct{ c *ssm.Client }

// GetParameters implements secrets.Parameters.
func (p sdkParameters) GetParameters(ctx context.Context, names []string) (map[string]string, []string, error) {
	out, err := p.c.GetParameters(ctx, &ssm.GetParametersInput{Names: names, WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, nil, err
	}
	values := make(map[string]string, len(out.Parameters))
	for _, p := range out.Parameters {
		values[aws.ToString(p.Name)] = aws.ToString(p.Value)
	}
	return values, out.InvalidParameters, nil
}

// channelSecret reads the channel secret the deployment's webhook verifies
// with: linegate local's (LINE_CHANNEL_SECRET or its default), or the
// stack's ChannelSecretParameter in SSM.
func (d *deployment) channelSecret(ctx context.Context) (string, error) {
	if d.local {
		return envOr("LINE_CHANNEL_SECRET", local.DefaultSecret), nil
	}
	name := d.stack.Parameters["ChannelSecretParameter"]
	if name == "" {
		return "", errors.New("the stack has no ChannelSecretParameter")
	}
	vals, err := secrets.Resolve(ctx, sdkParameters{ssm.NewFromConfig(d.aws)}, config.Secret{Param: name})
	if err != nil {
		return "", err
	}
	return vals[0], nil
}

// errNoChannel is the error of a --channel the stack does not serve.
var errNoChannel = errors.New("no such channel")

// namedChannel is what doctor checks a stack's named channel ch with: a
// LINE client with its credentials (under the stack's
// ChannelParameterPath/ch/, in the stack's token mode) and the reader of
// its secret. ch must be one of the stack's Channels.
func (d *deployment) namedChannel(ctx context.Context, ch string) (*lineapi.Client, func(context.Context) (string, error), error) {
	served := strings.Split(d.stack.Parameters["Channels"], ",")
	if !slices.Contains(served, ch) {
		return nil, nil, fmt.Errorf("stack %s: %w %q (its Channels parameter is %q): add it as docs/deploy.md \"Adding a channel\" says",
			d.stack.Name, errNoChannel, ch, d.stack.Parameters["Channels"])
	}
	path := cmp.Or(strings.TrimRight(d.stack.Parameters["ChannelParameterPath"], "/"), "/linegate/channels") + "/" + ch + "/"
	c := config.Channel{Name: ch, Secret: config.Secret{Param: path + "secret"}, AccessToken: config.Secret{Param: path + "token"},
		ChannelID: config.Secret{Param: path + "channel-id"}, AssertionKey: config.Secret{Param: path + "assertion-key"}}
	base := d.stack.LineAuth()
	hc := &http.Client{Timeout: 10 * time.Second}
	params := sdkParameters{ssm.NewFromConfig(d.aws)}
	tokens, _, err := linetoken.FromConfig(ctx, c.Auth(base), params, hc, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("channel %s's access token: %w", ch, err)
	}
	line := lineapi.New("", lineapi.WithTokenSource(tokens), lineapi.WithHTTPClient(hc), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
	secret := func(ctx context.Context) (string, error) {
		vals, err := secrets.Resolve(ctx, params, c.Secret)
		if err != nil {
			return "", fmt.Errorf("channel %s's secret: %w", ch, err)
		}
		return vals[0], nil
	}
	return line, secret, nil
}

// pushers gives resend-held the client of each channel whose results are
// held, made once per channel when its first item comes: the default
// channel's is d.line; a named one's is made with its own token
// (linegate local's, or the stack's ChannelParameterPath/NAME/). A
// channel whose client cannot be made is logged and its items stay held.
func (d *deployment) pushers(ctx context.Context, log *slog.Logger) held.Pushers {
	made := map[string]*lineapi.Client{}
	return func(ch string) (held.Pusher, bool) {
		if ch == channel.Default {
			return d.line, true
		}
		if c, ok := made[ch]; ok {
			return c, c != nil
		}
		var c *lineapi.Client
		if d.local {
			if channel.Valid(ch) == nil {
				c = lineapi.New(envOr("LINE_CHANNEL_ACCESS_TOKEN_"+channel.EnvSuffix(ch), local.ChannelToken(ch, "")),
					lineapi.WithBaseURL(d.url), lineapi.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}), lineapi.WithLogger(slog.New(slog.DiscardHandler)))
			}
		} else if line, _, err := d.namedChannel(ctx, ch); err == nil {
			c = line
		} else {
			log.WarnContext(ctx, "a channel's held results stay held: no client for it", "channel", ch, "error", err.Error())
		}
		made[ch] = c
		return c, c != nil
	}
}

// errChecksFailed makes doctor exit 1 after printing its report.
var errChecksFailed = errors.New("some checks failed (see the fixes above)")

// doctorCommand is `linegate doctor`: it checks a deployment and prints a
// pass/fail report with fixes.
func doctorCommand(fs *flag.FlagSet) action {
	df := addDeploymentFlags(fs, time.Minute)
	chFlag := fs.String("channel", "", "check the named channel NAME (its token, its webhook /webhook/NAME, its secret) instead of the default one")
	return func(ctx context.Context, _ []string, stdout, _ io.Writer) error {
		ch, err := channel.Parse(*chFlag)
		if err != nil {
			return usageError{"--channel: " + err.Error()}
		}
		ctx, cancel, d, err := df.connect(ctx, "usage: linegate doctor (--endpoint-url URL | --stack NAME) [--channel NAME]")
		defer cancel()
		if err != nil {
			return err
		}
		var t doctor.Target
		switch {
		case d.local && ch == channel.Default:
			secret, _ := d.channelSecret(ctx)
			t = doctor.Local{URL: d.url, Token: envOr("LINE_CHANNEL_ACCESS_TOKEN", local.DefaultToken), Secret: secret}
		case d.local:
			sfx := channel.EnvSuffix(ch)
			t = doctor.Local{URL: d.url, Channel: ch, Token: envOr("LINE_CHANNEL_ACCESS_TOKEN_"+sfx, local.ChannelToken(ch, "")),
				Secret: envOr("LINE_CHANNEL_SECRET_"+sfx, local.ChannelSecret(ch))}
		case ch == channel.Default:
			t = doctor.Stack{Info: d.stack, LINE: d.line, Secret: d.channelSecret, SQS: sqs.NewFromConfig(d.aws),
				Events: eventbridge.NewFromConfig(d.aws), Alarmsrc: cloudwatch.NewFromConfig(d.aws), SNS: sns.NewFromConfig(d.aws)}
		default:
			line, secret, err := d.namedChannel(ctx, ch)
			if err != nil {
				return err
			}
			t = doctor.Stack{Info: d.stack, Channel: ch, LINE: line, Secret: secret, SQS: sqs.NewFromConfig(d.aws),
				Events: eventbridge.NewFromConfig(d.aws), Alarmsrc: cloudwatch.NewFromConfig(d.aws), SNS: sns.NewFromConfig(d.aws)}
		}
		rs := doctor.Run(ctx, t)
		doctor.Print(stdout, t.Describe(), rs)
		if doctor.Failed(rs) {
			return errChecksFailed
		}
		return nil
	}
}

// resendHeldCommand is `linegate resend-held`: it sends the results held
// for LINE's monthly limit.
func resendHeldCommand(fs *flag.FlagSet) action {
	df := addDeploymentFlags(fs, 5*time.Minute)
	queue := fs.String("queue", "linegate-HeldQueue", "the held queue's name (with --endpoint-url; a stack names it in its HeldQueueUrl output)")
	maxItems := fs.Int("max", 0, "send at most this many held results (0: all)")
	return func(ctx context.Context, _ []string, stdout, stderr io.Writer) error {
		ctx, cancel, d, err := df.connect(ctx, "usage: linegate resend-held (--endpoint-url URL | --stack NAME) [--max N]")
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
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		rep, err := held.ResendChannels(ctx, q, url, d.pushers(ctx, log), *maxItems, log)
		fmt.Fprintf(stdout, "resend-held: %s\n", rep)
		if errors.Is(err, held.ErrQuotaSpent) {
			return errors.New("LINE's monthly limit is still reached: raise it in LINE Official Account Manager, then run this again")
		}
		return err
	}
}
