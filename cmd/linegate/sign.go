package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/signature"
)

// signCommand is `linegate sign`: the x-line-signature of a file's bytes.
func signCommand(fs *flag.FlagSet) action {
	secret := fs.String("secret", envOr("LINE_CHANNEL_SECRET", local.DefaultSecret), "channel secret (default $LINE_CHANNEL_SECRET, else linegate local's)")
	return func(_ context.Context, args []string, stdout, _ io.Writer) error {
		if *secret == "" || len(args) != 1 {
			return usageError{"usage: linegate sign [--secret S] FILE"}
		}
		body, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, signature.Sign([]byte(*secret), body))
		return nil
	}
}
