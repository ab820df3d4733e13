package ingress

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/linegate/linegate/internal/signature"
)

// FuzzHandle feeds arbitrary (signature, body) pairs, half of them validly
// signed, through the webhook core: it never panics, never answers outside the
// documented statuses, and never publishes unless the signature is valid.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"destination":"U1","events":[{"type":"message","webhookEventId":"01A"}]}`), "", true)
	f.Add([]byte(`{"events":[]}`), "", true)
	f.Add([]byte(`{"events":[{"type":"follow"},{"type":"unfollow"}]}`), "bad", false)
	f.Add([]byte(`{"events":[1,2]}`), "", true)
	f.Add([]byte(`[[[[[[[[[[`), "", true)
	f.Add([]byte("{\"events\":[{\"type\":\"\xff\"}]}"), "", true)
	f.Fuzz(func(t *testing.T, body []byte, sig string, signIt bool) {
		if signIt {
			sig = signature.Sign([]byte(secret), body)
		}
		pub := &fakePublisher{}
		h := newHandler(t, pub, WithMaxBodyBytes(64<<10))
		resp, _ := h.Handle(context.Background(), "POST", sig, body)
		switch resp.Status {
		case 200, 400, 401, 413:
		default:
			t.Fatalf("status %d", resp.Status)
		}
		valid := signature.Verify(body, sig, []byte(secret), []byte(prevSecret))
		if len(pub.sent) > 0 && !valid {
			t.Fatal("published with an invalid signature")
		}
		if resp.Status == 401 && valid {
			t.Fatal("valid signature answered 401")
		}
		if resp.Status != 200 && len(pub.sent) > 0 {
			t.Fatalf("status %d but published", resp.Status)
		}
	})
}

// FuzzParseBody: the webhook's reading of a body agrees with what the worker
// and LINE's SDK read with encoding/json (case-insensitive keys, the last
// of repeated keys). Whenever parseBody accepts a body, encoding/json reads
// the same number of events with the same types, webhookEventIds and chats,
// and each event's raw bytes are valid JSON; parseBody never panics and
// every error wraps ErrBody.
func FuzzParseBody(f *testing.F) {
	f.Add([]byte(`{"destination":"U1","events":[{"type":"message","webhookEventId":"01A","source":{"type":"user","userId":"U1"}}]}`))
	f.Add([]byte(`{"events":[{"type":"follow","source":{"type":"group","groupId":"C1","userId":"U1"}},{"type":"x","source":null}]}`))
	f.Add([]byte(`{"EVENTS":[{"type":"follow"}]}`))
	f.Add([]byte(`{"events":[{"type":"a","Type":"b"}]}`))
	f.Add([]byte(`{"events":[{"type":"a","type":"b"}]}`))
	f.Add([]byte(`{"\u0065vents":[{"type":"\u0066ollow","webhookEventId":"\"x\\"}]}`))
	f.Add([]byte(` { "events" : [ { "type" : "t" , "n" : [1, {"a":"}"}, "]"] } ] } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseBody(b, DefaultMaxEvents)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("error does not wrap ErrBody: %v", err)
			}
			return
		}
		var want struct {
			Destination string `json:"destination"`
			Events      []struct {
				Type           string `json:"type"`
				WebhookEventID string `json:"webhookEventId"`
				Source         *struct {
					UserID  string `json:"userId"`
					GroupID string `json:"groupId"`
					RoomID  string `json:"roomId"`
				} `json:"source"`
			} `json:"events"`
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("parseBody accepted what encoding/json refuses: %v\n%q", err, b)
		}
		var raws struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(b, &raws); err != nil || len(raws.Events) != len(got.events) {
			t.Fatalf("encoding/json splits %d events (%v), parseBody %d", len(raws.Events), err, len(got.events))
		}
		if got.destination != want.Destination || len(got.events) != len(want.Events) {
			t.Fatalf("destination %q, %d events; encoding/json reads %q, %d", got.destination, len(got.events), want.Destination, len(want.Events))
		}
		for i, ev := range got.events {
			w := want.Events[i]
			chat := ""
			if w.Source != nil {
				chat = cmp.Or(w.Source.GroupID, w.Source.RoomID, w.Source.UserID)
			}
			if ev.typ != w.Type || ev.webhookEventID != w.WebhookEventID || ev.chat != chat {
				t.Fatalf("event %d: %q %q %q; encoding/json reads %q %q %q", i, ev.typ, ev.webhookEventID, ev.chat, w.Type, w.WebhookEventID, chat)
			}
			if !bytes.Equal(ev.raw, raws.Events[i]) {
				t.Fatalf("event %d's raw bytes %q; encoding/json's %q", i, ev.raw, raws.Events[i])
			}
		}
	})
}
