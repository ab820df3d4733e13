package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBudget is the front door's length: one screen, the rest in docs/.
const readmeBudget = 200

// pages are the Markdown files whose links and code this test checks,
// relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, filepath.ToSlash(filepath.Join("docs", p)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found %d pages: %v", len(out), out)
	}
	return out
}

func readRoot(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestREADMEIsOneScreen(t *testing.T) {
	readme := readRoot(t, "README.md")
	if n := strings.Count(readme, "\n"); n > readmeBudget {
		t.Fatalf("README.md is %d lines, over its budget of %d: move the detail to docs/", n, readmeBudget)
	}
	for _, page := range []string{"docs/handlers.md", "docs/local.md", "docs/architecture.md", "docs/deploy.md", "docs/operations.md",
		"docs/security.md", "docs/benchmarks.md", "docs/cost.md", "docs/adr/"} {
		if !strings.Contains(readme, "("+page+")") {
			t.Errorf("README's index does not link %s", page)
		}
	}
}

// link is a Markdown link or image target: [text](target).
var link = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// fences are code blocks: their content is not scanned for links.
var fence = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")

// Every link in README.md and docs/ reaches a file of the repository, and
// every #anchor a heading of its page. (Links to the web are not fetched.)
func TestEveryLinkResolves(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		text := fence.ReplaceAllString(readRoot(t, page), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := page
			if file != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
			}
			checked++
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(rel))); err != nil {
				t.Errorf("%s links %s: no such file (%s)", page, target, rel)
				continue
			}
			if anchor != "" && !anchors(readRoot(t, rel))[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", page, target, rel, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links: the pattern finds none", checked)
	}
}

// anchors are the ids GitHub gives a page's headings: lower case, spaces
// as -, punctuation but - and _ dropped, a -N suffix for a repeat.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fence.ReplaceAllString(page, ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("“”‘’—–…→▸", r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[id+"-"+itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// goBlock is a ```go code block.
var goBlock = regexp.MustCompile("(?ms)^[ \t]*```go\n(.*?)^[ \t]*```")

// Every Go sample in README.md and docs/ is compiled: its lines appear, in
// order and together, in a Go file of the repository (an Example test,
// run by go test, or a file a build compiles; the scaffold's project files
// count, which the new-project test builds and tests), whitespace aside.
func TestEveryGoSampleIsCompiled(t *testing.T) {
	var sources [][]string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sources = append(sources, normalize(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, page := range pages(t) {
		for _, m := range goBlock.FindAllStringSubmatch(readRoot(t, page), -1) {
			blocks++
			block := normalize(m[1])
			if !inAny(sources, block) {
				first := ""
				if len(block) > 0 {
					first = block[0]
				}
				t.Errorf("%s: the Go sample starting %q is in no Go file: make it an Example (or copy it from one)", page, first)
			}
		}
	}
	if blocks < 5 {
		t.Fatalf("found %d Go samples: the pattern finds none", blocks)
	}
}

// normalize is s's non-empty lines with their whitespace collapsed.
func normalize(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

func inAny(sources [][]string, block []string) bool {
	for _, src := range sources {
		for i := 0; i+len(block) <= len(src); i++ {
			match := true
			for j := range block {
				if src[i+j] != block[j] {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}
