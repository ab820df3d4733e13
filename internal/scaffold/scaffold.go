// Package scaffold is what `linegate new` writes: a standalone linegate
// project in its own module, of the same shape as this repository (the
// reference app): template.yaml, samconfig.toml, the Makefile with SAM's
// build-<LogicalId> targets, the four one-line function mains, events/ with
// env.json and expected.json, a bot package (internal/app) with one handler
// and its bottest test, a short README and go.mod.
//
// One source of truth: the files the project shares with this repository
// are copies of the repository's own (Shared), refreshed by `go generate`
// (make scaffold) and checked by this package's tests to be equal to them
// modulo the module path; only the bot, the README, .gitignore and go.mod
// are the scaffold's own.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

//go:generate go run ./gen

// project is the project's files: _project/<path>, ".gitignore" stored as
// "gitignore". The directory's leading underscore keeps the go tool from
// building its Go files as packages of this module.
//
//go:embed all:_project
var project embed.FS

// Module is linegate's module path.
const Module = "github.com/linegate/linegate"

// GoVersion is the go directive of a new project's go.mod: linegate's own
// (a test keeps them equal).
const GoVersion = "1.26.8"

// Shared lists the files a project has exactly as this repository has
// them, but for the module path in Go imports and the stack's name in
// samconfig.toml. events/expected.json is derived: the repository's
// entries for the samples a project gets (Samples).
var Shared = []string{
	"template.yaml",
	"samconfig.toml",
	"Makefile",
	"functions/webhook/main.go",
	"functions/worker/main.go",
	"functions/notifier/main.go",
	"functions/quota/main.go",
}

// exampleOnly are this repository's samples that only its example bot
// answers as expected.json says (the project's bot has no follow or
// postback handler).
var exampleOnly = []string{"worker-follow.json", "worker-postback.json"}

// Sample reports whether a file of the repository's events/ is in a
// project's: every sample and env.json but the example bot's own.
func Sample(name string) bool {
	return strings.HasSuffix(name, ".json") && name != "expected.json" && !slices.Contains(exampleOnly, name)
}

// Expected is expected.json for a project: the repository's, less the
// entries of samples a project does not get. It keeps the repository's
// layout: one entry a line.
func Expected(repo []byte) ([]byte, error) {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(repo), "\n") {
		if m := expectedKey.FindStringSubmatch(line); m != nil && !Sample(m[1]) {
			continue
		}
		out.WriteString(line)
	}
	b := out.Bytes()
	// The last entry kept may now end with a comma.
	b = regexp.MustCompile(`,(\s*\n\})`).ReplaceAll(b, []byte("$1"))
	return b, nil
}

// expectedKey is an entry line of expected.json: "name.json": {...}.
var expectedKey = regexp.MustCompile(`^\s*"([^"]+)":`)

// Options say what project to write.
type Options struct {
	// Module is the project's module path (example.com/mybot).
	Module string
	// Name is the project's name: its CloudFormation stack and S3 prefix
	// (samconfig.toml) and its README's title.
	Name string
	// Linegate is the linegate version go.mod requires.
	Linegate string
	// Replace, when set, is a linegate checkout go.mod replaces linegate
	// with (an absolute directory).
	Replace string
}

// ErrNotEmpty is returned by Write for a directory that has files.
var ErrNotEmpty = errors.New("scaffold: the directory is not empty")

// validName is a stack name CloudFormation accepts.
var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)

// Write writes the project into dir (created; it must be missing or
// empty) and returns the files it wrote, relative to dir, sorted. Nothing
// is written when o is invalid.
func Write(dir string, o Options) ([]string, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	files, err := o.Files()
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("scaffold: %w", err)
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return nil, fmt.Errorf("scaffold: %w", err)
		}
	}
	return names, nil
}

func (o Options) check() error {
	var problems []string
	if o.Module == "" || strings.ContainsAny(o.Module, " \t\n\"`\\") || strings.HasPrefix(o.Module, "/") {
		problems = append(problems, fmt.Sprintf("module path %q is not a module path (example.com/mybot)", o.Module))
	}
	if !validName.MatchString(o.Name) {
		problems = append(problems, fmt.Sprintf("name %q is not a stack name (a letter, then letters, digits and -)", o.Name))
	}
	if o.Linegate == "" {
		problems = append(problems, "no linegate version to require")
	}
	if o.Replace != "" && !filepath.IsAbs(o.Replace) {
		problems = append(problems, fmt.Sprintf("replace %q is not an absolute directory", o.Replace))
	}
	if len(problems) > 0 {
		return errors.New("scaffold: " + strings.Join(problems, "; "))
	}
	return nil
}

// Files is the project's files by path (slash-separated, relative to its
// root), as Write writes them.
func (o Options) Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(project, "_project", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := project.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "_project/")
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		out[rel] = o.rewrite(rel, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	out["go.mod"] = o.goMod()
	return out, nil
}

// rewrite adapts a file to the project: its module path in Go imports of
// the bot, its name in samconfig.toml and the README.
func (o Options) rewrite(rel string, b []byte) []byte {
	switch {
	case path.Ext(rel) == ".go":
		return bytes.ReplaceAll(b, []byte(`"`+Module+`/internal/`), []byte(`"`+o.Module+`/internal/`))
	case rel == "samconfig.toml":
		return regexp.MustCompile(`(?m)^(stack_name|s3_prefix) = "linegate"$`).ReplaceAll(b, []byte(`$1 = "`+o.Name+`"`))
	case rel == "README.md":
		return bytes.ReplaceAll(b, []byte("{{name}}"), []byte(o.Name))
	}
	return b
}

// goMod is the project's go.mod before `go mod tidy`: linegate required
// (replaced by a checkout when o says so) and its CLI as the module's tool,
// so `go tool linegate` is the version go.mod requires.
func (o Options) goMod() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire %s %s\n", o.Module, GoVersion, Module, o.Linegate)
	if o.Replace != "" {
		fmt.Fprintf(&b, "\nreplace %s => %s\n", Module, o.Replace)
	}
	fmt.Fprintf(&b, "\ntool %s/cmd/linegate\n", Module)
	return []byte(b.String())
}
