package chatqueue

import (
	"strings"
	"testing"
)

// A chat's message group and an event's deduplication id are what they
// were for the default channel, and apart for each named channel: two
// channels' users with one ID are two chats, and one webhookEventId on two
// channels is two messages. Every id is one SQS takes.
func TestChannelIDs(t *testing.T) {
	const user = "U0123456789abcdef0123456789abcdef"
	const id = "01HZXYZABCDEFGHJKMNPQRSTVW"
	raw := []byte(`{"type":"unfollow"}`)
	long := strings.Repeat("x", 200)
	tests := []struct {
		name      string
		got, want string
	}{
		{"default group", ChannelGroupID("", user), GroupID(user)},
		{"default dedup", ChannelDedupID("", id, raw), DedupID(id, raw)},
		{"default dedup without id", ChannelDedupID("", "", raw), DedupID("", raw)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	ids := map[string]string{}
	for _, ch := range []string{"", "a", "b", "brand-tw"} {
		for what, v := range map[string]string{
			"group":         ChannelGroupID(ch, user),
			"long group":    ChannelGroupID(ch, long),
			"dedup":         ChannelDedupID(ch, id, raw),
			"dedup no id":   ChannelDedupID(ch, "", raw),
			"dedup long id": ChannelDedupID(ch, long, raw),
		} {
			if !validID(v) {
				t.Errorf("channel %q %s %q: SQS refuses it", ch, what, v)
			}
			kind := what[:5] // groups and deduplication ids are apart in SQS
			if prev, dup := ids[kind+v]; dup {
				t.Errorf("channel %q %s %q is also %s", ch, what, v, prev)
			}
			ids[kind+v] = ch + " " + what
		}
	}
}
