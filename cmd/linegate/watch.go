package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/linegate/linegate/internal/botproc"
	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/watch"
	"github.com/linegate/linegate/pkg/bot"
)

// Environment a bot process gets from `linegate local --watch`.
const (
	// envBotParent is the Unix socket the bot process calls linegate local
	// back on: its replies, pushes, steps and sessions run there, on the
	// worker's record (package botproc).
	envBotParent = "LINEGATE_BOT_PARENT"
	envBotProbes = "LINEGATE_BOT_PROBES"
)

// watcher is the bot side of `linegate local --watch`: where the local
// worker dispatches, and what it learnt of the worker's configuration.
type watcher struct {
	client *botproc.Client
	dir    string // the built binaries and the sockets
	worker config.Worker
}

// newWatcher makes the directory of the bot processes and the socket they
// call back on.
func newWatcher() (*watcher, error) {
	dir, err := os.MkdirTemp("", "linegate-watch-")
	if err != nil {
		return nil, fmt.Errorf("--watch: %w", err)
	}
	client, err := botproc.NewClient(filepath.Join(dir, "linegate.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("--watch: %w", err)
	}
	return &watcher{client: client, dir: dir}, nil
}

// close stops serving the bot processes' calls and removes their
// directory.
func (w *watcher) close() {
	_ = w.client.Close()
	_ = os.RemoveAll(w.dir)
}

// bot is local.Config.Bot under --watch: every event goes to the bot
// process.
func (w *watcher) bot(cfg config.Worker) *bot.Router {
	w.worker = cfg
	return w.client.Router()
}

// run builds the bot from the module around the current directory, runs
// it, and rebuilds it on every change until ctx ends.
func (w *watcher) run(ctx context.Context, template string, out io.Writer) error {
	root, err := watch.ModuleRoot(".")
	if err != nil {
		return err
	}
	self, err := filepath.Abs(template)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  watch: the bot (cmd/linegate's exampleBot and what it imports) runs in its own process, rebuilt when a Go file under %s changes;\n", root)
	fmt.Fprintln(out, "         the webhook, the worker's pipeline, the notifier and the template stay as started (restart for those)")
	env := append(os.Environ(), envBotParent+"="+w.client.Socket(), envBotProbes+"="+strconv.FormatBool(w.worker.Probes))
	return watch.Run(ctx, watch.Config{
		Root: root, Notice: []string{self}, Dir: w.dir, Out: out, Client: w.client,
		Build: watch.GoBuild(root, "./cmd/linegate"),
		Command: func(bin, socket string) *exec.Cmd {
			cmd := exec.Command(bin, "bot-serve", "--socket", socket)
			cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stderr, os.Stderr
			return cmd
		},
	})
}

// botServeCommand is the hidden `linegate bot-serve`: the bot process of
// `linegate local --watch`, serving exampleBot on a Unix socket until
// SIGINT or SIGTERM, then finishing the events it holds. What its handlers
// ask of their events runs in linegate local, over the socket in
// $LINEGATE_BOT_PARENT.
func botServeCommand(fs *flag.FlagSet) action {
	socket := fs.String("socket", "", "the Unix socket to serve on (linegate local --watch starts this command)")
	return func(ctx context.Context, args []string, _, stderr io.Writer) error {
		parent := os.Getenv(envBotParent)
		if *socket == "" || parent == "" {
			return usageError{"usage: " + envBotParent + "=SOCKET linegate bot-serve --socket PATH (started by linegate local --watch)"}
		}
		ln, err := net.Listen("unix", *socket)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", *socket, err)
		}
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		cfg := config.Worker{Probes: os.Getenv(envBotProbes) == "true"}
		return botproc.Serve(ctx, ln, exampleBot(cfg), botproc.Socket(parent), 30*time.Second)
	}
}
