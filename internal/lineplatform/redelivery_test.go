package lineplatform

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestMarkRedelivery(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("testdata", "samples", "message-text-user.json"))
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Events []json.RawMessage }
	if err := json.Unmarshal(sample, &body); err != nil {
		t.Fatal(err)
	}
	pretty := body.Events[0] // LINE's indented bytes, kept verbatim
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{"compact", `{"type":"follow","deliveryContext":{"isRedelivery":false},"x":1}`,
			`{"type":"follow","deliveryContext":{"isRedelivery":true},"x":1}`, false},
		{"already true", `{"deliveryContext":{"isRedelivery":true}}`, `{"deliveryContext":{"isRedelivery":true}}`, false},
		{"whitespace kept", "{ \"a\" : [1, 2],\n  \"deliveryContext\" : { \"isRedelivery\" : false , \"k\":\"v\"} }",
			"{ \"a\" : [1, 2],\n  \"deliveryContext\" : { \"isRedelivery\" : true , \"k\":\"v\"} }", false},
		{"missing deliveryContext", `{"type":"x"}`, `{"type":"x","deliveryContext":{"isRedelivery":true}}`, false},
		{"empty object", `{}`, `{"deliveryContext":{"isRedelivery":true}}`, false},
		{"missing isRedelivery", `{"deliveryContext":{"k":1}}`, `{"deliveryContext":{"k":1,"isRedelivery":true}}`, false},
		{"empty deliveryContext", `{"deliveryContext":{}}`, `{"deliveryContext":{"isRedelivery":true}}`, false},
		{"null deliveryContext", `{"deliveryContext":null,"z":0}`, `{"deliveryContext":{"isRedelivery":true},"z":0}`, false},
		{"look-alike strings untouched", `{"text":"\"isRedelivery\":false","deliveryContext":{"isRedelivery":false}}`,
			`{"text":"\"isRedelivery\":false","deliveryContext":{"isRedelivery":true}}`, false},
		{"nested look-alike untouched", `{"message":{"deliveryContext":{"isRedelivery":false}},"deliveryContext":{"isRedelivery":false}}`,
			`{"message":{"deliveryContext":{"isRedelivery":false}},"deliveryContext":{"isRedelivery":true}}`, false},
		{"LINE sample", string(pretty), string(bytes.Replace(pretty, []byte(`"isRedelivery": false`), []byte(`"isRedelivery": true`), 1)), false},
		{"array", `[1]`, "", true},
		{"string", `"x"`, "", true},
		{"empty", ``, "", true},
		{"trailing data", `{"a":1} {"b":2}`, "", true},
		{"form feed is not JSON whitespace", "{}\f", "", true},
		{"truncated", `{"deliveryContext":{"isRedelivery":`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MarkRedelivery([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("MarkRedelivery(%s) = %s; want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("MarkRedelivery: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("MarkRedelivery =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// FuzzMarkRedelivery feeds arbitrary bytes to the raw-JSON editor: every
// JSON object must come out valid, marked as a redelivery, and otherwise
// unchanged member for member; anything else must be refused.
func FuzzMarkRedelivery(f *testing.F) {
	f.Add([]byte(`{"type":"message","deliveryContext":{"isRedelivery":false}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"deliveryContext":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := MarkRedelivery(in)
		var inMembers map[string]json.RawMessage
		isObject := json.Valid(in) && json.Unmarshal(in, &inMembers) == nil && inMembers != nil
		if !isObject {
			if err == nil {
				t.Fatalf("accepted a non-object %q -> %q", in, out)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused the object %q: %v", in, err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, in)
		}
		var outMembers map[string]json.RawMessage
		if err := json.Unmarshal(out, &outMembers); err != nil {
			t.Fatal(err)
		}
		for k, v := range inMembers {
			if k != "deliveryContext" && !bytes.Equal(outMembers[k], v) {
				t.Fatalf("member %q changed: %s -> %s", k, v, outMembers[k])
			}
		}
		if len(outMembers) != len(inMembers) && !(len(outMembers) == len(inMembers)+1 && inMembers["deliveryContext"] == nil) {
			t.Fatalf("member count %d -> %d", len(inMembers), len(outMembers))
		}
		var dcIn, dcOut map[string]json.RawMessage
		if err := json.Unmarshal(outMembers["deliveryContext"], &dcOut); err != nil {
			t.Fatalf("deliveryContext %s: %v", outMembers["deliveryContext"], err)
		}
		if string(dcOut["isRedelivery"]) != "true" {
			t.Fatalf("isRedelivery = %s in %q", dcOut["isRedelivery"], out)
		}
		if json.Unmarshal(inMembers["deliveryContext"], &dcIn) == nil {
			for k, v := range dcIn {
				if k != "isRedelivery" && !bytes.Equal(dcOut[k], v) {
					t.Fatalf("deliveryContext.%s changed: %s -> %s", k, v, dcOut[k])
				}
			}
		}
	})
}
