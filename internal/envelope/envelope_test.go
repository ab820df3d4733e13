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
		channel                        string
	}{
		{"user chat", "Ubot", "U4af4980629", `{"type":"message","webhookEventId":"01A","source":{"type":"user","userId":"U4af4980629"}}`,
			Head{ID: "01A", DetailType: "message", Source: "line.webhook", Region: "ap-northeast-1", Time: received}, ""},
		{"no chat", "Ubot", "", `{"type":"activated","webhookEventId":"01B"}`,
			Head{ID: "01B", DetailType: "activated", Source: "line.webhook", Time: received}, ""},
		{"strings needing escapes", "U\"\\\x01", "C\u00e9\u3042", `{"type":"m\u00e9ssage","x":"\\\"","y":[1,{"z":null}]}`,
			Head{ID: "id\"\n", DetailType: "t\\", Source: "s\x7f", Account: "123456789012", Time: received}, ""},
		{"named channel", "Ubot", "U4af4980629", `{"type":"message","webhookEventId":"01C","source":{"type":"user","userId":"U4af4980629"}}`,
			Head{ID: "01C", DetailType: "message", Source: "line.webhook", Time: received}, "brand-tw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detail := AppendDetail(nil, tt.destination, tt.channel, tt.chat, received, []byte(tt.event))
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
			if d.Destination != tt.destination || d.Chat != tt.chat || d.Channel != tt.channel || !d.ReceivedAt.Equal(received) {
				t.Fatalf("decoded %+v", d)
			}
			if ev.ID != tt.head.ID || ev.DetailType != tt.head.DetailType || ev.Source != tt.head.Source ||
				ev.Account != tt.head.Account || ev.Region != tt.head.Region || !ev.Time.Equal(received.Truncate(time.Second)) || ev.Version != "0" {
				t.Fatalf("event head %+v, want %+v", ev, tt.head)
			}
			if tt.chat == "" && strings.Contains(string(detail), `"chat"`) {
				t.Fatalf("an event without a chat has a chat field: %s", detail)
			}
			if tt.channel == "" && strings.Contains(string(detail), `"channel"`) {
				t.Fatalf("an event of the default channel has a channel field: %s", detail)
			}
			var ref Detail
			if err := json.Unmarshal(detail, &ref); err != nil || ref.Channel != tt.channel || ref.Chat != tt.chat {
				t.Fatalf("encoding/json reads the detail as %+v (%v)", ref, err)
			}
		})
	}
}

// SQS refuses U+FFFE and U+FFFF; Encode writes them as JSON escapes, so the
// text decodes the same and the body is one SQS accepts.
func TestEncodeEscapesNoncharacters(t *testing.T) {
	event := "{\"type\":\"message\",\"text\":\"a\uFFFEb\uFFFFc\"}"
	body := Encode(Head{ID: "e"}, AppendDetail(nil, "\uFFFF", "", "", time.Unix(0, 0), []byte(event)))
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
		body := Encode(Head{ID: id, DetailType: typ, Source: "line.webhook"}, AppendDetail(nil, dest, "", chat, time.Unix(1, 0), event))
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

// FuzzWriter: the Writer writes, for any strings and any event object,
// exactly what AppendDetail and Encode write, of exactly the lengths it
// announces, and the Detail it returns is the one inside the event.
func FuzzWriter(f *testing.F) {
	f.Add("01A", "message", "Ubot", "U1", "line.webhook", "us-east-1", []byte(`{"type":"message"}`), int64(1764403200123456789), "")
	f.Add("", "", "", "", "", "", []byte(`{}`), int64(0), "b")
	f.Add("\"\\\x00\xff", "\uFFFE", "\u2028", "C\uFFFF", strings.Repeat("s", 300), "r", []byte("{\"t\":\"\uFFFF\\\"\"}"), int64(-62135596800000000), "brand-tw")
	f.Fuzz(func(t *testing.T, id, typ, dest, chat, source, region string, event []byte, nanos int64, channel string) {
		at := time.Unix(0, nanos)
		w := NewWriter(dest, channel, at, Head{Source: source, Region: region})
		it := NewItem(id, typ, chat, event)
		detail := w.AppendDetail([]byte("x"), &it)[1:]
		if want := AppendDetail(nil, dest, channel, chat, at, event); string(detail) != string(want) {
			t.Fatalf("Writer's detail %q, AppendDetail's %q", detail, want)
		}
		if n := w.DetailLen(&it); n != len(detail) {
			t.Fatalf("DetailLen %d, wrote %d", n, len(detail))
		}
		body, inner := w.AppendEvent(nil, &it)
		if n := w.EventLen(&it); n != len(body) {
			t.Fatalf("EventLen %d, wrote %d", n, len(body))
		}
		if string(inner) != string(detail) || !bytes.Contains(body, inner) {
			t.Fatalf("the event's detail %q, want %q", inner, detail)
		}
		if want := Encode(Head{ID: id, DetailType: typ, Source: source, Region: region, Time: at}, detail); string(SafeForSQS(body)) != string(want) {
			t.Fatalf("Writer's event %q, Encode's %q", SafeForSQS(body), want)
		}
		for _, s := range []string{id, typ, dest, chat, source} {
			want := appendString(nil, s)
			if n := stringLen(s); n != len(want) {
				t.Fatalf("stringLen(%q) = %d, appendString wrote %d", s, n, len(want))
			}
			if got := appendMeasured(nil, s, stringLen(s)); string(got) != string(want) {
				t.Fatalf("appendMeasured(%q) = %q, appendString wrote %q", s, got, want)
			}
		}
		if got, want := appendStamp([]byte("x"), at), at.UTC().AppendFormat([]byte("x"), time.RFC3339Nano); string(got) != string(want) {
			t.Fatalf("appendStamp(%v) = %q, AppendFormat %q", at, got, want)
		}
	})
}

// The receive time is written by hand as time.RFC3339Nano formats it:
// fractions trimmed of trailing zeros, none for a whole second, years
// padded to four digits, other zones in UTC, years past 9999 (and before 0)
// left to AppendFormat.
func TestAppendStamp(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 120000000, time.FixedZone("JST", 9*3600)),
		time.Date(2027, 1, 1, 8, 59, 59, 100, time.FixedZone("JST", 9*3600)),
		time.Date(999, 7, 8, 9, 10, 11, 1000, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 5, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	} {
		if got, want := string(appendStamp(nil, at)), at.UTC().Format(time.RFC3339Nano); got != want {
			t.Errorf("appendStamp(%v) = %s, want %s", at, got, want)
		}
	}
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

// civil gives time's calendar date for every day from the year -222 to
// 10,000 (the whole span of the hand-written stamp, and both sides of it).
func TestCivilMatchesTime(t *testing.T) {
	for days := int64(-800_000); days <= 3_000_000; days++ {
		y, m, d := civil(days)
		wy, wm, wd := time.Unix(days*86400, 0).UTC().Date()
		if y != wy || m != int(wm) || d != wd {
			t.Fatalf("civil(%d) = %d-%d-%d, time says %d-%d-%d", days, y, m, d, wy, int(wm), wd)
		}
	}
}
