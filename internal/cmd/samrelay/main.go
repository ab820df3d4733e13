// Command samrelay lets a function under `sam local invoke` on Linux reach a
// `linegate local` that listens on loopback (docs/deploy.md, "Try a function
// with sam local invoke"):
//
//	go run ./internal/cmd/samrelay            # Docker bridge:3000 → 127.0.0.1:3000
//	go run ./internal/cmd/samrelay --to 127.0.0.1:3917
//
// samconfig.toml maps host.docker.internal to Docker's host-gateway, which on
// Linux is the default bridge's gateway (usually 172.17.0.1), not loopback.
// samrelay listens on that address only (never 0.0.0.0) at the port of
// events/env.json's URLs and forwards each connection unchanged to --to. It
// runs until interrupted. Docker Desktop (macOS, Windows) forwards
// host.docker.internal to the host's loopback by itself: no relay there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/linegate/linegate/internal/samcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "samrelay:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run parses args, starts the relay and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("samrelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to listen on (default: the Docker bridge's gateway, port --port)")
	port := fs.Int("port", 3000, "the port events/env.json's URLs name (http://host.docker.internal:3000)")
	to := fs.String("to", "127.0.0.1:3000", "where linegate local listens")
	dockerHost := fs.String("docker-host", "", "the Docker daemon to ask for the bridge's address (default $DOCKER_HOST, else "+samcli.DefaultDockerHost+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %w", fs.Arg(0), flag.ErrHelp)
	}
	addr := *listen
	if addr == "" {
		if runtime.GOOS != "linux" {
			return errors.New("not needed here: Docker Desktop forwards host.docker.internal to this machine's loopback, so linegate local on 127.0.0.1:3000 is reached directly (pass --listen to relay anyway)")
		}
		d, err := samcli.NewDocker(*dockerHost)
		if err != nil {
			return err
		}
		if addr, err = samcli.RelayAddress(ctx, d, runtime.GOOS, *port); err != nil {
			return fmt.Errorf("find the Docker bridge's address (is dockerd running? or pass --listen 172.17.0.1:%d): %w", *port, err)
		}
	}
	r, err := samcli.Listen(addr, *to, samcli.WithDialErrors(func(err error) {
		fmt.Fprintf(stderr, "samrelay: %v (is linegate local running on %s?)\n", err, *to)
	}))
	if err != nil {
		return err
	}
	defer r.Close()
	_, lport, _ := net.SplitHostPort(r.Addr().String())
	fmt.Fprintf(stdout, "samrelay: %s → %s (containers reach it as host.docker.internal:%s); Ctrl-C stops it\n", r.Addr(), *to, lport)
	<-ctx.Done()
	return nil
}
