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

// reference is what the worker read before issue 16: the head with
// json.Unmarshal, then the SDK's typed decode.
func reference(raw json.RawMessage) (head, webhook.EventInterface, error, error) {
	var h head
	herr := json.Unmarshal(raw, &h)
	if herr == nil && h.Type == "" {
		herr = errors.New("no type")
	}
	if herr != nil {
		return h, nil, herr, herr
	}
	typed, err := webhook.UnmarshalEvent(raw)
	return h, typed, nil, err
}

// checkAgainstReference fails unless Peek and Parse read raw exactly as the
// reference does: the same errors, and on success the same head and an SDK
// typed event deeply equal to the SDK's own.
func checkAgainstReference(t *testing.T, raw json.RawMessage) {
	t.Helper()
	h, typed, herr, perr := reference(raw)
	got, err := Peek(raw)
	if (err != nil) != (herr != nil) {
		t.Fatalf("Peek: %v; encoding/json: %v\n%s", err, herr, raw)
	}
	if err != nil && !errors.Is(err, ErrEvent) {
		t.Fatalf("Peek error %v does not wrap ErrEvent", err)
	}
	if err == nil && got != (Head{Type: h.Type, WebhookEventID: h.WebhookEventID, SourceType: SourceType(h.Source.Type)}) {
		t.Fatalf("Peek %+v; encoding/json %+v", got, h)
	}
	received := time.Unix(100, 0)
	ev, err := Parse(raw, "Ubot", received, nil)
	if (err != nil) != (perr != nil) {
		t.Fatalf("Parse: %v; reference: %v\n%s", err, perr, raw)
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

func TestReaderMatchesTheSDKOnSamples(t *testing.T) {
	for name, raw := range sampleEvents(t) {
		t.Run(name, func(t *testing.T) { checkAgainstReference(t, raw) })
	}
}

// The common events are built without the SDK's decoder: that is the
// worker's one pass. Others (and odd spellings) go to the SDK.
func TestReaderBuildsCommonEventsItself(t *testing.T) {
	samples := sampleEvents(t)
	tests := []struct {
		sample string
		built  bool
	}{
		{"message-text-user#0", true},
		{"message-text-group-redelivery#0", true},
		{"postback-user#0", true},
		{"follow-user#0", true},
		{"unfollow-user#0", true},
		{"join-group#0", true},
		{"leave-group#0", true},
		// An edit of a text in a group (SDK v8.22.0's MessageEditedEvent;
		// https://developers.line.biz/en/reference/messaging-api/#edit-event)
		// and a text with its markAsReadToken, as LINE's mark-as-read page
		// shows one (https://developers.line.biz/en/docs/messaging-api/mark-as-read).
		{"messageEdited-group#0", true},
		{"message-text-markasread-user#0", true},
		{"message-text-emojis-user#0", false}, // emojis: the SDK's
		{"message-image-user#0", false},
		{"beacon-enter-user#0", false},
		{"memberLeft-group#0", false},
	}
	for _, tt := range tests {
		raw, ok := samples[tt.sample]
		if !ok {
			t.Fatalf("no sample %s", tt.sample)
		}
		var r Reader
		r.readRaw(raw)
		if _, built := r.typed(); built != tt.built {
			t.Errorf("%s: built without the SDK %v, want %v", tt.sample, built, tt.built)
		}
	}
	odd := []string{
		`{"type":"message","TYPE":"message","message":{"type":"text","text":"x"}}`, // a key in another case
		`{"type":"message","message":{"type":"text","text":"x","text":"y"}}`,       // a key twice
		`{"type":"message","replyToken":null}`,                                     // null
		`{"type":"follow","source":{"type":"bot","userId":"U"}}`,                   // a source kind the SDK leaves raw
		`{"type":"postback","postback":{"data":"d","params":{"a":"1","a":"2"}}}`,
	}
	for _, raw := range odd {
		var r Reader
		r.readRaw([]byte(raw))
		if _, built := r.typed(); built {
			t.Errorf("%s was built without the SDK", raw)
		}
	}
}

// A head that encoding/json reads is read even when the rest of the event
// is not what the SDK decodes: a duplicate of it is still recognised, and
// the SDK's error comes when the event is parsed.
func TestReaderHeadIgnoresTheBody(t *testing.T) {
	raw := json.RawMessage(`{"type":"message","webhookEventId":"01H","message":{"type":7}}`)
	h, err := Peek(raw)
	if err != nil || h.WebhookEventID != "01H" {
		t.Fatalf("Peek %+v %v", h, err)
	}
	if _, err := Parse(raw, "", time.Time{}, nil); !errors.Is(err, ErrEvent) {
		t.Fatalf("Parse: %v, want ErrEvent", err)
	}
}

// FuzzReader is the differential test of the one-pass reader against what
// it replaces, encoding/json for the head and the SDK for the typed event.
func FuzzReader(f *testing.F) {
	for _, raw := range sampleEvents(f) {
		f.Add([]byte(raw))
	}
	for _, s := range []string{
		`{"type":"message","Type":"follow","SOURCE":{"TYPE":"group","groupid":"C1"},"timestamp":1.5}`,
		`{"type":"postback","postback":{"data":"d","params":{"datetime":"2017-12-25T01:00","x":"\u00e9"}},"replyToken":"r"}`,
		`{"type":"postback","postback":{"data":"d","params":{}}}`,
		`{"type":"follow","follow":{"isUnblocked":true},"deliveryContext":{"isRedelivery":true,"IsRedelivery":false}}`,
		`{"type":"join","source":{"type":"room","roomId":"R","userId":"U"},"mode":"standby"}`,
		`{"type":"message","source":null}`,
		`{"type":"message","message":null}`,
		`{"type":"message","message":{"id":"1","type":"text","text":"a\nb","quotedMessageId":"2","markAsReadToken":"m"}}`,
		`{"type":"unfollow","timestamp":9223372036854775808}`,
		`{"type":"leave","source":{"type":"group","groupId":"C","groupId":"D"}}`,
		`{"type":"message","webhookEventId":null,"type":null}`,
		`[1]`, `null`, `{"type":"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			// Both refuse it; the scanner's own differential test covers
			// validity.
			if _, err := Peek(raw); !errors.Is(err, ErrEvent) {
				t.Fatalf("Peek accepted invalid JSON %q: %v", raw, err)
			}
			return
		}
		checkAgainstReference(t, raw)
	})
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
