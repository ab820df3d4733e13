package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/local"
)

func localCommand(fs *flag.FlagSet) action {
	addr := fs.String("addr", local.DefaultAddr, "address to serve the webhook, the local LINE API and the inspect endpoints on")
	tmpl := fs.String("template", "template.yaml", "the SAM template to run")
	scale := fs.Float64("time-scale", 1, "compress visibility timeouts and alarm periods by this factor (60: a 3-minute timeout takes 3 s)")
	endpoint := fs.String("endpoint-url", "", "run against this AWS-compatible endpoint (moto_server, LocalStack) instead of the in-memory cloud")
	verbose := fs.Bool("verbose", false, "also print the functions' JSON logs and EMF metrics to stderr")
	allowRemote := fs.Bool("allow-remote", false, "allow an --addr beyond loopback; every path but the webhook then needs the token")
	watchFlag := fs.Bool("watch", false, "rebuild the bot and swap it in when a Go file of the module changes, keeping queues and state")
	botPkg := fs.String("bot", "./functions/worker", "the package of the project's worker function, built and run as the bot's process")
	state := fs.String("state", "", "keep queues, DLQs, the DynamoDB tables and the event log in this directory: they survive a crash and a restart (make local uses .linegate)")
	token := fs.String("token", os.Getenv("LINEGATE_LOCAL_TOKEN"), "the token /_local, the AWS endpoints and the LINE API mock require (default $LINEGATE_LOCAL_TOKEN; generated with --allow-remote)")
	tracing := fs.String("tracing", "", "the functions' tracing backend: xray (the X-Ray SDK) or otel (OpenTelemetry, OTLP datagrams to the local X-Ray daemon); default: the template's Tracing parameter")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if *scale <= 0 {
			return usageError{"--time-scale must be positive"}
		}
		var backend config.Backend
		if *tracing != "" {
			b, err := config.ParseBackend(*tracing)
			if err != nil {
				return usageError{"--tracing " + err.Error()}
			}
			backend = b
		}
		if _, err := os.Stat(*tmpl); errors.Is(err, iofs.ErrNotExist) {
			wd, _ := os.Getwd()
			return fmt.Errorf("%s not found in %s: run linegate local from the repository (where template.yaml is), or pass --template path/to/template.yaml", *tmpl, wd)
		}
		if *endpoint != "" && *scale != 1 {
			fmt.Fprintf(stderr, "note: with --endpoint-url, --time-scale %g compresses alarm periods and batching windows only; the endpoint's queues keep their real visibility timeouts\n", *scale)
		}
		if *state != "" && *endpoint != "" {
			return usageError{"--state and --endpoint-url exclude each other: with an endpoint, the endpoint keeps the state"}
		}
		runner, err := newBotRunner(*botPkg)
		if err != nil {
			return err
		}
		defer runner.close()
		cfg := local.Config{Template: *tmpl, Addr: *addr, TimeScale: *scale, EndpointURL: *endpoint, Getenv: os.Getenv, Out: stdout,
			Bot: runner.bot, WorkerEnv: runner.workerEnv,
			AllowRemote: *allowRemote, Token: *token, StateDir: *state, Tracing: backend}
		if *verbose {
			cfg.Logs = stderr
		}
		rt, err := local.Start(ctx, cfg)
		if err != nil {
			return err
		}
		defer rt.Close()
		started := func() { banner(stdout, rt, *endpoint, *scale, *token != "") }
		if err := runner.run(ctx, *tmpl, *watchFlag, stdout, started); err != nil {
			return fmt.Errorf("the bot: %w", err)
		}
		<-ctx.Done()
		fmt.Fprintln(stdout, "linegate local: shutting down")
		return nil
	}
}

// banner is what linegate local prints once it serves: where, what state it
// keeps, and how to reach it.
func banner(w io.Writer, rt *local.Runtime, endpoint string, scale float64, tokenGiven bool) {
	backend := "in-memory cloud"
	if endpoint != "" {
		backend = endpoint
	}
	fmt.Fprintf(w, "linegate local ready: webhook %s (%s, time scale %g)\n", rt.WebhookURL(), backend, scale)
	console := rt.URL() + "/"
	if rt.Token() != "" && !tokenGiven {
		console += "?token=" + rt.Token()
	}
	fmt.Fprintf(w, "  console: %s  (chat as a LINE user, the operator's phone, queues, alarms, events, traces, logs)\n", console)
	switch {
	case endpoint != "":
	case rt.StateDir() != "":
		fmt.Fprintf(w, "  state: kept in %s: queues, DLQs, the DynamoDB tables and the event log survive a crash and a restart\n", rt.StateDir())
	default:
		fmt.Fprintln(w, "  state: in memory only: queues, DLQs, the idempotency table and the event log are lost when this process stops (--state DIR keeps them)")
	}
	fmt.Fprintf(w, "  try: go tool linegate send --url %s --text hello\n", rt.WebhookURL())
	fmt.Fprintf(w, "  inspect: %s/_local/events  /_local/line/messages  /_local/line/loading  /_local/queues  /_local/alarms  /_local/traces\n", rt.URL())
	fmt.Fprintf(w, "  tracing: %s (--tracing xray|otel)\n", tracingName(rt.Tracing()))
	if rt.Remote() {
		fmt.Fprintf(w, "  WARNING: listening on %s, beyond loopback: anyone who can reach it can post webhooks (signed with the channel secret),\n", rt.ListenAddr())
		fmt.Fprintln(w, "  and every other path needs the token (Authorization: Bearer TOKEN, X-Linegate-Token, ?token=, or as AWS_ACCESS_KEY_ID)")
	}
	switch {
	case rt.Token() != "" && tokenGiven:
		fmt.Fprintln(w, "  token: the one given by --token / $LINEGATE_LOCAL_TOKEN")
	case rt.Token() != "":
		fmt.Fprintf(w, "  token: %s\n", rt.Token())
	}
}

// tracingName says which backend traces, for the banner.
func tracingName(b config.Backend) string {
	if b == config.TracingOTel {
		return "otel: OpenTelemetry, OTLP datagrams to the local X-Ray daemon"
	}
	return "xray: the X-Ray SDK"
}
