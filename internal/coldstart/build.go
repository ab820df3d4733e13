// Package coldstart builds the Lambda functions exactly as they are deployed
// (the Makefile's build-<LogicalId> recipe) and runs them, without Docker,
// under the AWS Lambda Runtime Interface Emulator (aws-lambda-rie), so the
// cost of a cold start (binary and zip size, INIT duration, the wait on SSM)
// is measured rather than guessed. What a function does under `sam local
// invoke` is not modelled here: internal/samcli runs the real SAM CLI.
//
// The emulator runs on Linux only. Install it with
//
//	go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d
package coldstart

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BootstrapName is the file name Lambda's provided.al2023 runtime executes,
// and the one name a deployment zip must contain.
const BootstrapName = "bootstrap"

// Binary is one built function: the bootstrap executable and its size in
// bytes.
type Binary struct {
	Path string
	Size int64
}

// Build builds the function folder function (e.g. "webhook") of the
// repository at repoRoot for linux/goarch into outDir/bootstrap by running
// the Makefile's recipe, exactly as SAM's `BuildMethod: makefile` does:
// `make build-<LogicalId> ARTIFACTS_DIR=<outDir>`, with LAMBDA_GOARCH set to
// goarch (the Makefile builds for linux only). outDir is created if needed.
// WithGo sets the Makefile's GO. A failed build returns make's output in the
// error.
func Build(ctx context.Context, repoRoot, function, goarch, outDir string, opts ...Option) (Binary, error) {
	o := newOptions(opts)
	dir, err := outputDir(outDir)
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", function, err)
	}
	args := []string{"--no-print-directory", "-C", repoRoot, "build-" + LogicalID(function), "ARTIFACTS_DIR=" + dir, "LAMBDA_GOARCH=" + goarch}
	if o.goBin != "" {
		args = append(args, "GO="+o.goBin)
	}
	cmd := exec.CommandContext(ctx, "make", args...)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return Binary{}, fmt.Errorf("build %s for linux/%s: make %s: %w\n%s", function, goarch, strings.Join(args, " "), err, output.Bytes())
	}
	out := filepath.Join(dir, BootstrapName)
	fi, err := os.Stat(out)
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: the recipe wrote no %s: %w", function, BootstrapName, err)
	}
	return Binary{Path: out, Size: fi.Size()}, nil
}

// HelloPackage is the hello-world aws-lambda-go function the functions'
// INIT is compared with (Measure builds it with their recipe).
const HelloPackage = "./internal/coldstart/testdata/hello"

// HelloName is the hello-world function's name in Measure's rows.
const HelloName = "hello-world"

// BuildPackage builds the main package pkg (a path in the repository at
// repoRoot, such as HelloPackage) for linux/goarch into outDir/bootstrap
// with the Makefile's own recipe for the functions: its LAMBDA_BUILD
// variable, printed by make, so the flags cannot drift from the ones SAM
// builds with. WithGo sets the Makefile's GO.
func BuildPackage(ctx context.Context, repoRoot, pkg, goarch, outDir string, opts ...Option) (Binary, error) {
	o := newOptions(opts)
	dir, err := outputDir(outDir)
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", pkg, err)
	}
	args := []string{"--no-print-directory", "-s", "-C", repoRoot, "--eval", "print-lambda-build: ; @: $(info $(LAMBDA_BUILD))",
		"print-lambda-build", "LAMBDA_GOARCH=" + goarch}
	if o.goBin != "" {
		args = append(args, "GO="+o.goBin)
	}
	var stderr bytes.Buffer
	mk := exec.CommandContext(ctx, "make", args...)
	mk.Stderr = &stderr
	recipe, err := mk.Output()
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: read the Makefile's LAMBDA_BUILD: %w\n%s", pkg, err, stderr.Bytes())
	}
	out := filepath.Join(dir, BootstrapName)
	line := strings.TrimSpace(string(recipe)) + " -o '" + out + "' " + pkg
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = repoRoot
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return Binary{}, fmt.Errorf("build %s for linux/%s: %s: %w\n%s", pkg, goarch, line, err, output.Bytes())
	}
	fi, err := os.Stat(out)
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", pkg, err)
	}
	return Binary{Path: out, Size: fi.Size()}, nil
}

// outputDir makes outDir (absolute) for a build's bootstrap.
func outputDir(outDir string) (string, error) {
	dir, err := filepath.Abs(outDir)
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// zipTime is the modification time stored in every zip, so the same binary
// always gives the same archive.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Zip packs bin as SAM uploads it, a deflated archive holding one executable
// entry named bootstrap, writes it to bin.Path + ".zip", and returns the
// archive's size in bytes: what Lambda downloads on a cold start.
func Zip(bin Binary) (int64, error) {
	src, err := os.Open(bin.Path)
	if err != nil {
		return 0, fmt.Errorf("zip %s: %w", bin.Path, err)
	}
	defer src.Close()
	path := bin.Path + ".zip"
	dst, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("zip %s: %w", bin.Path, err)
	}
	if err := writeZip(dst, src); err != nil {
		dst.Close()
		return 0, fmt.Errorf("zip %s: %w", bin.Path, err)
	}
	if err := dst.Close(); err != nil {
		return 0, fmt.Errorf("zip %s: %w", bin.Path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("zip %s: %w", bin.Path, err)
	}
	return fi.Size(), nil
}

func writeZip(w io.Writer, bootstrap io.Reader) error {
	zw := zip.NewWriter(w)
	h := &zip.FileHeader{Name: BootstrapName, Method: zip.Deflate, Modified: zipTime}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, bootstrap); err != nil {
		return err
	}
	return zw.Close()
}
