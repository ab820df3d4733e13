// Package docs_test keeps the README's map of the tree true: every package
// under pkg/ and internal/ is named in the package tables of "Two worlds in
// the tree", in the table of its own world, and no table names a package
// that is gone.
package docs_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
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
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
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

func TestREADMEPackageTablesMatchTheTree(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	all := append(packages(t, "..", "pkg"), packages(t, "..", "internal")...)
	pathRE := regexp.MustCompile("`((?:pkg|internal)/[a-z0-9/]+)`")
	for _, world := range []string{"pkg", "internal"} {
		rows := tableRows(string(readme), world)
		if len(rows) == 0 {
			t.Fatalf("README has no package table rows for %s/", world)
		}
		for _, p := range packages(t, "..", world) {
			if !slices.ContainsFunc(rows, func(r string) bool { return named(r, p) }) {
				t.Errorf("README's %s/ table does not name %s", world, p)
			}
		}
		for _, r := range rows {
			for _, m := range pathRE.FindAllStringSubmatch(r, -1) {
				if !slices.Contains(all, m[1]) {
					t.Errorf("README's table names %s, which is not a package in the tree", m[1])
				}
			}
		}
	}
}

func TestNamedMatchesBothForms(t *testing.T) {
	tests := []struct {
		row, pkg string
		want     bool
	}{
		{"| `pkg/ingress`", "pkg/ingress", true},
		{"| `pkg/compose` (+ `webhookfn`, `workerfn`)", "pkg/compose/workerfn", true},
		{"| `internal/cloud/mem` (+ `mem/queue`)", "internal/cloud/mem/queue", true},
		{"| `pkg/compose` (+ `webhookfn`)", "pkg/compose/quotafn", false},
		{"| `pkg/bot`", "pkg/batch", false},
		{"| `pkg/eventbus`, `pkg/chatqueue`", "pkg/chat", false},
		{"| `pkg/idempotency` (+ `idempotencytest`)", "pkg/held/idempotencytest", false},
	}
	for _, tt := range tests {
		if got := named(tt.row, tt.pkg); got != tt.want {
			t.Errorf("named(%q, %q) = %v, want %v", tt.row, tt.pkg, got, tt.want)
		}
	}
}
