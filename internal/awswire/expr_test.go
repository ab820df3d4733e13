package awswire

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustItem(t testing.TB, s string) item {
	t.Helper()
	var it item
	if err := json.Unmarshal([]byte(s), &it); err != nil {
		t.Fatal(err)
	}
	return it
}

// testEnv is a request's expression names (#id, #st, #exp) and values, the
// values in DynamoDB JSON.
func testEnv(t testing.TB, values string) *exprEnv {
	t.Helper()
	var v map[string]av
	if err := json.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	return &exprEnv{names: map[string]string{"#id": "id", "#st": "status", "#exp": "expiresAt"}, values: v, used: map[string]bool{}}
}

// failsAsWanted reports whether the case wants an error (want is not ""),
// failing t unless err mentions want.
func failsAsWanted(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
		t.Fatalf("err = %v, want one mentioning %q", err, want)
	}
	return want != ""
}

// TestConditions pins DynamoDB's documented semantics of the condition
// expressions on one item.
func TestConditions(t *testing.T) {
	it := `{"id":{"S":"ev1"},"status":{"S":"in-progress"},"expiresAt":{"N":"100"},"tags":{"SS":["a","b"]},"ok":{"BOOL":true}}`
	values := `{":now":{"N":"99"},":later":{"N":"101"},":ip":{"S":"in-progress"},":done":{"S":"completed"},":in":{"S":"in"},":a":{"S":"a"},":two":{"N":"2"},":s":{"S":"S"}}`
	for _, tc := range []struct {
		expr string
		want bool
		err  string
	}{
		{expr: "attribute_exists(id)", want: true},
		{expr: "attribute_not_exists(#id) OR #exp < :now", want: false},
		{expr: "attribute_not_exists(missing)", want: true},
		{expr: "#exp < :later AND #st = :ip", want: true},
		{expr: "#st <> :ip", want: false},
		{expr: "#st <> :done", want: true},
		{expr: "NOT #st = :done", want: true},
		{expr: "(#st = :done OR #st = :ip) AND #exp >= :now", want: true},
		{expr: "#exp BETWEEN :now AND :later", want: true},
		{expr: "#exp > :later", want: false},
		{expr: "#exp <= :later", want: true},
		{expr: "#st IN (:done, :ip)", want: true},
		{expr: "begins_with(#st, :in)", want: true},
		{expr: "contains(tags, :a)", want: true},
		{expr: "size(tags) = :two", want: true},
		{expr: "attribute_type(#st, :s)", want: true},
		{expr: "missing = :ip", want: false},
		{expr: "missing <> :ip", want: false},
		{expr: "#st < :now", want: false}, // different types never compare
		{expr: "#nope = :ip", err: "attribute name"},
		{expr: "#st = :nope", err: "attribute value"},
		{expr: "#st = ", err: "Syntax error"},
		{expr: "a.b = :ip", err: "nested"},
		{expr: "#st = :ip)", err: "Syntax error"},
		{expr: "#st ~ :ip", err: "unexpected character"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := evalCondition(tc.expr, testEnv(t, values), mustItem(t, it))
			if failsAsWanted(t, err, tc.err) {
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestUpdates pins SET (values, arithmetic, if_not_exists) and REMOVE, and
// the expressions DynamoDB refuses.
func TestUpdates(t *testing.T) {
	for _, tc := range []struct {
		expr, want, err string
	}{
		{expr: "SET #st = :done, #exp = :exp", want: `{"expiresAt":{"N":"500"},"id":{"S":"ev1"},"n":{"N":"1"},"status":{"S":"completed"}}`},
		{expr: "SET n = n + :one", want: `{"expiresAt":{"N":"100"},"id":{"S":"ev1"},"n":{"N":"2"},"status":{"S":"in-progress"}}`},
		{expr: "SET m = if_not_exists(m, :one) REMOVE #st", want: `{"expiresAt":{"N":"100"},"id":{"S":"ev1"},"m":{"N":"1"},"n":{"N":"1"}}`},
		{expr: "REMOVE n, #st", want: `{"expiresAt":{"N":"100"},"id":{"S":"ev1"}}`},
		{expr: "ADD n :one", err: "not supported"},
		{expr: "SET #st = :done SET n = :one", err: "only be used once"},
		{expr: "SET x = missing", err: "does not exist"},
		{expr: "SET #st = #st + :one", err: "incorrect data type"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			it := mustItem(t, `{"id":{"S":"ev1"},"status":{"S":"in-progress"},"expiresAt":{"N":"100"},"n":{"N":"1"}}`)
			err := applyUpdate(tc.expr, testEnv(t, `{":done":{"S":"completed"},":exp":{"N":"500"},":one":{"N":"1"}}`), it)
			if failsAsWanted(t, err, tc.err) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(it)
			if string(canonical(got)) != tc.want {
				t.Fatalf("item = %s\nwant    %s", canonical(got), tc.want)
			}
		})
	}
}

// FuzzExpressions feeds arbitrary condition and update expressions: they
// must be answered (true, false or an error), never panic.
func FuzzExpressions(f *testing.F) {
	for _, s := range []string{
		"attribute_not_exists(#id) OR #exp < :now", "attribute_exists(#id) AND #st = :inprogress", "#st = :inprogress",
		"SET #st = :done, #exp = :exp", "REMOVE #st", "size(#st) BETWEEN :now AND :now", "#st IN (:now, :done)", "((((", "SET a = a - :now",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		env := testEnv(t, `{":now":{"N":"5"},":done":{"S":"x"},":inprogress":{"S":"y"},":exp":{"N":"7"}}`)
		it := item{"id": av{"S": json.RawMessage(`"k"`)}, "status": av{"S": json.RawMessage(`"y"`)}, "expiresAt": av{"N": json.RawMessage(`"3"`)}}
		_, _ = evalCondition(expr, env, it)
		_ = applyUpdate(expr, env, it)
	})
}
