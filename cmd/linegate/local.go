package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/app"
	"github.com/linegate/linegate/pkg/bot"
	"github.com/linegate/linegate/pkg/config"
)

func runLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", local.DefaultAddr, "address to serve the webhook, the local LINE API and the inspect endpoints on")
	tmpl := fs.String("template", "template.yaml", "the SAM template to run")
	scale := fs.Float64("time-scale", 1, "compress visibility timeouts and alarm periods by this factor (60: a 3-minute timeout takes 3 s)")
	endpoint := fs.String("endpoint-url", "", "run against this AWS-compatible endpoint (moto_server, LocalStack) instead of the in-memory cloud")
	verbose := fs.Bool("verbose", false, "also print the functions' JSON logs and EMF metrics to stderr")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *scale <= 0 {
		return usageError{"--time-scale must be positive"}
	}
	if *endpoint != "" && *scale != 1 {
		fmt.Fprintf(stderr, "note: with --endpoint-url, --time-scale %g compresses alarm periods and batching windows only; the endpoint's queues keep their real visibility timeouts\n", *scale)
	}
	cfg := local.Config{Template: *tmpl, Addr: *addr, TimeScale: *scale, EndpointURL: *endpoint, Getenv: os.Getenv, Out: stdout, Bot: exampleBot}
	if *verbose {
		cfg.Logs = stderr
	}
	rt, err := local.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	backend := "in-memory cloud"
	if *endpoint != "" {
		backend = *endpoint
	}
	fmt.Fprintf(stdout, "linegate local ready: webhook %s (%s, time scale %g)\n", rt.WebhookURL(), backend, *scale)
	fmt.Fprintf(stdout, "  try: go run ./cmd/linegate send --url %s --text hello\n", rt.WebhookURL())
	fmt.Fprintf(stdout, "  inspect: %s/_local/events  /_local/line/messages  /_local/queues  /_local/alarms  /_local/traces\n", rt.URL())
	<-ctx.Done()
	fmt.Fprintln(stdout, "linegate local: shutting down")
	return nil
}

// exampleBot is the bot `linegate local` runs: the same one line as in
// functions/worker/main.go. Run your own bot by changing both.
func exampleBot(cfg config.Worker) *bot.Router { return app.New(app.Config{Probes: cfg.Probes}) }
