package functions_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The files the metric names must agree with, relative to this directory.
const (
	pkgDir       = "../internal"
	metricsDoc   = "../docs/metrics.md"
	templateFile = "../template.yaml"
)

// metric is one name the Lambda world records through a telemetry.Recorder.
type metric struct {
	name  string
	unit  string          // "Count" (Count calls) or "Milliseconds" (Duration calls)
	pkgs  map[string]bool // import paths of the packages that record it
	where []string        // file:line of every call, for messages
	fns   []string        // the functions whose binary links one of pkgs
}

// pascalCase is CloudWatch's usual metric naming: words with a capital
// initial, no separators.
var pascalCase = regexp.MustCompile(`^(?:[A-Z][a-z0-9]+)+$`)

// Every metric a function can emit is documented in docs/metrics.md with its
// unit and functions, and charted on the template's dashboard with the
// Function dimension of each function that emits it; neither lists a metric
// no code records. Names are found by parsing the packages the functions link, so a new Count or
// Duration call fails here until it is documented and charted.
func TestMetricsAreDocumentedAndCharted(t *testing.T) {
	metrics := emittedMetrics(t)
	for _, m := range metrics {
		for fn := range denied {
			for _, d := range deps(t, fn) {
				if m.pkgs[d] && !slices.Contains(m.fns, fn) {
					m.fns = append(m.fns, fn)
				}
			}
		}
		sort.Strings(m.fns)
		if len(m.fns) == 0 {
			t.Errorf("%s (recorded at %v) is recorded by a package no function links", m.name, m.where)
		}
	}
	t.Run("names", func(t *testing.T) { checkNames(t, metrics) })
	t.Run("docs", func(t *testing.T) { checkDocs(t, metrics, docRows(t)) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, metrics, dashboardLines(t)) })
}

// The parser must see what the code records; otherwise every check above
// would pass on an empty list.
func TestMetricParserFindsKnownCalls(t *testing.T) {
	metrics := emittedMetrics(t)
	for name, unit := range map[string]string{
		"SignaturesRejected": "Count",        // ingress, a constant
		"RecordsFailed":      "Count",        // worker, a string literal
		"LinePushesSent":     "Count",        // lineapi, a constant used from another file
		"AlertPushLatency":   "Milliseconds", // alert
	} {
		if m, ok := metrics[name]; !ok || m.unit != unit {
			t.Errorf("parser found %s = %+v, want unit %s; found %d metrics", name, m, unit, len(metrics))
		}
	}
}

func checkNames(t *testing.T, metrics map[string]*metric) {
	for _, m := range metrics {
		if !pascalCase.MatchString(m.name) {
			t.Errorf("%s (at %v) is not PascalCase", m.name, m.where)
		}
		timed := strings.HasSuffix(m.name, "Latency") || strings.HasSuffix(m.name, "Duration")
		if timed != (m.unit == "Milliseconds") {
			t.Errorf("%s (at %v) has unit %s: durations end in Latency or Duration, counts do not", m.name, m.where, m.unit)
		}
	}
}

// docRow is one row of the table in docs/metrics.md.
type docRow struct {
	unit, meaning string
	fns           []string
}

func checkDocs(t *testing.T, metrics map[string]*metric, rows map[string]docRow) {
	for name, m := range metrics {
		r, ok := rows[name]
		if !ok {
			t.Errorf("%s (recorded at %v) is not in %s", name, m.where, metricsDoc)
			continue
		}
		if r.unit != m.unit {
			t.Errorf("%s: %s says unit %q, the code records %q", name, metricsDoc, r.unit, m.unit)
		}
		if !slices.Equal(r.fns, m.fns) {
			t.Errorf("%s: %s says functions %v, the functions linking its recorder are %v", name, metricsDoc, r.fns, m.fns)
		}
		if r.meaning == "" {
			t.Errorf("%s: %s gives no meaning", name, metricsDoc)
		}
	}
	for name := range rows {
		if _, ok := metrics[name]; !ok {
			t.Errorf("%s documents %s, which no code records", metricsDoc, name)
		}
	}
}

// docRows parses the rows of docs/metrics.md's table that name a metric:
// | `Name` | Unit | fn, fn | meaning |.
func docRows(t *testing.T) map[string]docRow {
	t.Helper()
	b, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatalf("read %s: %v", metricsDoc, err)
	}
	rows := map[string]docRow{}
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 {
			t.Errorf("%s:%d: want 4 cells (name, unit, functions, meaning), got %d: %s", metricsDoc, i+1, len(cells), line)
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if _, dup := rows[name]; dup {
			t.Errorf("%s:%d: %s documented twice", metricsDoc, i+1, name)
		}
		var fns []string
		for f := range strings.SplitSeq(cells[2], ",") {
			fns = append(fns, strings.Trim(strings.TrimSpace(f), "`"))
		}
		sort.Strings(fns)
		rows[name] = docRow{unit: strings.TrimSpace(cells[1]), fns: fns, meaning: strings.TrimSpace(cells[3])}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no metric rows (| `Name` | Unit | functions | meaning |)", metricsDoc)
	}
	return rows
}

