package scaffold

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repo is this repository's root.
const repo = "../.."

// This repository is the reference app of the project `linegate new`
// writes: a project written for linegate's own module path and name has
// exactly the repository's template.yaml, samconfig.toml, Makefile,
// function mains and events/ (expected.json less the example bot's own
// samples).
func TestProjectIsTheReferenceApp(t *testing.T) {
	files, err := Options{Module: Module, Name: "linegate", Linegate: "v0.0.0"}.Files()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, rel := range Shared {
		want[rel] = read(t, rel)
	}
	entries, err := os.ReadDir(filepath.Join(repo, "events"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if Sample(e.Name()) {
			want["events/"+e.Name()] = read(t, "events/"+e.Name())
		}
	}
	exp, err := Expected(read(t, "events/expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	want["events/expected.json"] = exp
	for rel, w := range want {
		got, ok := files[rel]
		if !ok {
			t.Errorf("the project has no %s: run `make scaffold`", rel)
			continue
		}
		if !bytes.Equal(got, w) {
			t.Errorf("the project's %s differs from the repository's: run `make scaffold` (go generate ./internal/scaffold)", rel)
		}
	}
	for rel := range files {
		if strings.HasPrefix(rel, "events/") && want[rel] == nil {
			t.Errorf("the project's %s is not the repository's: run `make scaffold`", rel)
		}
	}
	if len(want) < len(Shared)+5 {
		t.Fatalf("compared %d files: the samples were not found", len(want))
	}
}

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A project's go.mod asks for the Go linegate's asks for.
func TestGoVersionIsLinegates(t *testing.T) {
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(read(t, "go.mod"))
	if m == nil || string(m[1]) != GoVersion {
		t.Fatalf("go.mod's go directive %q, GoVersion %q", m, GoVersion)
	}
}

// Write makes the project in an empty directory: the module path in the
// mains' imports, the name in samconfig.toml and the README, linegate
// required (and replaced) in go.mod with its CLI as the module's tool.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mybot")
	names, err := Write(dir, Options{Module: "example.com/mybot", Name: "mybot", Linegate: "v0.0.0-00010101000000-000000000000", Replace: "/src/linegate"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".gitignore", "Makefile", "README.md", "events/env.json", "events/expected.json", "functions/quota/main.go",
		"functions/webhook/main.go", "functions/worker/main.go", "functions/notifier/main.go", "go.mod", "internal/app/app.go",
		"internal/app/app_test.go", "samconfig.toml", "template.yaml"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s among %q", want, names)
		}
	}
	file := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if w := file("functions/worker/main.go"); !strings.Contains(w, `"example.com/mybot/internal/app"`) || strings.Contains(w, Module+"/internal/") {
		t.Errorf("worker main imports:\n%s", w)
	}
	if s := file("samconfig.toml"); strings.Count(s, `"mybot"`) != 3 || strings.Contains(s, `stack_name = "linegate"`) {
		t.Errorf("samconfig.toml:\n%s", s)
	}
	if r := file("README.md"); !strings.HasPrefix(r, "# mybot\n") {
		t.Errorf("README starts %q", r[:20])
	}
	wantMod := "module example.com/mybot\n\ngo " + GoVersion + "\n\nrequire github.com/linegate/linegate v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/linegate/linegate => /src/linegate\n\ntool github.com/linegate/linegate/cmd/linegate\n"
	if got := file("go.mod"); got != wantMod {
		t.Errorf("go.mod\n%s\nwant\n%s", got, wantMod)
	}
	if _, err := Write(dir, Options{Module: "example.com/other", Name: "other", Linegate: "v1.0.0"}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second Write into the project: %v, want ErrNotEmpty", err)
	}
	if !strings.Contains(file("go.mod"), "example.com/mybot") {
		t.Fatal("the refused Write changed the project")
	}
}

// Bad options are refused with every problem named, and nothing is
// written.
func TestWriteRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want []string
	}{
		{"everything", Options{Module: "my bot", Name: "1bot"}, []string{`module path "my bot"`, `name "1bot"`, "no linegate version"}},
		{"relative replace", Options{Module: "m", Name: "m", Linegate: "v1.0.0", Replace: "../linegate"}, []string{`replace "../linegate"`}},
		{"absolute module", Options{Module: "/tmp/x", Name: "x", Linegate: "v1.0.0"}, []string{`module path "/tmp/x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			_, err := Write(dir, tt.o)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err %v, want %q named", err, w)
				}
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the refused Write made %s", dir)
			}
		})
	}
}

// Expected drops the example bot's own samples and keeps valid JSON.
func TestExpected(t *testing.T) {
	in := "{\n  \"a.json\": {\"x\": 1},\n  \"worker-follow.json\": {\"x\": 2},\n  \"worker-postback.json\": {\"x\": 3}\n}\n"
	got, err := Expected([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a.json\": {\"x\": 1}\n}\n"; string(got) != want {
		t.Fatalf("Expected = %q, want %q", got, want)
	}
}
