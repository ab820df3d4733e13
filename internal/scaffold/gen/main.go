// Command gen refreshes internal/scaffold's copies of the files a linegate
// project shares with this repository (scaffold.Shared, events/): `go
// generate ./internal/scaffold`, or `make scaffold`. It runs in
// internal/scaffold and reads the repository two levels up.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/linegate/linegate/internal/scaffold"
)

func main() {
	if err := run(filepath.Join("..", ".."), "_project"); err != nil {
		fmt.Fprintln(os.Stderr, "scaffold gen:", err)
		os.Exit(1)
	}
}

// run copies repo's shared files and samples into dst, replacing what was
// there.
func run(repo, dst string) error {
	if err := os.RemoveAll(filepath.Join(dst, "events")); err != nil {
		return err
	}
	copyFile := func(rel string, transform func([]byte) ([]byte, error)) error {
		b, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		if transform != nil {
			if b, err = transform(b); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		out := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	}
	for _, rel := range scaffold.Shared {
		if err := copyFile(rel, nil); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(filepath.Join(repo, "events"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if scaffold.Sample(e.Name()) {
			if err := copyFile("events/"+e.Name(), nil); err != nil {
				return err
			}
		}
	}
	return copyFile("events/expected.json", scaffold.Expected)
}