// dashLine is one metric the dashboard charts in the functions' namespace.
type dashLine struct {
	name, function, stat, widget string // function "" for a SEARCH across functions
}

func checkDashboard(t *testing.T, metrics map[string]*metric, lines []dashLine) {
	for _, l := range lines {
		m, ok := metrics[l.name]
		if !ok {
			t.Errorf("dashboard widget %q charts %s, which no code records", l.widget, l.name)
			continue
		}
		if l.function != "" && !slices.Contains(m.fns, l.function) {
			t.Errorf("dashboard widget %q charts %s for function %s, which does not emit it (%v do)", l.widget, l.name, l.function, m.fns)
		}
		switch {
		case m.unit == "Count" && l.stat != "Sum":
			t.Errorf("dashboard widget %q charts the count %s with stat %q, want Sum", l.widget, l.name, l.stat)
		case m.unit == "Milliseconds" && !regexp.MustCompile(`^(p\d+(\.\d+)?|Average|Maximum)$`).MatchString(l.stat):
			t.Errorf("dashboard widget %q charts the duration %s with stat %q, want a percentile, Average or Maximum", l.widget, l.name, l.stat)
		}
	}
	for name, m := range metrics {
		for _, fn := range m.fns {
			charted := slices.ContainsFunc(lines, func(l dashLine) bool {
				return l.name == name && (l.function == fn || l.function == "")
			})
			if !charted {
				t.Errorf("the dashboard does not chart %s of the %s function", name, fn)
			}
		}
	}
}

