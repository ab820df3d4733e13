// Command linegate is the developer CLI, installed with go install (or a
// project's `go tool linegate`): write a new project, run the whole
// pipeline locally with the project's own bot, sign and send webhooks,
// redrive dead-letter queues, and replay archived events.
//
//	linegate new     [--module PATH] [--name NAME] [--linegate DIR|VERSION] DIR
//	linegate local   [--addr 127.0.0.1:3000] [--template template.yaml] [--time-scale 1] [--endpoint-url URL] [--allow-remote] [--token T] [--watch] [--bot ./functions/worker]
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

// A command declares its flags on fs and returns the action that runs once
// they are parsed. run makes every command's flag set the same way (named
// for the command, printing its usage and errors to stderr) and reports a
// bad flag as a usage error, so no command repeats that.
type command func(fs *flag.FlagSet) action

// An action runs a command with the arguments that follow its flags. It
// returns an error whose text is printed; a usageError exits 2, any other 1.
type action func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// commands maps a subcommand to its declaration.
var commands = map[string]command{
	"new":         newCommand,
	"local":       localCommand,
	"send":        sendCommand,
	"sign":        signCommand,
	"redrive":     redriveCommand,
	"replay":      replayCommand,
	"env-json":    envJSONCommand,
	"bench":       benchCommand,
	"doctor":      doctorCommand,
	"resend-held": resendHeldCommand,
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
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	act := cmd(fs)
	err := fs.Parse(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set has printed the command's usage
	}
	if err != nil {
		err = usageError{err.Error()}
	} else {
		err = act(ctx, fs.Args(), stdout, stderr)
	}
	if err != nil {
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
  new      write a new linegate project (your bot in your own module) into a directory
  local    run the whole pipeline on this machine with the bot of the module it is started in
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
