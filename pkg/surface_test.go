// Package pkg_test keeps the public API small and documented: what bot
// authors import (pkg/bot, pkg/bot/bottest, the entries under pkg/run) is
// every package under pkg/, and all of it is a compatibility promise.
package pkg_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxExported is the budget of top-level exported identifiers (types,
// functions, variables, constants; methods and fields aside) across every
// package under pkg/.
const maxExported = 60

// exported lists the top-level exported identifiers of the non-test Go
// files under root, as "dir.Name", and those without a doc comment.
func exported(t *testing.T, root string) (all, undocumented []string) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		add := func(name string, doc ...*ast.CommentGroup) {
			if !ast.IsExported(name) {
				return
			}
			id := filepath.ToSlash(dir) + "." + name
			all = append(all, id)
			for _, c := range doc {
				if c != nil && strings.TrimSpace(c.Text()) != "" {
					return
				}
			}
			undocumented = append(undocumented, id)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(d.Name.Name, d.Doc)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name, s.Doc, d.Doc)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name, s.Doc, s.Comment, d.Doc)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	return all, undocumented
}

func TestPublicSurfaceIsSmallAndDocumented(t *testing.T) {
	all, undocumented := exported(t, ".")
	t.Logf("%d top-level exported identifiers under pkg/ (budget %d): %s", len(all), maxExported, strings.Join(all, " "))
	if len(all) > maxExported {
		t.Errorf("%d top-level exported identifiers under pkg/, over the budget of %d: move what bot authors do not need behind internal/", len(all), maxExported)
	}
	for _, id := range undocumented {
		t.Errorf("%s has no doc comment", id)
	}
	for _, want := range []string{"bot.NewRouter", "bot.Once", "bot.Queue", "bot/bottest.New", "run/worker.Start"} {
		if !slices.Contains(all, want) {
			t.Fatalf("%s not found among %d identifiers: the count above does not see the packages", want, len(all))
		}
	}
}

// The check itself can fail: an exported name without a comment is found.
func TestSurfaceCheckFindsUndocumentedNames(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\n// Documented is.\nfunc Documented() {}\n\nfunc Bare() {}\n\nvar (\n\t// A is.\n\tA = 1\n\tB = 2\n)\n\ntype t struct{}\n\n// M is a method.\nfunc (t) M() {}\n"
	if err := writeFile(filepath.Join(dir, "p.go"), src); err != nil {
		t.Fatal(err)
	}
	all, undocumented := exported(t, dir)
	if !slices.Equal(all, []string{"..A", "..B", "..Bare", "..Documented"}) || !slices.Equal(undocumented, []string{"..Bare", "..B"}) {
		t.Fatalf("all %q, undocumented %q", all, undocumented)
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }
