package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/pkg/signature"
)

func runSign(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret", envOr("LINE_CHANNEL_SECRET", local.DefaultSecret), "channel secret (default $LINE_CHANNEL_SECRET, else linegate local's)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *secret == "" || fs.NArg() != 1 {
		return usageError{"usage: linegate sign [--secret S] FILE"}
	}
	body, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, signature.Sign([]byte(*secret), body))
	return nil
}
