package lineplatform

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"
	"github.com/oklog/ulid/v2"

	"github.com/linegate/linegate/internal/golden"
)

var fixedNow = time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)

// deterministic returns a platform whose builders' output is reproducible.
func deterministic(opts ...Option) *Platform {
	base := []Option{
		WithClock(func() time.Time { return fixedNow }),
		WithEntropy(rand.NewChaCha8([32]byte{'l', 'i', 'n', 'e', 'g', 'a', 't', 'e'})),
	}
	return New("http://unused.invalid/webhook", []byte("secret"), append(base, opts...)...)
}

const (
	user  = "U206d25c2ea6bd87c17655609a1c37cb8"
	group = "Ca56f94637cc4347f90a25382909b24b9"
	room  = "Rb1e2d3c4f5a6b7c8d9e0f1a2b3c4d5e6"
)

// builderCases lists every builder: the golden file, the LINE sample its
// shape must match, and a check of the SDK's decoding.
var builderCases = []struct {
	name   string
	build  func(p *Platform) json.RawMessage
	sample string // testdata/samples file with LINE's shape
	check  func(t *testing.T, ev webhook.EventInterface)
}{
	{
		name:   "text",
		build:  func(p *Platform) json.RawMessage { return p.Text(user, "Hello <b>&</b> 世界") },
		sample: "message-text-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			txt, ok := m.Message.(webhook.TextMessageContent)
			if !ok || txt.Text != "Hello <b>&</b> 世界" || txt.QuoteToken == "" || len(txt.Id) != 18 {
				t.Fatalf("message = %#v", m.Message)
			}
			src, ok := m.Source.(webhook.UserSource)
			if !ok || src.UserId != user {
				t.Fatalf("source = %#v", m.Source)
			}
			if m.ReplyToken == "" || m.Mode != webhook.EventMode_ACTIVE || m.DeliveryContext.IsRedelivery {
				t.Fatalf("event = %#v", m)
			}
		},
	},
	{
		name:   "group_text",
		build:  func(p *Platform) json.RawMessage { return p.GroupText(group, user, "hi all") },
		sample: "message-text-group-redelivery.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			src, ok := m.Source.(webhook.GroupSource)
			if !ok || src.GroupId != group || src.UserId != user {
				t.Fatalf("source = %#v", m.Source)
			}
			if txt, ok := m.Message.(webhook.TextMessageContent); !ok || txt.Text != "hi all" {
				t.Fatalf("message = %#v", m.Message)
			}
		},
	},
	{
		name:   "follow",
		build:  func(p *Platform) json.RawMessage { return p.Follow(user) },
		sample: "follow-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			f := as[webhook.FollowEvent](t, ev)
			if f.ReplyToken == "" || f.Follow == nil || f.Follow.IsUnblocked {
				t.Fatalf("event = %#v", f)
			}
		},
	},
	{
		name:   "follow_unblocked",
		build:  func(p *Platform) json.RawMessage { return p.Follow(user, Unblocked()) },
		sample: "follow-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			f, ok := ev.(webhook.FollowEvent)
			if !ok || f.Follow == nil || !f.Follow.IsUnblocked {
				t.Fatalf("decoded %#v; want an unblock follow event", ev)
			}
		},
	},
	{
		name:   "unfollow",
		build:  func(p *Platform) json.RawMessage { return p.Unfollow(user) },
		sample: "unfollow-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			u := as[webhook.UnfollowEvent](t, ev)
			if src, ok := u.Source.(webhook.UserSource); !ok || src.UserId != user {
				t.Fatalf("source = %#v", u.Source)
			}
		},
	},
	{
		name:   "postback",
		build:  func(p *Platform) json.RawMessage { return p.Postback(user, "action=buy&item=1") },
		sample: "postback-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			pb := as[webhook.PostbackEvent](t, ev)
			if pb.Postback == nil || pb.Postback.Data != "action=buy&item=1" || pb.ReplyToken == "" {
				t.Fatalf("event = %#v", pb)
			}
		},
	},
	{
		name: "text_emojis",
		build: func(p *Platform) json.RawMessage {
			return p.TextFrom(Source{UserID: user}, "Hello, world! (love)", []Emoji{{Index: 14, Length: 6, ProductID: "5ac1bfd5040ab15980c9b435", EmojiID: "001"}})
		},
		sample: "message-text-emojis-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			txt, ok := m.Message.(webhook.TextMessageContent)
			if !ok || len(txt.Emojis) != 1 || txt.Emojis[0].Index != 14 || txt.Emojis[0].Length != 6 || txt.Emojis[0].EmojiId != "001" {
				t.Fatalf("message = %#v", m.Message)
			}
		},
	},
	{
		name: "sticker_room",
		build: func(p *Platform) json.RawMessage {
			return p.StickerFrom(Source{RoomID: room, UserID: user}, "446", "1988")
		},
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			st, ok := m.Message.(webhook.StickerMessageContent)
			if !ok || st.PackageId != "446" || st.StickerId != "1988" || st.StickerResourceType != "STATIC" || st.QuoteToken == "" {
				t.Fatalf("message = %#v", m.Message)
			}
			if src, ok := m.Source.(webhook.RoomSource); !ok || src.RoomId != room || src.UserId != user {
				t.Fatalf("source = %#v", m.Source)
			}
		},
	},
	{
		name:   "image",
		build:  func(p *Platform) json.RawMessage { return p.ImageFrom(Source{UserID: user}) },
		sample: "message-image-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			img, ok := m.Message.(webhook.ImageMessageContent)
			if !ok || img.ContentProvider == nil || img.ContentProvider.Type != "line" {
				t.Fatalf("message = %#v", m.Message)
			}
		},
	},
	{
		name: "location",
		build: func(p *Platform) json.RawMessage {
			return p.LocationFrom(Source{UserID: user}, "hello", "〒150-0002 東京都渋谷区渋谷２丁目２１−１", 35.65910807942215, 139.70372892916203)
		},
		sample: "message-location-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m := as[webhook.MessageEvent](t, ev)
			loc, ok := m.Message.(webhook.LocationMessageContent)
			if !ok || loc.Title != "hello" || loc.Latitude != 35.65910807942215 || loc.Longitude != 139.70372892916203 {
				t.Fatalf("message = %#v", m.Message)
			}
		},
	},
	{
		name:   "join",
		build:  func(p *Platform) json.RawMessage { return p.Join(Source{GroupID: group, UserID: user}) },
		sample: "join-group.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			j := as[webhook.JoinEvent](t, ev)
			if src, ok := j.Source.(webhook.GroupSource); !ok || src.GroupId != group || src.UserId != "" || j.ReplyToken == "" {
				t.Fatalf("event = %#v", j)
			}
		},
	},
	{
		name:   "leave",
		build:  func(p *Platform) json.RawMessage { return p.Leave(Source{GroupID: group}) },
		sample: "leave-group.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			l := as[webhook.LeaveEvent](t, ev)
			if src, ok := l.Source.(webhook.GroupSource); !ok || src.GroupId != group {
				t.Fatalf("event = %#v", l)
			}
		},
	},
	{
		name: "postback_group",
		build: func(p *Platform) json.RawMessage {
			return p.PostbackFrom(Source{GroupID: group, UserID: user}, "menu:order=tea")
		},
		check: func(t *testing.T, ev webhook.EventInterface) {
			pb := as[webhook.PostbackEvent](t, ev)
			if src, ok := pb.Source.(webhook.GroupSource); !ok || src.UserId != user || pb.Postback.Data != "menu:order=tea" {
				t.Fatalf("event = %#v", pb)
			}
		},
	},
	{
		name:   "text_standby",
		build:  func(p *Platform) json.RawMessage { return p.Text(user, "observed", Standby()) },
		sample: "message-text-user.json",
		check: func(t *testing.T, ev webhook.EventInterface) {
			m, ok := ev.(webhook.MessageEvent)
			if !ok || m.Mode != webhook.EventMode_STANDBY || m.ReplyToken != "" {
				t.Fatalf("decoded %#v; want a standby message without reply token", ev)
			}
		},
	},
}

