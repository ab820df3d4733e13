package envelope

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	good := `{"version":"0","id":"e1","detail-type":"message","source":"line.webhook","account":"1","time":"2026-11-29T08:00:00Z","region":"us-east-1","resources":[],"detail":{"destination":"U1","receivedAt":"2026-11-29T08:00:00.5Z","event":{"type":"message","webhookEventId":"01A"}}}`
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{"good", good, false},
		{"not json", `hello`, true},
		{"detail missing", `{"detail-type":"message"}`, true},
		{"detail a string", `{"detail":"x"}`, true},
		{"event missing", `{"detail":{"destination":"U1"}}`, true},
		{"event not object", `{"detail":{"event":[1]}}`, true},
		{"receivedAt bad", `{"detail":{"receivedAt":"yesterday","event":{}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, env, err := Decode([]byte(tt.body))
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.DetailType != "message" || env.Destination != "U1" || string(env.Event) != `{"type":"message","webhookEventId":"01A"}` {
				t.Fatalf("decoded %+v %+v", ev, env)
			}
		})
	}
}

// FuzzDecode: SQS bodies are outside input; Decode never panics and either
// returns a usable envelope or ErrMalformed.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"detail":{"destination":"U1","receivedAt":"2026-11-29T08:00:00Z","event":{"type":"follow"}}}`))
	f.Add([]byte(`{"detail":{"event":{}}}`))
	f.Add([]byte(`{"detail":[]}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, env, err := Decode(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		if len(env.Event) == 0 || env.Event[0] != '{' {
			t.Fatalf("accepted an envelope without an event object: %q", body)
		}
	})
}
