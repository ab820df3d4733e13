package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/eventbus"
)

// longSource is a Source longer than the default, so that whether the
// limit counts the Source's bytes moves the edge by more than a byte.
const longSource = "com.example.line.webhook.of.a.long.source.name"

// paddedEvent is a webhook body of one event: a follow without a source
// (no chat: the bus alone takes it) or a user's text message (the bus and
// the chat queue), carrying nonchars raw U+FFFF characters, which the
// chat queue's message escapes to 6 bytes each, and pad bytes of filler.
func paddedEvent(chat bool, nonchars, pad int) []byte {
	filler := strings.Repeat("\uffff", nonchars) + strings.Repeat("a", pad)
	if !chat {
		return []byte(`{"destination":"U1","events":[{"type":"follow","webhookEventId":"01EDGE","mode":"active","filler":"` + filler + `"}]}`)
	}
	return []byte(`{"destination":"U1","events":[{"type":"message","webhookEventId":"01EDGE","mode":"active",` +
		`"source":{"type":"user","userId":"U0123456789abcdef0123456789abcdef"},"message":{"type":"text","id":"1","text":"` + filler + `"}}]}`)
}

// handOffSizes runs one body through a handler and returns its status, the
// bus entry's size as EventBridge counts it (Source, DetailType, Detail)
// and the chat queue message's size (0 for none).
func handOffSizes(t *testing.T, body []byte) (status, entry, message int, escapes int, err error) {
	t.Helper()
	pub, q := &fakePublisher{}, &fakeQueue{}
	h := newHandler(t, pub, WithChatQueue(q), WithSource(longSource), WithMaxBodyBytes(4<<20))
	resp, err := h.Handle(context.Background(), "POST", sign(body), body)
	if len(pub.sent) == 1 {
		entry = len(longSource) + len(pub.sent[0].DetailType) + len(pub.sent[0].Detail)
	}
	if len(q.sent) == 1 {
		message = len(q.sent[0].Body)
		escapes = strings.Count(string(q.sent[0].Body), `\uffff`)
	}
	return resp.Status, entry, message, escapes, err
}

// The 413 limits hold at their edges: a bus entry of exactly
// eventbus.MaxEntryBytes counting the Source's bytes is accepted and one
// byte more is refused; a chat queue message of exactly
// chatqueue.MaxMessageBytes is accepted and one byte more refused, also
// when the byte over comes from escaping (U+FFFF grows from 3 bytes to 6 in
// the message): refused with nothing published, never sent over SQS's limit.
func TestEnvelopeLimitsAtTheirEdges(t *testing.T) {
	const probe = 1000 // filler of the measuring run: sizes grow byte for byte with it
	tests := []struct {
		name     string
		chat     bool
		nonchars int
		limit    int
		size     func(entry, message int) int // the size the limit applies to
	}{
		{"bus entry, Source counted", false, 0, eventbus.MaxEntryBytes, func(e, _ int) int { return e }},
		{"chat queue message", true, 0, chatqueue.MaxMessageBytes, func(_, m int) int { return m }},
		{"chat queue message grown by escaping", true, 64, chatqueue.MaxMessageBytes, func(_, m int) int { return m }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e, m, _, err := handOffSizes(t, paddedEvent(tt.chat, tt.nonchars, probe))
			if status != 200 {
				t.Fatalf("measuring run: %d %v", status, err)
			}
			pad := probe + tt.limit - tt.size(e, m) // the filler that makes the size exactly the limit
			status, e, m, escapes, err := handOffSizes(t, paddedEvent(tt.chat, tt.nonchars, pad))
			if status != 200 || tt.size(e, m) != tt.limit {
				t.Fatalf("at the limit: status %d (%v), size %d; want 200 and exactly %d", status, err, tt.size(e, m), tt.limit)
			}
			if tt.chat && escapes != tt.nonchars {
				t.Fatalf("the message carries %d escaped U+FFFF, want %d", escapes, tt.nonchars)
			}
			status, e, m, _, err = handOffSizes(t, paddedEvent(tt.chat, tt.nonchars, pad+1))
			if status != 413 || !errors.Is(err, ErrTooLarge) || e != 0 || m != 0 {
				t.Fatalf("one byte over: status %d (%v), entry %d, message %d bytes handed off; want 413 and nothing published", status, err, e, m)
			}
			if !strings.Contains(fmt.Sprint(err), fmt.Sprint(tt.limit)) {
				t.Errorf("the error %q does not name the limit %d", err, tt.limit)
			}
		})
	}
}