// as is the decoded event as a T, failing t when it is another type.
func as[T webhook.EventInterface](t *testing.T, ev webhook.EventInterface) T {
	t.Helper()
	e, ok := ev.(T)
	if !ok {
		t.Fatalf("decoded %T; want %T", ev, e)
	}
	return e
}

func TestBuildersGolden(t *testing.T) {
	for _, tc := range builderCases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.build(deterministic())
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".json"), append(got, '\n'))
		})
	}
}

func TestBuildersDecodeWithLineSDK(t *testing.T) {
	for _, tc := range builderCases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.build(New("http://unused.invalid", nil))
			ev, err := webhook.UnmarshalEvent(raw)
			if err != nil {
				t.Fatalf("UnmarshalEvent: %v\n%s", err, raw)
			}
			tc.check(t, ev)
		})
	}
}

// TestBuildersMatchLineShape compares every builder's members, at every
// depth, with LINE's real webhook body of the same kind: nothing LINE sends
// is missing, and nothing is added beyond what webhook.yml requires.
func TestBuildersMatchLineShape(t *testing.T) {
	// Members webhook.yml requires that the older samples predate, and the
	// markAsReadToken LINE has put in every message event since 2025-11-05
	// (webhook.yml's MessageContent types; its example body is on
	// https://developers.line.biz/en/docs/messaging-api/mark-as-read).
	allowedExtra := map[string]bool{"message.quoteToken": true, "follow": true, "follow.isUnblocked": true,
		"message.contentProvider": true, "message.contentProvider.type": true, "message.markAsReadToken": true}
	for _, tc := range builderCases {
		if tc.sample == "" {
			continue // no real body of that kind: its shape is checked by the SDK's decoding above
		}
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "samples", tc.sample))
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Events []json.RawMessage }
			if err := json.Unmarshal(raw, &body); err != nil || len(body.Events) != 1 {
				t.Fatalf("sample %s: %v", tc.sample, err)
			}
			want := paths(t, body.Events[0])
			got := paths(t, tc.build(New("http://unused.invalid", nil)))
			standby := strings.HasSuffix(tc.name, "_standby")
			for p := range want {
				if !got[p] && !(standby && p == "replyToken") {
					t.Errorf("member %q of LINE's %s is missing", p, tc.sample)
				}
			}
			for p := range got {
				if !want[p] && !allowedExtra[p] {
					t.Errorf("member %q is not in LINE's %s", p, tc.sample)
				}
			}
		})
	}
}

