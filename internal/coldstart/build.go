// Package coldstart builds the Lambda functions exactly as they are deployed
// and runs them, without Docker, under the AWS Lambda Runtime Interface
// Emulator (aws-lambda-rie): `sam local invoke` minus the container. It exists
// so tests can push every sample event through the real bootstrap binaries,
// and so the cost of a cold start (binary and zip size, INIT duration) is
// measured rather than guessed.
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

// Tags are the build tags of every function, as the Makefile's LAMBDA_TAGS
// sets them (TestTagsMatchMakefile keeps the two in step): the RPC runtime
// provided.al2023 never uses is dropped.
func Tags(string) string { return "lambda.norpc" }

// Build compiles the Go main package in the directory function (for example
// <repo>/functions/webhook) for goos/goarch into outDir/bootstrap, the way the
// Makefile and SAM build it: CGO_ENABLED=0, -tags Tags(function), -trimpath and
// a stripped binary (-ldflags '-s -w'). outDir is created if needed. The go
// command is looked up on PATH unless WithGo is given. A failed build returns
// the compiler's output in the error.
func Build(ctx context.Context, function, goos, goarch, outDir string, opts ...Option) (Binary, error) {
	o := newOptions(opts)
	goBin := o.goBin
	if goBin == "" {
		p, err := exec.LookPath("go")
		if err != nil {
			return Binary{}, fmt.Errorf("build %s: find the go command: %w", function, err)
		}
		goBin = p
	}
	out, err := filepath.Abs(filepath.Join(outDir, BootstrapName))
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", function, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", function, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", Tags(function), "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	cmd.Dir = function
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return Binary{}, fmt.Errorf("build %s for %s/%s: %w\n%s", function, goos, goarch, err, output.Bytes())
	}
	fi, err := os.Stat(out)
	if err != nil {
		return Binary{}, fmt.Errorf("build %s: %w", function, err)
	}
	return Binary{Path: out, Size: fi.Size()}, nil
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
