package pattern_test

import (
	"errors"
	"testing"

	"github.com/linegate/linegate/internal/cloud/pattern"
	"github.com/linegate/linegate/internal/cloud/pattern/patterntest"
)

func TestDocumentedExamples(t *testing.T) {
	for _, ex := range patterntest.Examples {
		t.Run(ex.Name, func(t *testing.T) {
			p, err := pattern.Compile([]byte(ex.Pattern))
			if err != nil {
				t.Fatalf("Compile(%s) = %v (%s)", ex.Pattern, err, ex.Doc)
			}
			if got := p.Match([]byte(ex.Event)); got != ex.Want {
				t.Errorf("Match = %v, want %v\npattern: %s\nevent:   %s\ndoc:     %s", got, ex.Want, ex.Pattern, ex.Event, ex.Doc)
			}
		})
	}
}

func TestInvalidPatternsRejected(t *testing.T) {
	for _, in := range patterntest.InvalidPatterns {
		t.Run(in.Name, func(t *testing.T) {
			_, err := pattern.Compile([]byte(in.Pattern))
			if !errors.Is(err, pattern.ErrInvalid) {
				t.Fatalf("Compile(%s) = %v, want an error wrapping ErrInvalid (%s)", in.Pattern, err, in.Doc)
			}
		})
	}
}

// TestEdgeCases covers behaviour beyond the documented table: how values of
// the wrong type, arrays and malformed events are treated.
func TestEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		event   string
		want    bool
	}{
		// An array in the event matches when ANY element passes the filter,
		// so anything-but matches an array holding one other value.
		{"anything_but_array_any_element", `{"resources":[{"anything-but":"a"}]}`, `{"resources":["a","b"]}`, true},
		{"anything_but_array_all_excluded", `{"resources":[{"anything-but":"a"}]}`, `{"resources":["a","a"]}`, false},
		{"anything_but_string_on_number", `{"x":[{"anything-but":"1"}]}`, `{"x":1}`, true},
		{"anything_but_number_list", `{"x":[{"anything-but":[1,2]}]}`, `{"x":2.0}`, false},
		{"empty_array_is_absent", `{"x":[{"exists":false}]}`, `{"x":[]}`, true},
		{"exists_or_value", `{"x":[{"exists":false},"v"]}`, `{"x":"v"}`, true},
		{"number_exact_across_forms", `{"x":[300]}`, `{"x":3.0e2}`, true},
		{"prefix_on_number", `{"x":[{"prefix":"1"}]}`, `{"x":12}`, false},
		{"cidr_ipv6", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"2001:db8::1"}`, true},
		{"cidr_not_an_ip", `{"ip":[{"cidr":"10.0.0.0/8"}]}`, `{"ip":"ten"}`, false},
		{"wildcard_middle", `{"x":[{"wildcard":"a*b*c"}]}`, `{"x":"a-b-b-c"}`, true},
		{"wildcard_overlap", `{"x":[{"wildcard":"ab*ba"}]}`, `{"x":"aba"}`, false},
		{"wildcard_only_star", `{"x":[{"wildcard":"*"}]}`, `{"x":""}`, true},
		{"key_with_dot_is_not_a_path", `{"a.b":["1"]}`, `{"a":{"b":"1"}}`, false},
		{"nested_or", `{"detail":{"$or":[{"a":["1"]},{"$or":[{"b":["2"]},{"c":["3"]}]}]}}`, `{"detail":{"c":"3"}}`, true},
		{"event_not_object", `{"x":["1"]}`, `["1"]`, false},
		{"event_not_json", `{"x":["1"]}`, `{"x":`, false},
		{"event_trailing_data", `{"x":["1"]}`, `{"x":"1"} {}`, false},
		{"huge_number_is_not_numeric", `{"x":[{"numeric":[">",0]}]}`, `{"x":1e999}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := pattern.Compile([]byte(tt.pattern))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := p.Match([]byte(tt.event)); got != tt.want {
				t.Errorf("Match(%s, %s) = %v, want %v", tt.pattern, tt.event, got, tt.want)
			}
		})
	}
}

func TestMoreInvalid(t *testing.T) {
	for _, p := range []string{
		`{"x":[["nested"]]}`,
		`{"x":[{"prefix":"a","suffix":"b"}]}`,
		`{"x":{}}`,
		`{"$or":[{"a":["1"]}]}`,
		`{"$or":{"a":["1"]}}`,
		`{"x":[{"numeric":["=",1,"<",2]}]}`,
		`{"x":[{"numeric":[">",5,"<",1]}]}`,
		`{"x":[{"wildcard":"a\\b"}]}`,
		`{"x":[{"anything-but":{"numeric":[">",1]}}]}`,
		`{"x":[{"anything-but":[]}]}`,
		`{"x":[{"prefix":{"equals-ignore-case":1}}]}`,
		`{"x":["1"]} trailing`,
	} {
		if _, err := pattern.Compile([]byte(p)); !errors.Is(err, pattern.ErrInvalid) {
			t.Errorf("Compile(%s) = %v, want ErrInvalid", p, err)
		}
	}
}

func FuzzCompileMatch(f *testing.F) {
	for _, ex := range patterntest.Examples {
		f.Add([]byte(ex.Pattern), []byte(ex.Event))
	}
	f.Fuzz(func(t *testing.T, pat, event []byte) {
		p, err := pattern.Compile(pat)
		if err != nil {
			if !errors.Is(err, pattern.ErrInvalid) {
				t.Fatalf("Compile error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// Matching is a pure function of its input.
		if first, second := p.Match(event), p.Match(event); first != second {
			t.Fatal("Match is not deterministic")
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	p, err := pattern.Compile([]byte(`{"source":["line.webhook"],"detail-type":[{"anything-but":["message","postback"]}],"detail":{"event":{"source":{"type":["user","group"]}}}}`))
	if err != nil {
		b.Fatal(err)
	}
	event := []byte(`{"version":"0","id":"6a7e8feb-b491-4cf7-a9f1-bf3703467718","detail-type":"follow","source":"line.webhook","account":"123456789012","time":"2024-01-01T00:00:00Z","region":"ap-northeast-1","resources":[],"detail":{"destination":"U0123456789abcdef0123456789abcdef","receivedAt":"2024-01-01T00:00:00.123456789Z","event":{"type":"follow","mode":"active","timestamp":1704067200000,"source":{"type":"user","userId":"U4af4980629abcdef0123456789abcdef"},"webhookEventId":"01HKQ8Z5X0ABCDEFGHJKMNPQRS","deliveryContext":{"isRedelivery":false},"replyToken":"nHuyWiB7yP5Zw52FIkcQobQuGDXCTA","follow":{"isUnblocked":false}}}}`)
	if !p.Match(event) {
		b.Fatal("benchmark event does not match")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Match(event)
	}
}
