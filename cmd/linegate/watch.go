package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/linegate/linegate/internal/botproc"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/watch"
	"github.com/linegate/linegate/pkg/bot"
)

// botRunner is the bot side of `linegate local`: the project's own worker
// binary (its functions/worker, built from the module linegate local is
// started in) runs as the bot's process, and the local worker dispatches
// to it over the bot-process protocol (package botproc). With --watch it
// is rebuilt and swapped when a Go file of the module changes.
type botRunner struct {
	client *botproc.Client
	dir    string // the built binaries and the sockets
	root   string // the module's directory
	pkg    string // the worker's package, relative to root

	// lifeline is every bot process's standard input: the read end of a
	// pipe whose write end only this process holds (botproc.EnvLifeline).
	lifeline, lifelineW *os.File

	mu  sync.Mutex
	env map[string]string // the worker function's environment (local.Config.WorkerEnv)
}

// newBotRunner makes the directory of the bot processes and the socket
// they call back on, for the bot of package pkg of the module around the
// current directory (found by run).
func newBotRunner(pkg string) (*botRunner, error) {
	dir, err := os.MkdirTemp("", "linegate-bot-")
	if err != nil {
		return nil, err
	}
	client, err := botproc.NewClient(filepath.Join(dir, "linegate.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = client.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &botRunner{client: client, dir: dir, pkg: pkg, lifeline: r, lifelineW: w}, nil
}

// close stops serving the bot processes' calls and removes their
// directory.
func (b *botRunner) close() {
	_ = b.client.Close()
	_ = b.lifelineW.Close()
	_ = b.lifeline.Close()
	_ = os.RemoveAll(b.dir)
}

// bot is local.Config.Bot: every event goes to the bot process, routed
// as its router routes; its route queues must be in the worker's table.
func (b *botRunner) bot(cfg config.Worker) *bot.Router {
	b.client.SetQueues(cfg.RouteQueues)
	return b.client.Router()
}

// workerEnv is local.Config.WorkerEnv: the bot process gets the worker
// function's environment, as in Lambda.
func (b *botRunner) workerEnv(env map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.env = maps.Clone(env)
}

// processEnv is a bot process's environment: the worker function's, what
// a Go program needs of the developer's (PATH, HOME, TMPDIR), and the
// protocol's sockets.
func (b *botRunner) processEnv(socket string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.env)) {
		env = append(env, k+"="+b.env[k])
	}
	return append(env, botproc.EnvSocket+"="+socket, botproc.EnvParent+"="+b.client.Socket(),
		botproc.EnvProtocol+"="+strconv.Itoa(botproc.Protocol), botproc.EnvLifeline+"=stdin")
}

// run builds the bot, runs it, calls started once it answers, and with
// rebuild rebuilds it on every change, until ctx ends.
func (b *botRunner) run(ctx context.Context, template string, rebuild bool, out io.Writer, started func()) error {
	self, err := filepath.Abs(template)
	if err != nil {
		return err
	}
	if b.root, err = watch.ModuleRoot("."); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(b.root, filepath.FromSlash(b.pkg))); err != nil {
		return fmt.Errorf("no %s in the module at %s: --bot names the package of the project's worker function (its main calls worker.Start with the bot): %w", b.pkg, b.root, err)
	}
	fmt.Fprintf(out, "  bot: %s of %s, built with go build and run in its own process\n", b.pkg, b.root)
	if rebuild {
		fmt.Fprintf(out, "  watch: the bot is rebuilt when a Go file under %s changes; the webhook, the worker's pipeline,\n", b.root)
		fmt.Fprintln(out, "         the notifier and the template stay as started (restart for those)")
	}
	return watch.Run(ctx, watch.Config{
		Root: b.root, Notice: []string{self}, Dir: b.dir, Out: out, Client: b.client, Rebuild: rebuild, Started: started,
		Build: watch.GoBuild(b.root, b.pkg),
		Command: func(bin, socket string) *exec.Cmd {
			cmd := exec.Command(bin)
			cmd.Env, cmd.Stdout, cmd.Stderr = b.processEnv(socket), os.Stderr, os.Stderr
			cmd.Stdin = b.lifeline // its end, when this process exits however it does, stops the bot
			return cmd
		},
	})
}
