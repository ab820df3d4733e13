package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/linegate/linegate/pkg/eventbus"
	"github.com/linegate/linegate/pkg/ingress"
)

// printingBus stands in for EventBridge: it prints each entry it would publish.
type printingBus struct {
	mu  sync.Mutex
	out io.Writer
}

func (p *printingBus) Publish(_ context.Context, entries []eventbus.Entry) (eventbus.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range entries {
		line, _ := json.Marshal(map[string]any{"source": eventbus.DefaultSource, "detail-type": e.DetailType, "detail": json.RawMessage(e.Detail)})
		fmt.Fprintf(p.out, "publish %s\n", line)
	}
	return eventbus.Result{Accepted: len(entries)}, nil
}

func runLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:3000", "address to serve the webhook on")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	secret := envOr("LINE_CHANNEL_SECRET", "local-channel-secret")
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	h, err := ingress.New(&printingBus{out: stdout}, ingress.WithSecrets(secret), ingress.WithLogger(log))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook", h)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "linegate local ready: webhook http://%s/webhook\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
