package botproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/linegate/linegate/pkg/bot"
)

// The environment linegate local gives a bot process it starts (a
// project's own functions/worker binary, whose entry serves the protocol
// instead of starting Lambda's runtime when these are set).
const (
	// EnvSocket is the Unix socket the child serves its dispatches on.
	EnvSocket = "LINEGATE_BOT_SOCKET"
	// EnvParent is the parent's Unix socket, which the child calls back
	// on: its replies, pushes, steps and sessions run there.
	EnvParent = "LINEGATE_BOT_PARENT"
	// EnvProtocol is the parent's Protocol.
	EnvProtocol = "LINEGATE_BOT_PROTOCOL"
	// EnvLifeline, set to "stdin", says the child's standard input is a
	// pipe the parent holds open and never writes: its end (the parent
	// exited, even by SIGKILL) stops the child, which never outlives
	// linegate local.
	EnvLifeline = "LINEGATE_BOT_LIFELINE"
)

// childGrace is how long a child stopped by SIGINT or SIGTERM lets the
// dispatches in flight finish.
const childGrace = 30 * time.Second

// Child reports whether this process was started as a bot process by
// linegate local: EnvSocket is set, and the process is not in Lambda
// (AWS_LAMBDA_RUNTIME_API), where the variable means nothing.
func Child(getenv func(string) string) bool {
	return getenv(EnvSocket) != "" && getenv("AWS_LAMBDA_RUNTIME_API") == ""
}

// ServeChild is a bot process's main: it checks that the parent speaks
// this Protocol, then serves router's dispatches on EnvSocket, calling the
// parent back on EnvParent, until ctx ends or SIGINT or SIGTERM comes, and
// lets the dispatches in flight finish.
func ServeChild(ctx context.Context, router *bot.Router, getenv func(string) string) error {
	socket, parent := getenv(EnvSocket), getenv(EnvParent)
	if socket == "" || parent == "" {
		return fmt.Errorf("botproc: %s and %s must both be set (linegate local sets them)", EnvSocket, EnvParent)
	}
	peer, err := strconv.Atoi(getenv(EnvProtocol))
	if err != nil {
		return fmt.Errorf("%w: linegate local gave no %s (a linegate from before versioned protocols); this bot is built with linegate %s (protocol %d)",
			ErrProtocol, EnvProtocol, Version(), Protocol)
	}
	if peer != Protocol {
		return fmt.Errorf("%w: linegate local speaks protocol %d, this bot (built with linegate %s) speaks %d: "+
			"run the linegate of the project's go.mod (`go tool linegate local`)", ErrProtocol, peer, Version(), Protocol)
	}
	if router == nil {
		return errors.New("botproc: no router to serve")
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("botproc: listen on %s: %w", socket, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if getenv(EnvLifeline) == "stdin" {
		ctx = untilEOF(ctx, os.Stdin)
	}
	return Serve(ctx, ln, router, Socket(parent), childGrace)
}

// untilEOF is ctx, ended when r reaches its end (or fails).
func untilEOF(ctx context.Context, r io.Reader) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, r)
		cancel()
	}()
	return ctx
}
