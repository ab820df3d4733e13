// Command testsummary runs `go test -json` with its arguments and prints
// what plain `go test` prints, then every skipped test with its reason and
// every failed one (package internal/testsummary). It exits with go test's
// status. `make test` runs it:
//
//	go run ./internal/cmd/testsummary -race -count=1 ./...
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/linegate/linegate/internal/testsummary"
)

func main() {
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	cmd := exec.Command(gobin, append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	sum, serr := testsummary.Summarise(out, os.Stdout)
	werr := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(werr, &exit):
		os.Exit(exit.ExitCode())
	case werr != nil || serr != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", errors.Join(werr, serr))
		os.Exit(2)
	case len(sum.Failed) > 0 || len(sum.FailedPackages) > 0:
		os.Exit(1)
	}
}
