package console

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseSend(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{"text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hello"}`, ""},
		{"text with emoji", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hi (love)","emojis":[{"index":3,"length":6,"productId":"5ac1bfd5040ab15980c9b435","emojiId":"001"}]}`, ""},
		{"emoji outside the text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hi","emojis":[{"index":3,"length":6,"productId":"p","emojiId":"1"}]}`, "emoji 0"},
		{"overlapping emoji", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"(a)(b)","emojis":[{"index":0,"length":3,"productId":"p","emojiId":"1"},{"index":2,"length":3,"productId":"p","emojiId":"2"}]}`, "emoji 1"},
		{"empty text", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":""}`, "1 to 5000"},
		{"text too long", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"` + strings.Repeat("あ", 5001) + `"}`, "1 to 5000"},
		{"sticker", `{"chat":{"userId":"` + alice + `"},"kind":"sticker","packageId":"446","stickerId":"1988"}`, ""},
		{"sticker without ids", `{"chat":{"userId":"` + alice + `"},"kind":"sticker"}`, "packageId"},
		{"location", `{"chat":{"userId":"` + alice + `"},"kind":"location","title":"t","latitude":35.6,"longitude":139.7}`, ""},
		{"location off the globe", `{"chat":{"userId":"` + alice + `"},"kind":"location","latitude":95,"longitude":0}`, "latitude"},
		{"postback in a group", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `"},"kind":"postback","data":"a=1"}`, ""},
		{"postback without data", `{"chat":{"userId":"` + alice + `"},"kind":"postback"}`, "postback data"},
		{"join a group", `{"chat":{"groupId":"` + group + `"},"kind":"join"}`, ""},
		{"join a one-to-one chat", `{"chat":{"userId":"` + alice + `"},"kind":"join"}`, "group or a room"},
		{"follow from a group", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `"},"kind":"follow"}`, "one-to-one"},
		{"image", `{"chat":{"userId":"` + alice + `"},"kind":"image"}`, ""},
		{"no user", `{"chat":{},"kind":"text","text":"x"}`, "userId is required"},
		{"bad user id", `{"chat":{"userId":"U1"},"kind":"text","text":"x"}`, "userId must be"},
		{"group and room", `{"chat":{"userId":"` + alice + `","groupId":"` + group + `","roomId":"R00000000000000000000000000000r01"},"kind":"text","text":"x"}`, "not both"},
		{"unknown kind", `{"chat":{"userId":"` + alice + `"},"kind":"video"}`, "kind must be"},
		{"unknown member", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"x","admin":true}`, "unknown field"},
		{"two values", `{"chat":{"userId":"` + alice + `"},"kind":"image"} {}`, "more than one"},
		{"not JSON", `<xml/>`, "invalid character"},
		{"too large", `{"chat":{"userId":"` + alice + `"},"kind":"text","text":"` + strings.Repeat("x", maxSendBody) + `"}`, "over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSend(strings.NewReader(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
			case err != nil && !errorsIsBadSend(err):
				t.Fatalf("err %v does not wrap ErrBadSend", err)
			}
		})
	}
}

func errorsIsBadSend(err error) bool { return strings.HasPrefix(err.Error(), ErrBadSend.Error()) }

// FuzzParseSend: whatever a page posts, ParseSend never panics, and what it
// accepts builds an event (a JSON object) without panicking either.
func FuzzParseSend(f *testing.F) {
	f.Add(`{"chat":{"userId":"` + alice + `"},"kind":"text","text":"hello (love)","emojis":[{"index":6,"length":6,"productId":"p","emojiId":"1"}]}`)
	f.Add(`{"chat":{"userId":"` + alice + `","roomId":"R00000000000000000000000000000r01"},"kind":"sticker","packageId":"1","stickerId":"2"}`)
	f.Add(`{"chat":{"groupId":"` + group + `"},"kind":"leave"}`)
	f.Add(`{"chat":{"userId":"` + alice + `"},"kind":"location","latitude":-90,"longitude":180,"title":"\u0000"}`)
	f.Fuzz(func(t *testing.T, in string) {
		req, err := ParseSend(strings.NewReader(in))
		if err != nil {
			return
		}
		raw := req.Event(newPlatform())
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil || obj["type"] == nil {
			t.Fatalf("accepted %q but built %s", in, raw)
		}
	})
}
