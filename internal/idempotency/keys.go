package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
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
// idempotency table besides event records (whose key is Key). Each kind has
// its own prefix, so the kinds never collide with each other nor with a
// webhookEventId (a ULID, never containing "#").

// StepKey is the key of the result of step name of the event with key
// eventKey (bot.Once).
func StepKey(eventKey, name string) string { return "step#" + eventKey + "#" + name }

// SessionKey is the key of the conversation state of a chat (bot's
// Event.Session): a user, group or room ID.
func SessionKey(chatID string) string { return "session#" + chatID }

// EditKey is the key of the newest edit seen of message messageID in a
// chat (a group, room or user ID): the worker writes it conditionally, so a
// messageEdited event older than one already handled changes nothing.
func EditKey(chatID, messageID string) string { return "edit#" + chatID + "#" + messageID }

// DebounceKey is the key of a chat's debounce buffer for one route (its
// events waiting for the burst to end, the bursts being handled, and the
// last events handled): see the worker's debounce step.
func DebounceKey(chatID, route string) string { return "debounce#" + chatID + "#" + route }

// CrashKey is the key of the marker that says the crash of the event with
// key eventKey was reported: the worker claims it before publishing, so an
// event's panic pages once per marker lifetime, redriven or not.
func CrashKey(eventKey string) string { return "crash#" + eventKey }

// ReplyKey is the key of the record that the reply of the event with key
// eventKey was attempted (Attempts): written before the reply is sent, so
// a retry after a crash knows the reply token may have been used.
func ReplyKey(eventKey string) string { return "reply#" + eventKey }
