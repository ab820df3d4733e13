package watch

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func signalNotify(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
