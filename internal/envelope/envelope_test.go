package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
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
		{"null", `null`, true},
		{"empty", ``, true},
		{"version not a string", `{"version":0,"detail":{"event":{}}}`, true},
		{"resources not strings", `{"resources":[1],"detail":{"event":{}}}`, true},
		{"time not a time", `{"time":"soon","detail":{"event":{}}}`, true},
		{"destination not a string", `{"detail":{"destination":["U1"],"event":{}}}`, true},
		{"trailing data", good + `{}`, true},
		{"truncated", good[:len(good)-1], true},
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

// The body the webhook writes for the chat queue decodes, with Decode, to
// exactly the detail and event bytes it was built from.
func TestEncodeRoundTrip(t *testing.T) {
	received := time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.FixedZone("JST", 9*3600))
	tests := []struct {
		name, destination, chat, event string
		head                           Head
	}{
		{"user chat", "Ubot", "U4af4980629", `{"type":"message","webhookEventId":"01A","source":{"type":"user","userId":"U4af4980629"}}`,
			Head{ID: "01A", DetailType: "message", Source: "line.webhook", Region: "ap-northeast-1", Time: received}},
		{"no chat", "Ubot", "", `{"type":"activated","webhookEventId":"01B"}`,
			Head{ID: "01B", DetailType: "activated", Source: "line.webhook", Time: received}},
		{"strings needing escapes", "U\"\\\x01", "C\u00e9\u3042", `{"type":"m\u00e9ssage","x":"\\\"","y":[1,{"z":null}]}`,
			Head{ID: "id\"\n", DetailType: "t\\", Source: "s\x7f", Account: "123456789012", Time: received}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detail := AppendDetail(nil, tt.destination, tt.chat, received, []byte(tt.event))
			if !json.Valid(detail) {
				t.Fatalf("detail is not JSON: %s", detail)
			}
			body := Encode(tt.head, detail)
			ev, d, err := Decode(body)
			if err != nil {
				t.Fatalf("Decode(Encode) = %v\n%s", err, body)
			}
			if string(ev.Detail) != string(detail) || string(d.Event) != tt.event {
				t.Fatalf("detail or event bytes changed:\n%s\n%s", ev.Detail, d.Event)
			}
			if d.Destination != tt.destination || d.Chat != tt.chat || !d.ReceivedAt.Equal(received) {
				t.Fatalf("decoded %+v", d)
			}
			if ev.ID != tt.head.ID || ev.DetailType != tt.head.DetailType || ev.Source != tt.head.Source ||
				ev.Account != tt.head.Account || ev.Region != tt.head.Region || !ev.Time.Equal(received.Truncate(time.Second)) || ev.Version != "0" {
				t.Fatalf("event head %+v, want %+v", ev, tt.head)
			}
			if tt.chat == "" && strings.Contains(string(detail), `"chat"`) {
				t.Fatalf("an event without a chat has a chat field: %s", detail)
			}
		})
	}
}

// SQS refuses U+FFFE and U+FFFF; Encode writes them as JSON escapes, so the
// text decodes the same and the body is one SQS accepts.
func TestEncodeEscapesNoncharacters(t *testing.T) {
	event := "{\"type\":\"message\",\"text\":\"a\uFFFEb\uFFFFc\"}"
	body := Encode(Head{ID: "e"}, AppendDetail(nil, "\uFFFF", "", time.Unix(0, 0), []byte(event)))
	if strings.ContainsRune(string(body), 0xFFFE) || strings.ContainsRune(string(body), 0xFFFF) {
		t.Fatalf("raw noncharacters left in %q", body)
	}
	_, d, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(d.Event, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(event), &want)
	if !reflect.DeepEqual(got, want) || d.Destination != "\uFFFF" {
		t.Fatalf("decoded %v / %q, want %v", got, d.Destination, want)
	}
}

// FuzzEncode: whatever strings the webhook puts in the head and detail, and
// whatever JSON object the event is, Encode's body decodes back to them.
func FuzzEncode(f *testing.F) {
	f.Add("01A", "message", "Ubot", "U1", []byte(`{"type":"message"}`))
	f.Add("", "", "", "", []byte(`{}`))
	f.Add("\"\\\x00\xff", "\uFFFE", "\u2028", "C\uFFFF", []byte("{\"t\":\"\uFFFF\\\"\"}"))
	f.Fuzz(func(t *testing.T, id, typ, dest, chat string, event []byte) {
		if !json.Valid(event) || len(event) == 0 || event[0] != '{' {
			return
		}
		body := Encode(Head{ID: id, DetailType: typ, Source: "line.webhook"}, AppendDetail(nil, dest, chat, time.Unix(1, 0), event))
		if !json.Valid(body) {
			t.Fatalf("body is not JSON: %q", body)
		}
		ev, d, err := Decode(body)
		if err != nil {
			t.Fatalf("Decode: %v\n%q", err, body)
		}
		var got, want any
		_ = json.Unmarshal(d.Event, &got)
		_ = json.Unmarshal(event, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %q decoded as %q", event, d.Event)
		}
		if ev.ID != clean(id) || ev.DetailType != clean(typ) || d.Destination != clean(dest) || d.Chat != clean(chat) {
			t.Fatalf("strings changed: %q %q %q %q", ev.ID, ev.DetailType, d.Destination, d.Chat)
		}
	})
}

// clean is s as encoding/json decodes it after Encode: each byte of invalid
// UTF-8 became U+FFFD.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as utf8.RuneError, one byte each
	}
	return b.String()
}

func TestSafeForSQS(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a\uFFFEb", `a\ufffeb`},
		{"\uFFFF", `\uffff`},
		{"\uFFFD\uFFFC\xef\xbf", "\uFFFD\uFFFC\xef\xbf"}, // near misses stay
		{"\xef\xef\xbf\xbf", "\xef\\uffff"},
	}
	for _, tt := range tests {
		in := []byte(tt.in)
		got := SafeForSQS(in)
		if string(got) != tt.want {
			t.Errorf("SafeForSQS(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in == tt.want && &got[0] != &in[0] {
			t.Errorf("SafeForSQS(%q) copied a body it did not change", tt.in)
		}
	}
}

// AppendEvent appends the EventBridge event, its time truncated to the
// second, around the detail's bytes.
func TestAppendEvent(t *testing.T) {
	detail := AppendDetail(nil, "Ubot", "U1", time.Unix(0, 5), []byte(`{"type":"follow"}`))
	prefix := []byte("earlier bytes")
	b := AppendEvent(bytes.Clone(prefix), Head{ID: "01A", DetailType: "follow", Time: time.Unix(7, 9)}, detail)
	want := `{"version":"0","id":"01A","detail-type":"follow","source":"","account":"","time":"1970-01-01T00:00:07Z","region":"","resources":[],"detail":` +
		`{"destination":"Ubot","receivedAt":"1970-01-01T00:00:00.000000005Z","chat":"U1","event":{"type":"follow"}}}`
	if got := string(b); got != string(prefix)+want {
		t.Fatalf("event\n got %s\nwant %s%s", got, prefix, want)
	}
}
