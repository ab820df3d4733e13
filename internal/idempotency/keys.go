package idempotency

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/linegate/linegate/internal/channel"
)

// MaxKeyBytes is the longest key a store writes as it is: DynamoDB's limit
// on a partition key value (2048 bytes of UTF-8). A longer key is stored as
// its digest (see StorageKey).
const MaxKeyBytes = 2048

// hashedPrefix starts the stored form of a key over MaxKeyBytes. It differs
// from Key's "sha256:" (a digest of an event's bytes), so the two kinds of
// digest never meet.
const hashedPrefix = "hashed:"

// StorageKey is the key a store writes for key: key itself when it fits in
// MaxKeyBytes, otherwise "hashed:" followed by the hex SHA-256 of key (71
// bytes). Every store applies it to every key it is given — event records,
// step results, sessions and crash markers alike — so a webhookEventId of
// any length works everywhere, and the memory store behaves as DynamoDB
// does. Two distinct keys share a stored key only by a SHA-256 collision.
func StorageKey(key string) string {
	if len(key) <= MaxKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// The key builders below name every kind of item linegate keeps in the
// idempotency table besides event records (whose key is EventKey). Each
// kind has its own prefix, so the kinds never collide with each other nor
// with a webhookEventId (a ULID, never containing "#").
//
// Everything is scoped by channel (channel.Scope): an event's key by its
// channel, so an event's steps, crash marker and reply attempt (built from
// the event's key) are its channel's too, and a chat's items (session,
// edits, debounce buffers) by the chat's channel, since one provider's
// user IDs are the same in all its channels. The default channel's keys
// are what a stack without channels wrote: an upgrade keeps every session
// and completed marker.

// EventKey is the key of an event of channel ch (channel.Default for the
// default channel): Key, scoped to the channel.
func EventKey(ch, webhookEventID string, rawEvent []byte) string {
	return channel.Scope(ch, Key(webhookEventID, rawEvent))
}

// StepKey is the key of the result of step name of the event with key
// eventKey (EventKey; bot.Once).
func StepKey(eventKey, name string) string { return "step#" + eventKey + "#" + name }

// SessionKey is the key of the conversation state of a chat of channel ch
// (bot's Event.Session): a user, group or room ID.
func SessionKey(ch, chatID string) string { return "session#" + channel.Scope(ch, chatID) }

// EditKey is the key of the newest edit seen of message messageID in a
// chat of channel ch (a group, room or user ID): the worker writes it
// conditionally, so a messageEdited event older than one already handled
// changes nothing.
func EditKey(ch, chatID, messageID string) string {
	return "edit#" + channel.Scope(ch, chatID) + "#" + messageID
}

// DebounceKey is the key of a chat's debounce buffer for one route, in
// channel ch (its events waiting for the burst to end, the bursts being
// handled, and the last events handled): see the worker's debounce step.
func DebounceKey(ch, chatID, route string) string {
	return "debounce#" + channel.Scope(ch, chatID) + "#" + route
}

// CrashKey is the key of the marker that says the crash of the event with
// key eventKey (EventKey) was reported: the worker claims it before publishing, so an
// event's panic pages once per marker lifetime, redriven or not.
func CrashKey(eventKey string) string { return "crash#" + eventKey }

// ReplyKey is the key of the record that the reply of the event with key
// eventKey (EventKey) was attempted (Attempts): written before the reply is sent, so
// a retry after a crash knows the reply token may have been used.
func ReplyKey(eventKey string) string { return "reply#" + eventKey }
