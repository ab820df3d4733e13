package bot

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"
)

// sampleEvents are the events of the LINE webhook samples in testdata.
func sampleEvents(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	out := map[string]json.RawMessage{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, ev := range body.Events {
			out[strings.TrimSuffix(filepath.Base(f), ".json")+"#"+string(rune('0'+i))] = ev
		}
	}
	return out
}

// checkParse fails unless Peek and Parse read raw as encoding/json reads
// its head and the SDK its typed event: the same errors (wrapping
// ErrEvent), and on success every field of the Event from the head, the
// raw bytes unchanged and the SDK's own typed event.
func checkParse(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var h head
	herr := json.Unmarshal(raw, &h)
	if herr == nil && h.Type == "" {
		herr = errors.New("no type")
	}
	got, err := Peek(raw)
	if (err != nil) != (herr != nil) {
		t.Fatalf("Peek: %v; encoding/json: %v\n%s", err, herr, raw)
	}
	if err != nil {
		if !errors.Is(err, ErrEvent) {
			t.Fatalf("Peek error %v does not wrap ErrEvent", err)
		}
		if _, err := Parse(raw, "Ubot", time.Time{}, nil); !errors.Is(err, ErrEvent) {
			t.Fatalf("Parse of what Peek refuses: %v, want ErrEvent", err)
		}
		return
	}
	if got != (Head{Type: h.Type, WebhookEventID: h.WebhookEventID, SourceType: SourceType(h.Source.Type)}) {
		t.Fatalf("Peek %+v; encoding/json %+v", got, h)
	}
	typed, perr := webhook.UnmarshalEvent(raw)
	received := time.Unix(100, 0)
	ev, err := Parse(raw, "Ubot", received, nil)
	if (err != nil) != (perr != nil) {
		t.Fatalf("Parse: %v; the SDK: %v\n%s", err, perr, raw)
	}
	if err != nil {
		if !errors.Is(err, ErrEvent) {
			t.Fatalf("Parse error %v does not wrap ErrEvent", err)
		}
		return
	}
	want := Event{Type: h.Type, WebhookEventID: h.WebhookEventID, Mode: h.Mode, Redelivery: h.DeliveryContext.IsRedelivery,
		Timestamp: time.UnixMilli(h.Timestamp), ReceivedAt: received, ReplyToken: h.ReplyToken, Destination: "Ubot",
		Source: Source{Type: SourceType(h.Source.Type), UserID: h.Source.UserID, GroupID: h.Source.GroupID, RoomID: h.Source.RoomID}}
	if ev.Type != want.Type || ev.WebhookEventID != want.WebhookEventID || ev.Mode != want.Mode || ev.Redelivery != want.Redelivery ||
		!ev.Timestamp.Equal(want.Timestamp) || ev.ReplyToken != want.ReplyToken || ev.Source != want.Source ||
		ev.Destination != "Ubot" || !ev.ReceivedAt.Equal(received) || string(ev.Raw) != string(raw) {
		t.Fatalf("event %+v, want %+v", ev, &want)
	}
	if !reflect.DeepEqual(ev.Typed, typed) {
		t.Fatalf("typed event %#v; the SDK's %#v", ev.Typed, typed)
	}
}

// Every event of the LINE samples parses to its head's fields and the
// SDK's typed event; the common kinds are the SDK's typed structs, a type
// the SDK does not know its UnknownEvent.
func TestParseSamples(t *testing.T) {
	samples := sampleEvents(t)
	for name, raw := range samples {
		t.Run(name, func(t *testing.T) { checkParse(t, raw) })
	}
	for sample, want := range map[string]any{
		"message-text-user#0":   webhook.MessageEvent{},
		"postback-user#0":       webhook.PostbackEvent{},
		"follow-user#0":         webhook.FollowEvent{},
		"messageEdited-group#0": webhook.MessageEditedEvent{},
		"memberLeft-group#0":    webhook.MemberLeftEvent{},
	} {
		ev, err := Parse(samples[sample], "", time.Time{}, nil)
		if err != nil || reflect.TypeOf(ev.Typed) != reflect.TypeOf(want) {
			t.Errorf("%s: typed %T (%v), want %T", sample, ev, err, want)
		}
	}
	ev, err := Parse(json.RawMessage(`{"type":"hologram","webhookEventId":"01H","hologram":{"depth":3}}`), "", time.Time{}, nil)
	if err != nil || ev.Type != "hologram" {
		t.Fatalf("a future type: %+v %v", ev, err)
	}
	if _, ok := ev.Typed.(webhook.UnknownEvent); !ok {
		t.Fatalf("a future type decodes to %T, want webhook.UnknownEvent", ev.Typed)
	}
}

