// Package docs_test keeps docs/architecture.md's map of the tree true: every
// package under pkg/ and internal/ is named in the package tables of "Two
// worlds in the tree", and no table names a package that is gone.
package docs_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// packages lists the directories under root/world holding a Go package
// (a .go file that is not a test), as slash paths from root.
func packages(t *testing.T, root, world string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, world), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir // not packages: the go tool skips _dirs (the scaffold's project)
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !slices.Contains(out, rel) {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tableRows returns the rows of the README's package table whose first
// cell names packages of world ("pkg" or "internal").
func tableRows(readme, world string) []string {
	var rows []string
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| `"+world+"/") {
			rows = append(rows, strings.SplitN(line, " | ", 2)[0])
		}
	}
	return rows
}

// named reports whether a row's first cell names pkg: by its path, or, in
// the "(+ `sub`)" form, by its last one or two elements in a row that names
// its parent.
func named(row, pkg string) bool {
	if strings.Contains(row, "`"+pkg+"`") {
		return true
	}
	parent, base := path.Dir(pkg), path.Base(pkg)
	if !strings.Contains(row, "`"+parent+"`") {
		return false
	}
	return strings.Contains(row, "`"+base+"`") || strings.Contains(row, "`"+path.Base(parent)+"/"+base+"`")
}

func TestPackageTablesMatchTheTree(t *testing.T) {
	readme, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	all := append(packages(t, "..", "pkg"), packages(t, "..", "internal")...)
	for _, world := range []string{"pkg", "internal"} {
		rows := tableRows(string(readme), world)
		if len(rows) == 0 {
			t.Fatalf("architecture.md has no package table rows for %s/", world)
		}
		for _, p := range packages(t, "..", world) {
			if !slices.ContainsFunc(rows, func(r string) bool { return named(r, p) }) {
				t.Errorf("architecture.md's tables do not name %s/ package %s", world, p)
			}
		}
		for _, r := range rows {
			for i, quoted := range strings.Split(r, "`") {
				if i%2 == 1 && strings.Contains(quoted, "/") && !strings.Contains(quoted, " ") &&
					(strings.HasPrefix(quoted, "pkg/") || strings.HasPrefix(quoted, "internal/")) && !slices.Contains(all, quoted) {
					t.Errorf("architecture.md's table names %s, which is not a package in the tree", quoted)
				}
			}
		}
	}
}

// named finds a package by its path and in the "(+ `sub`)" form, and only
// there.
func TestNamedMatchesBothForms(t *testing.T) {
	for row, pkgs := range map[string]struct{ named, not []string }{
		"| `internal/ingress`":                             {named: []string{"internal/ingress"}, not: []string{"internal/ingress/sub", "pkg/ing"}},
		"| `internal/compose` (+ `webhookfn`, `workerfn`)": {named: []string{"internal/compose/workerfn", "internal/compose"}, not: []string{"internal/compose/quotafn"}},
		"| `internal/cloud/mem` (+ `mem/queue`)":           {named: []string{"internal/cloud/mem/queue"}, not: []string{"internal/cloud/queue"}},
		"| `pkg/eventbus`, `pkg/chatqueue`":                {not: []string{"pkg/chat", "pkg/batch"}},
		"| `internal/idempotency` (+ `idempotencytest`)":   {named: []string{"internal/idempotency/idempotencytest"}, not: []string{"internal/held/idempotencytest"}},
	} {
		for _, p := range pkgs.named {
			if !named(row, p) {
				t.Errorf("%q does not name %s", row, p)
			}
		}
		for _, p := range pkgs.not {
			if named(row, p) {
				t.Errorf("%q names %s", row, p)
			}
		}
	}
}