// dashboardLines reads the template's CloudWatch dashboard and returns every
// metric it charts in the namespace the functions write to
// (METRICS_NAMESPACE). Function logical ids in the body (${WorkerFunction})
// stand for the function directory names (worker).
func dashboardLines(t *testing.T) []dashLine {
	t.Helper()
	b, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatalf("read %s: %v", templateFile, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", templateFile, err)
	}
	root := doc.Content[0]
	ns := get(get(get(get(get(root, "Globals"), "Function"), "Environment"), "Variables"), "METRICS_NAMESPACE")
	if ns == nil || ns.Value == "" {
		t.Fatalf("%s: no Globals.Function.Environment.Variables.METRICS_NAMESPACE", templateFile)
	}
	var body *yaml.Node
	resources := get(root, "Resources")
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		if typ := get(resources.Content[i+1], "Type"); typ != nil && typ.Value == "AWS::CloudWatch::Dashboard" {
			body = get(get(resources.Content[i+1], "Properties"), "DashboardBody")
		}
	}
	if body == nil {
		t.Fatalf("%s: no AWS::CloudWatch::Dashboard with a DashboardBody", templateFile)
	}
	text, vars := body.Value, map[string]string{}
	if body.Kind == yaml.SequenceNode && len(body.Content) == 2 { // !Sub [template, {vars}]
		text = body.Content[0].Value
		for i := 0; i+1 < len(body.Content[1].Content); i += 2 {
			vars[body.Content[1].Content[i].Value] = body.Content[1].Content[i+1].Value
		}
	}
	text = regexp.MustCompile(`\$\{([^}!]+)\}`).ReplaceAllStringFunc(text, func(ref string) string {
		id := ref[2 : len(ref)-1]
		if v, ok := vars[id]; ok {
			return v
		}
		if fn := strings.ToLower(strings.TrimSuffix(id, "Function")); strings.HasSuffix(id, "Function") {
			if _, ok := denied[fn]; ok {
				return fn
			}
		}
		return "x"
	})
	var dash struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Stat    string  `json:"stat"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(text), &dash); err != nil {
		t.Fatalf("%s: the dashboard body is not JSON after substitution: %v\n%s", templateFile, err, text)
	}
	search := regexp.MustCompile(`SEARCH\('\{([^,}]+)[^}]*\}\s*MetricName="([^"]+)"',\s*'([^']+)'`)
	var out []dashLine
	for _, w := range dash.Widgets {
		p := w.Properties
		for _, row := range p.Metrics {
			l := dashLine{stat: p.Stat, widget: p.Title}
			var rowNS string
			if len(row) > 0 {
				if opts, ok := row[len(row)-1].(map[string]any); ok {
					if s, ok := opts["stat"].(string); ok {
						l.stat = s
					}
					if expr, ok := opts["expression"].(string); ok {
						m := search.FindStringSubmatch(expr)
						if m == nil {
							t.Errorf("dashboard widget %q: expression %q is not a SEARCH by MetricName this test understands", p.Title, expr)
							continue
						}
						rowNS, l.name, l.stat = m[1], m[2], m[3]
					}
				}
			}
			if l.name == "" {
				if len(row) < 2 {
					t.Errorf("dashboard widget %q: metric row %v has no namespace and name", p.Title, row)
					continue
				}
				rowNS, _ = row[0].(string)
				l.name, _ = row[1].(string)
				if rowNS == "." || l.name == "." {
					t.Errorf("dashboard widget %q: row %v uses the \".\" shorthand; spell metrics out", p.Title, row)
					continue
				}
				for i := 2; i+1 < len(row); i += 2 {
					if k, _ := row[i].(string); k == "Function" {
						l.function, _ = row[i+1].(string)
					}
				}
				if l.function == "" && rowNS == ns.Value {
					t.Errorf("dashboard widget %q: %s has no Function dimension (the functions write [Function] only)", p.Title, l.name)
				}
			}
			if rowNS == ns.Value {
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("the dashboard charts nothing in namespace %s", ns.Value)
	}
	return out
}

// get returns the value of key in mapping node n (nil when absent).
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// emittedMetrics parses every non-test Go file under pkg/ and returns the
// names passed to Count(name, n) and Duration(name, d) calls on values (not
// on imported packages such as strings.Count). A name must be a string
// literal or a string constant of its own or another module package; a
// function that forwards its own name parameter (a Recorder wrapper) records
// nothing by itself. Anything else fails the test, since it could not be
// checked.
func emittedMetrics(t *testing.T) map[string]*metric {
	t.Helper()
	// internal/ holds the laptop world too (the local cloud records AWS's
	// own metric names): only packages a function links are the Lambda
	// world's.
	linked := map[string]bool{}
	for fn := range denied {
		for _, d := range deps(t, fn) {
			linked[d] = true
		}
	}
	fset := token.NewFileSet()
	files := map[string][]*ast.File{} // import path -> files
	err := filepath.WalkDir(pkgDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel("..", filepath.Dir(p))
		if err != nil {
			return err
		}
		ip := module + filepath.ToSlash(rel)
		if !linked[ip] {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[ip] = append(files[ip], f)
		return nil
	})
	if err != nil {
		t.Fatalf("parse %s: %v", pkgDir, err)
	}

	consts := map[string]map[string]string{} // import path -> const name -> string value
	for ip, pkgFiles := range files {
		consts[ip] = map[string]string{}
		for _, f := range pkgFiles {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[ip][id.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}

	out := map[string]*metric{}
	for ip, pkgFiles := range files {
		for _, f := range pkgFiles {
			imports := map[string]string{} // local name -> import path
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				name := path.Base(p)
				if im.Name != nil {
					name = im.Name.Name
				} else if strings.HasPrefix(name, "v") && strings.Count(p, "/") > 0 {
					if _, err := strconv.Atoi(name[1:]); err == nil { // .../v8
						name = path.Base(path.Dir(p))
					}
				}
				imports[name] = p
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				params := map[string]bool{}
				for _, fl := range fd.Type.Params.List {
					for _, n := range fl.Names {
						params[n.Name] = true
					}
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || len(call.Args) != 2 {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "Count" && sel.Sel.Name != "Duration") {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
						return true // a package function: strings.Count
					}
					pos := fset.Position(call.Pos())
					where := fmt.Sprintf("%s:%d", strings.TrimPrefix(filepath.ToSlash(pos.Filename), "../"), pos.Line)
					var name string
					var resolved bool
					switch a := call.Args[0].(type) {
					case *ast.BasicLit:
						if a.Kind == token.STRING {
							name, _ = strconv.Unquote(a.Value)
							resolved = true
						}
					case *ast.Ident:
						if params[a.Name] {
							return true // a wrapper forwarding its caller's name
						}
						name, resolved = consts[ip][a.Name]
					case *ast.SelectorExpr:
						if x, ok := a.X.(*ast.Ident); ok {
							name, resolved = consts[imports[x.Name]][a.Sel.Name]
						}
					}
					if !resolved || name == "" {
						t.Errorf("%s: the metric name of this %s call is not a string literal or constant, so it cannot be checked against %s", where, sel.Sel.Name, metricsDoc)
						return true
					}
					unit := "Count"
					if sel.Sel.Name == "Duration" {
						unit = "Milliseconds"
					}
					m := out[name]
					if m == nil {
						m = &metric{name: name, unit: unit, pkgs: map[string]bool{}}
						out[name] = m
					}
					if m.unit != unit {
						t.Errorf("%s: %s is recorded both as a count and as a duration (%v)", where, name, m.where)
					}
					m.pkgs[ip] = true
					m.where = append(m.where, where)
					return true
				})
			}
		}
	}
	return out
}
