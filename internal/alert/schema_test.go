package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// flexSchema holds the Message/Flex/Action schemas copied from LINE's
// messaging-api.yml into testdata/flex-schema.yml.
type flexSchema struct {
	schemas map[string]map[string]any
}

var (
	schemaOnce sync.Once
	schemaVal  *flexSchema
	schemaErr  error
)

func loadFlexSchema(t testing.TB) *flexSchema {
	t.Helper()
	schemaOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join("testdata", "flex-schema.yml"))
		if err != nil {
			schemaErr = err
			return
		}
		var doc struct {
			Components struct {
				Schemas map[string]map[string]any `yaml:"schemas"`
			} `yaml:"components"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			schemaErr = err
			return
		}
		schemaVal = &flexSchema{schemas: doc.Components.Schemas}
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schemaVal
}

func refName(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["$ref"].(string)
	return strings.TrimPrefix(s, "#/components/schemas/")
}

// required lists the required properties of a schema, following allOf.
func (s *flexSchema) required(name string) []string {
	sch := s.schemas[name]
	var out []string
	for _, r := range asList(sch["required"]) {
		out = append(out, r.(string))
	}
	for _, part := range asList(sch["allOf"]) {
		if ref := refName(part); ref != "" {
			out = append(out, s.required(ref)...)
			continue
		}
		if m, ok := part.(map[string]any); ok {
			for _, r := range asList(m["required"]) {
				out = append(out, r.(string))
			}
		}
	}
	return out
}

// concrete maps a discriminator value of a base schema (Message,
// FlexContainer, FlexComponent, Action) to its schema name.
func (s *flexSchema) concrete(base, typ string) (string, bool) {
	disc, _ := s.schemas[base]["discriminator"].(map[string]any)
	mapping, _ := disc["mapping"].(map[string]any)
	ref, ok := mapping[typ].(string)
	if !ok {
		return "", false
	}
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	_, known := s.schemas[name]
	return name, known
}

// enum returns the allowed values of a property, following allOf.
func (s *flexSchema) enum(name, prop string) []string {
	sch := s.schemas[name]
	parts := append([]any{sch}, asList(sch["allOf"])...)
	for _, p := range parts {
		m, _ := p.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		pm, _ := props[prop].(map[string]any)
		if e := asList(pm["enum"]); len(e) > 0 {
			var out []string
			for _, v := range e {
				out = append(out, fmt.Sprint(v))
			}
			return out
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// validateMessages checks rendered messages against the schema's required
// fields and LINE's documented limits, returning every problem found.
func validateMessages(t testing.TB, raw []byte) []string {
	s := loadFlexSchema(t)
	var msgs []map[string]any
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return []string{"not a JSON array of messages: " + err.Error()}
	}
	var probs []string
	bad := func(path, f string, a ...any) { probs = append(probs, path+": "+fmt.Sprintf(f, a...)) }
	if len(msgs) == 0 || len(msgs) > MaxMessagesPerPush {
		bad("push", "%d messages, want 1..%d", len(msgs), MaxMessagesPerPush)
	}
	checkRequired := func(path, schema string, obj map[string]any) {
		for _, r := range s.required(schema) {
			if _, ok := obj[r]; !ok {
				bad(path, "%s lacks required %q", schema, r)
			}
		}
	}
	// known checks that obj's type names one of base's concrete schemas
	// (what names base in the problem), then obj against that schema's
	// required properties; it returns the type.
	known := func(path, base, what string, obj map[string]any) (string, bool) {
		typ, _ := obj["type"].(string)
		schema, ok := s.concrete(base, typ)
		if !ok {
			bad(path, "unknown %s type %q", what, typ)
			return typ, false
		}
		checkRequired(path, schema, obj)
		return typ, true
	}
	var component func(path string, c map[string]any)
	action := func(path string, a map[string]any) {
		typ, ok := known(path, "Action", "action", a)
		if !ok {
			return
		}
		if typ == "uri" {
			uri, _ := a["uri"].(string)
			u, err := url.Parse(uri)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				bad(path, "uri %q is not an https URL", uri)
			}
			if len(uri) > MaxURI {
				bad(path, "uri is %d chars, limit %d", len(uri), MaxURI)
			}
		}
		label, _ := a["label"].(string)
		if label == "" || utf8.RuneCountInString(label) > MaxLabel {
			bad(path, "button label %q must be 1..%d characters", label, MaxLabel)
		}
	}
	component = func(path string, c map[string]any) {
		typ, ok := known(path, "FlexComponent", "or unchecked component", c)
		if !ok {
			return
		}
		switch typ {
		case "box":
			if layout, _ := c["layout"].(string); !slices.Contains(s.enum("FlexBox", "layout"), layout) {
				bad(path, "box layout %q not in %v", layout, s.enum("FlexBox", "layout"))
			}
			kids, ok := c["contents"].([]any)
			if !ok {
				bad(path, "box contents is not an array")
			}
			for i, k := range kids {
				km, _ := k.(map[string]any)
				component(fmt.Sprintf("%s.contents[%d]", path, i), km)
			}
		case "text":
			if txt, _ := c["text"].(string); txt == "" {
				bad(path, "text component without text")
			}
		case "button":
			a, _ := c["action"].(map[string]any)
			action(path+".action", a)
		}
	}
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		typ, ok := known(path, "Message", "message", m)
		if !ok {
			continue
		}
		checkRequired(path, "Message", m)
		switch typ {
		case "text":
			txt, _ := m["text"].(string)
			if txt == "" || utf16Len(txt) > MaxTextMessage {
				bad(path, "text is %d UTF-16 units, want 1..%d", utf16Len(txt), MaxTextMessage)
			}
		case "flex":
			alt, _ := m["altText"].(string)
			if alt == "" || utf16Len(alt) > MaxAltText || strings.ContainsAny(alt, "\n\t") {
				bad(path, "altText must be one line of 1..%d UTF-16 units, got %d", MaxAltText, utf16Len(alt))
			}
			b, _ := json.Marshal(m)
			if len(b) > MaxFlexBytes {
				bad(path, "flex message is %d bytes, limit %d", len(b), MaxFlexBytes)
			}
			cont, _ := m["contents"].(map[string]any)
			if _, ok := known(path+".contents", "FlexContainer", "container", cont); !ok {
				continue
			}
			for _, block := range []string{"header", "body", "footer"} {
				if b, ok := cont[block].(map[string]any); ok {
					if b["type"] != "box" {
						bad(path, "%s is a %v, want a box", block, b["type"])
					}
					component(path+".contents."+block, b)
				}
			}
		}
	}
	return probs
}

// TestRenderedMessagesMatchTheFlexSchema renders every fixture and checks
// the pushed JSON against the required fields of LINE's schemas.
func TestRenderedMessagesMatchTheFlexSchema(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			n, p, _ := newTestNotifier(t, []string{opUser})
			if err := n.Handle(context.Background(), loadEvent(t, name)); err != nil {
				t.Fatal(err)
			}
			if len(p.calls) == 0 {
				t.Fatal("nothing pushed")
			}
			for _, c := range p.calls {
				for _, prob := range validateMessages(t, c.Messages) {
					t.Error(prob)
				}
				checked++
			}
		})
	}
	if checked < len(goldenCases) {
		t.Errorf("checked %d pushes, want at least %d", checked, len(goldenCases))
	}
}

// TestSchemaValidatorCatchesMistakes keeps the validator honest: each broken
// message must be reported.
func TestSchemaValidatorCatchesMistakes(t *testing.T) {
	okText := `{"type":"text","text":"hi"}`
	tests := []struct{ name, msgs, want string }{
		{"valid", `[` + okText + `]`, ""},
		{"flex without altText", `[{"type":"flex","contents":{"type":"bubble"}}]`, `FlexMessage lacks required "altText"`},
		{"flex without contents", `[{"type":"flex","altText":"a"}]`, `FlexMessage lacks required "contents"`},
		{"box without layout", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","contents":[]}}}]`, `FlexBox lacks required "layout"`},
		{"box without contents", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"vertical"}}}]`, `FlexBox lacks required "contents"`},
		{"bad layout", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"grid","contents":[]}}}]`, `layout "grid"`},
		{"text without text", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[{"type":"text"}]}}}]`, "text component without text"},
		{"button without action", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[{"type":"button"}]}}}]`, `FlexButton lacks required "action"`},
		{"uri without uri", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[{"type":"button","action":{"type":"uri","label":"x"}}]}}}]`, "is not an https URL"},
		{"long label", `[{"type":"flex","altText":"a","contents":{"type":"bubble","body":{"type":"box","layout":"vertical","contents":[{"type":"button","action":{"type":"uri","label":"123456789012345678901","uri":"https://x.example"}}]}}}]`, "button label"},
		{"text message without text", `[{"type":"text"}]`, `TextMessage lacks required "text"`},
		{"six messages", `[` + strings.Repeat(okText+",", 5) + okText + `]`, "6 messages"},
		{"long altText", `[{"type":"flex","altText":"` + strings.Repeat("a", MaxAltText+1) + `","contents":{"type":"bubble"}}]`, "altText must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := strings.Join(validateMessages(t, []byte(tt.msgs)), "\n")
			if tt.want == "" && probs != "" {
				t.Errorf("valid message reported: %s", probs)
			}
			if tt.want != "" && !strings.Contains(probs, tt.want) {
				t.Errorf("problems %q do not mention %q", probs, tt.want)
			}
		})
	}
}
