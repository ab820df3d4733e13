package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/linegate/linegate/internal/scaffold"
)

// develVersion is what go.mod requires when a replace names the checkout:
// any version does, and this one says there is none.
const develVersion = "v0.0.0-00010101000000-000000000000"

func newCommand(fs *flag.FlagSet) action {
	module := fs.String("module", "", "the new project's module path (default: the directory's name)")
	name := fs.String("name", "", "the project's name: its stack in samconfig.toml (default: the directory's name)")
	from := fs.String("linegate", "", "a linegate checkout to require through a replace, or a version to require (default: this binary's source checkout, else its version)")
	tidy := fs.Bool("tidy", true, "run go mod tidy in the new project (it writes go.sum)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) != 1 {
			return usageError{"usage: linegate new [--module PATH] [--name NAME] [--linegate DIR|VERSION] DIR"}
		}
		dir, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		base := filepath.Base(dir)
		if *module == "" {
			*module = base
		}
		if *name == "" {
			*name = stackName(base)
		}
		src, err := linegateSource(*from)
		if err != nil {
			return err
		}
		files, err := scaffold.Write(dir, scaffold.Options{Module: *module, Name: *name, Linegate: src.version, Replace: src.replace})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "linegate new: %d files in %s (module %s)\n", len(files), dir, *module)
		fmt.Fprintf(stdout, "  linegate: %s\n", src.how)
		if *tidy {
			cmd := exec.CommandContext(ctx, goBinary(), "mod", "tidy")
			cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stderr, stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("go mod tidy in %s: %w (the project is written; run it again there once the cause is fixed)", dir, err)
			}
			fmt.Fprintln(stdout, "  go mod tidy: go.sum written")
		}
		fmt.Fprintf(stdout, "next:\n  cd %s\n  make test     # cfn-lint, go vet, the bot's test (internal/app/app_test.go)\n  make local    # linegate local running this bot: the console's address is printed\n", dir)
		return nil
	}
}

// source is where a new project's linegate comes from.
type source struct {
	version string // what go.mod requires
	replace string // the checkout a replace names ("": none)
	how     string // said to the user
}

// linegateSource decides what a new project requires. With from, a
// directory is a checkout to replace linegate with and anything else a
// version. Without, this binary tells: built from a checkout that is still
// on disk (its source files' directory holds linegate's go.mod, outside the
// module cache, whose directories are name@version) it is a replace to that
// checkout, as `go run ./cmd/linegate new` in a checkout does; otherwise it
// is the version the binary was built at (go install …@v1.2.3).
func linegateSource(from string) (source, error) {
	if from != "" {
		if info, err := os.Stat(from); err == nil && info.IsDir() {
			root, err := filepath.Abs(from)
			if err != nil {
				return source{}, err
			}
			if !isCheckout(root) {
				return source{}, fmt.Errorf("--linegate %s: no go.mod of %s there", from, scaffold.Module)
			}
			return source{develVersion, root, "replaced by the checkout " + root + " (--linegate)"}, nil
		}
		if !semver.MatchString(from) {
			return source{}, usageError{fmt.Sprintf("--linegate %q is neither a directory nor a version (v1.2.3)", from)}
		}
		return source{from, "", scaffold.Module + " " + from + " (--linegate)"}, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // cmd/linegate/new.go
		if filepath.IsAbs(root) && isCheckout(root) && !strings.Contains(filepath.Base(root), "@") {
			return source{develVersion, root, "replaced by the checkout this linegate was built from, " + root}, nil
		}
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Path == scaffold.Module && semver.MatchString(info.Main.Version) && !strings.Contains(info.Main.Version, "+") {
		return source{info.Main.Version, "", scaffold.Module + " " + info.Main.Version + ", the version of this linegate"}, nil
	}
	return source{}, errors.New("this linegate was built from source that is not on disk any more and has no version: pass --linegate with a checkout or a version")
}

// stackName makes a directory's name a stack name: letters, digits and
// -, beginning with a letter.
func stackName(base string) string {
	n := regexp.MustCompile(`[^A-Za-z0-9-]+`).ReplaceAllString(base, "-")
	if n == "" || !(n[0] >= 'a' && n[0] <= 'z' || n[0] >= 'A' && n[0] <= 'Z') {
		n = "bot-" + n
	}
	return strings.TrimRight(n[:min(len(n), 128)], "-")
}

// semver is a module version as go.mod takes it.
var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// isCheckout reports whether dir holds linegate's go.mod.
func isCheckout(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+scaffold.Module+"\n"))
}

// goBinary is the go command: $GO, else go.
func goBinary() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
