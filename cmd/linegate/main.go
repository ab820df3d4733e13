// Command linegate is the developer CLI: run the whole pipeline locally, sign
// and send webhooks, redrive dead-letter queues, and replay archived events.
//
//	linegate local   [--addr 127.0.0.1:3000] [--template template.yaml] [--time-scale 1] [--endpoint-url URL] [--allow-remote] [--token T] [--watch]
//	linegate send    [--url URL] [--secret S] (--text T [--user U] | --event follow|postback|unfollow | --file body.json)
//	linegate sign    [--secret S] FILE
//	linegate redrive --queue URL|ARN|NAME [--stack NAME] [--kind auto|sqs|events] [--endpoint-url URL]
//	linegate env-json --stack NAME [--template template.yaml] [--out FILE]
//	linegate replay  --since RFC3339 --until RFC3339 [--bus linegate] [--archive NAME] [--endpoint-url URL] [--no-wait]
//	linegate doctor      (--endpoint-url URL | --stack NAME)
//	linegate resend-held (--endpoint-url URL | --stack NAME) [--max N]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands maps a subcommand to its entry point. Each returns an error whose
// text is printed; exit status 2 is for usage errors.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"local":       runLocal,
	"send":        runSend,
	"sign":        runSign,
	"redrive":     runRedrive,
	"replay":      runReplay,
	"env-json":    runEnvJSON,
	"bench":       runBench,
	"doctor":      runDoctor,
	"resend-held": runResendHeld,
	// bot-serve is not listed in usage: linegate local --watch runs it.
	"bot-serve": runBotServe,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "linegate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		if helpRequested(err) {
			return 0 // the flag set has printed the command's usage
		}
		fmt.Fprintf(stderr, "linegate %s: %v\n", args[0], err)
		if _, ok := err.(usageError); ok {
			return 2
		}
		return 1
	}
	return 0
}

// helpRequested reports whether err is -h or --help given to a command:
// the commands pass the flag package's error on as a usageError's text.
func helpRequested(err error) bool {
	var u usageError
	return errors.Is(err, flag.ErrHelp) || (errors.As(err, &u) && u.msg == flag.ErrHelp.Error())
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
  bench    ack latency, throughput, crash and chaos: linegate against the synchronous, in-process and durable-direct designs;
           --mix: quick replies next to long work
  redrive  move a dead-letter queue's messages back to their source queue (AWS, an endpoint, or linegate local)
  replay   replay the bus archive's events of a time window to the bus (EventBridge StartReplay)
  env-json write a sam local invoke --env-vars file pointing the functions at a deployed stack
  doctor   check a deployment (LINE webhook, redelivery, secrets, quota; DLQs, alarms, ops topic): pass/fail with fixes
  resend-held  send the results held for LINE's monthly limit, once quota has returned

run 'linegate <command> -h' for a command's flags
`)
}