// What cannot be decoded is an ErrEvent, for Peek and Parse alike.
func TestParseRefuses(t *testing.T) {
	for _, raw := range []string{`[1]`, `null`, `{"type":"x"`, `{}`, `{"type":7}`, `{"type":"message","source":"U1"}`, `"message"`, ``} {
		if _, err := Peek(json.RawMessage(raw)); !errors.Is(err, ErrEvent) {
			t.Errorf("Peek(%s): %v, want ErrEvent", raw, err)
		}
		if _, err := Parse(json.RawMessage(raw), "", time.Time{}, nil); !errors.Is(err, ErrEvent) {
			t.Errorf("Parse(%s): %v, want ErrEvent", raw, err)
		}
	}
}

// A head that encoding/json reads is read even when the rest of the event
// is not what the SDK decodes: a duplicate of it is still recognised, and
// the SDK's error comes when the event is parsed.
func TestPeekIgnoresTheBody(t *testing.T) {
	raw := json.RawMessage(`{"type":"message","webhookEventId":"01H","message":{"type":7}}`)
	h, err := Peek(raw)
	if err != nil || h.WebhookEventID != "01H" {
		t.Fatalf("Peek %+v %v", h, err)
	}
	if _, err := Parse(raw, "", time.Time{}, nil); !errors.Is(err, ErrEvent) {
		t.Fatalf("Parse: %v, want ErrEvent", err)
	}
}

// FuzzParse: a record's event is outside input. Peek and Parse never
// panic, refuse with ErrEvent, and read what encoding/json and the SDK
// read (checkParse).
func FuzzParse(f *testing.F) {
	for _, raw := range sampleEvents(f) {
		f.Add([]byte(raw))
	}
	for _, s := range []string{
		`{"type":"message","Type":"follow","SOURCE":{"TYPE":"group","groupid":"C1"},"timestamp":1.5}`,
		`{"type":"postback","postback":{"data":"d","params":{"datetime":"2017-12-25T01:00","x":"\u00e9"}},"replyToken":"r"}`,
		`{"type":"follow","follow":{"isUnblocked":true},"deliveryContext":{"isRedelivery":true,"IsRedelivery":false}}`,
		`{"type":"message","source":null}`,
		`{"type":"unfollow","timestamp":9223372036854775808}`,
		`{"type":"message","webhookEventId":null,"type":null}`,
		`[1]`, `null`, `{"type":"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkParse(t, raw) })
}

// Since line-bot-sdk-go v8.19.1 (#679) a required array LINE sends empty
// decodes to an empty slice, not nil: LINE's verify request (no events)
// gives a CallbackRequest whose Events is empty and non-nil, and an event
// of a type the SDK knows since v8.22.0 (messageEdited) decodes to its
// typed struct instead of UnknownEvent.
func TestSDKDecodesAsPinned(t *testing.T) {
	b, err := os.ReadFile("testdata/verify-empty-events.json")
	if err != nil {
		t.Fatal(err)
	}
	var cb webhook.CallbackRequest
	if err := json.Unmarshal(b, &cb); err != nil {
		t.Fatal(err)
	}
	if cb.Events == nil || len(cb.Events) != 0 {
		t.Fatalf("verify body: Events = %#v, want an empty non-nil slice", cb.Events)
	}
	raw := sampleEvents(t)["messageEdited-group#0"]
	typed, err := webhook.UnmarshalEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	ed, ok := typed.(webhook.MessageEditedEvent)
	if !ok {
		t.Fatalf("messageEdited decodes to %T", typed)
	}
	if tm, ok := ed.Message.(webhook.TextMessageContent); !ok || tm.Text != "Hello, edited world" {
		t.Fatalf("edited message %#v", ed.Message)
	}
}