// paths lists the dotted member paths of a JSON object.
func paths(t *testing.T, raw []byte) map[string]bool {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out[prefix+k] = true
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", v)
	return out
}

func TestReplyTokenHook(t *testing.T) {
	type minted struct {
		token string
		at    time.Time
	}
	var got []minted
	p := deterministic(WithReplyTokenHook(func(token string, at time.Time) { got = append(got, minted{token, at}) }))
	var want []string
	for _, raw := range []json.RawMessage{
		p.Text(user, "a"), p.GroupText(group, user, "b"), p.Follow(user), p.Postback(user, "d"),
		p.Unfollow(user), p.Text(user, "standby", Standby()),
	} {
		var e struct{ ReplyToken string }
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if e.ReplyToken != "" {
			want = append(want, e.ReplyToken)
		}
	}
	if len(want) != 4 || len(got) != 4 {
		t.Fatalf("minted %d tokens, hook saw %d; want 4 and 4 (none for unfollow or standby)", len(want), len(got))
	}
	for i := range want {
		if got[i].token != want[i] || !got[i].at.Equal(fixedNow) {
			t.Errorf("hook %d = %v; want %s at %v", i, got[i], want[i], fixedNow)
		}
		if len(want[i]) != 32 || strings.Trim(want[i], "0123456789abcdef") != "" {
			t.Errorf("reply token %q; want 32 hex chars", want[i])
		}
	}
}

func TestEventIDsUniqueUnderConcurrency(t *testing.T) {
	const n = 10_000
	// One fixed millisecond: uniqueness rests on the monotonic entropy alone.
	p := New("http://unused.invalid", nil, WithClock(func() time.Time { return fixedNow }))
	ids := make([]string, n)
	tokens := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				var e struct{ WebhookEventID, ReplyToken string }
				if err := json.Unmarshal(p.Text(user, "x"), &e); err != nil {
					t.Error(err)
					return
				}
				ids[i], tokens[i] = e.WebhookEventID, e.ReplyToken
			}
		}()
	}
	wg.Wait()
	seen := make(map[string]bool, n)
	seenTok := make(map[string]bool, n)
	for i, id := range ids {
		u, err := ulid.ParseStrict(id)
		if err != nil {
			t.Fatalf("id %d %q is not a ULID: %v", i, id, err)
		}
		if u.Time() != ulid.Timestamp(fixedNow) {
			t.Fatalf("id %q carries time %d; want the platform clock's %d", id, u.Time(), ulid.Timestamp(fixedNow))
		}
		if seen[id] {
			t.Fatalf("duplicate webhookEventId %q", id)
		}
		seen[id] = true
		if seenTok[tokens[i]] {
			t.Fatalf("duplicate reply token %q", tokens[i])
		}
		seenTok[tokens[i]] = true
	}
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	// Monotonic: IDs minted one after another sort in minting order.
	a, b := p.Text(user, "1"), p.Text(user, "2")
	var ea, eb struct{ WebhookEventID string }
	_ = json.Unmarshal(a, &ea)
	_ = json.Unmarshal(b, &eb)
	if !(ea.WebhookEventID < eb.WebhookEventID) || !(sorted[n-1] < ea.WebhookEventID) {
		t.Fatalf("ULIDs are not monotonic: %s, %s after %s", ea.WebhookEventID, eb.WebhookEventID, sorted[n-1])
	}
}

func TestBody(t *testing.T) {
	p := deterministic()
	ev1, ev2 := p.Text(user, "a"), p.Follow(user)
	tests := []struct {
		name   string
		events []json.RawMessage
		want   string
	}{
		{"verify request", nil, `{"destination":"Uabc","events":[]}`},
		{"one", []json.RawMessage{ev1}, `{"destination":"Uabc","events":[` + string(ev1) + `]}`},
		{"two verbatim", []json.RawMessage{ev1, ev2}, `{"destination":"Uabc","events":[` + string(ev1) + `,` + string(ev2) + `]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Body("Uabc", tt.events...)
			if string(got) != tt.want {
				t.Fatalf("Body =\n%s\nwant\n%s", got, tt.want)
			}
			var cb webhook.CallbackRequest
			if err := json.Unmarshal(got, &cb); err != nil {
				t.Fatalf("SDK cannot parse the body: %v", err)
			}
			if cb.Destination != "Uabc" || len(cb.Events) != len(tt.events) {
				t.Fatalf("SDK parsed %q with %d events", cb.Destination, len(cb.Events))
			}
		})
	}
}
