// Command linegate is the developer CLI: run the whole pipeline locally, sign
// and send webhooks, redrive dead-letter queues, and replay archived events.
//
//	linegate local   [--addr 127.0.0.1:3000] [--template template.yaml] [--time-scale 1] [--endpoint-url URL]
//	linegate send    [--url URL] [--secret S] (--text T [--user U] | --event follow|postback|unfollow | --file body.json)
//	linegate sign    --secret S FILE
//	linegate redrive --queue NAME [--endpoint-url URL]
//	linegate replay  --since RFC3339 --until RFC3339 [--bus linegate] [--archive NAME] [--endpoint-url URL] [--no-wait]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands maps a subcommand to its entry point. Each returns an error whose
// text is printed; exit status 2 is for usage errors.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"local":   runLocal,
	"send":    runSend,
	"sign":    runSign,
	"redrive": runRedrive,
	"replay":  runReplay,
	"bench":   runBench,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "linegate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "linegate %s: %v\n", args[0], err)
		if _, ok := err.(usageError); ok {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks bad command-line input (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: linegate <command> [flags]

commands:
  local    run the whole pipeline on this machine (webhook, bus, queues, workers, alarms, notifier)
  send     sign and post a webhook to a running linegate (or any webhook URL)
  sign     print the x-line-signature of a file's bytes
  bench    ack latency, throughput, crash and chaos: linegate against the synchronous and in-process designs;
           --mix: quick replies next to long work
  redrive  move a dead-letter queue's messages back to their source queue (AWS, an endpoint, or linegate local)
  replay   replay the bus archive's events of a time window to the bus (EventBridge StartReplay)

run 'linegate <command> -h' for a command's flags
`)
}
