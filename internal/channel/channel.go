// Package channel names the LINE channels (official accounts) one stack
// serves and scopes by channel everything that is keyed by a chat or an
// event: idempotency keys, Once steps, sessions, edits, debounce buffers,
// chat-queue message groups and deduplication ids, and push retry keys.
//
// A stack has one default channel, configured as a single-channel stack
// always was, and any number of named ones added by configuration. The
// default channel's name is "" wherever a channel is carried (envelopes,
// keys, held results): so a stack that had one channel keeps every key,
// message group and envelope byte for byte, and records written before an
// upgrade belong to the default channel. A named channel's keys are its
// default-channel key behind a prefix ("ch:NAME/") that no key of the
// default channel can start with: a webhookEventId is a ULID, a digest key
// starts with "sha256:" or "hashed:", a chat ID with U, C or R.
package channel

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Default is the default channel's name in envelopes, keys and held
// results: none.
const Default = ""

// DefaultLabel is how the default channel is spoken of where a name must be
// shown or typed (the CLI's --channel, the console, logs, doctor's report).
const DefaultLabel = "default"

// ErrName marks a channel name that is not one.
var ErrName = errors.New("channel: invalid name")

// ErrUnknown marks a channel the process was not configured with.
var ErrUnknown = errors.New("channel: not configured")

// name is a channel's name: 1 to 32 lowercase letters, digits and inner
// hyphens. It is part of a URL path (/webhook/NAME), of SSM parameter
// names, of DynamoDB keys and SQS message groups, and, upper-cased with
// hyphens as underscores, of environment variable names.
var name = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$`)

// Valid checks a named channel's name; "default" is reserved for the
// default channel.
func Valid(n string) error {
	switch {
	case n == DefaultLabel:
		return fmt.Errorf("%w: %q names the default channel, which needs no name", ErrName, n)
	case !name.MatchString(n):
		return fmt.Errorf("%w: %q (use 1 to 32 lowercase letters, digits and hyphens, starting and ending with a letter or digit)", ErrName, n)
	}
	return nil
}

// Parse reads a channel as a person types it: "" and "default" are the
// default channel, anything else must be a valid name.
func Parse(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == DefaultLabel {
		return Default, nil
	}
	if err := Valid(s); err != nil {
		return "", err
	}
	return s, nil
}

// Label is how channel is shown: its name, or "default".
func Label(channel string) string {
	if channel == Default {
		return DefaultLabel
	}
	return channel
}

// EnvSuffix is the suffix of a named channel's environment variables:
// its name upper-cased, hyphens as underscores (LINE_CHANNEL_SECRET_B2B
// for the channel "b2b", LINE_CHANNEL_SECRET_BRAND_TW for "brand-tw").
func EnvSuffix(channel string) string {
	return strings.ReplaceAll(strings.ToUpper(channel), "-", "_")
}

// prefix starts every named channel's scoped key. No key of the default
// channel starts with it (see the package comment).
const prefix = "ch:"

// Scope is key scoped to channel: key itself for the default channel,
// "ch:NAME/" and key for a named one. Two channels' scoped keys never
// meet, and the default channel's are what they were before channels.
func Scope(channel, key string) string {
	if channel == Default {
		return key
	}
	return prefix + channel + "/" + key
}

// Of is the channel a scoped key belongs to (Default for an unscoped
// one), and the key within it.
func Of(scoped string) (channel, key string) {
	rest, ok := strings.CutPrefix(scoped, prefix)
	if !ok {
		return Default, scoped
	}
	ch, key, ok := strings.Cut(rest, "/")
	if !ok || !name.MatchString(ch) {
		return Default, scoped
	}
	return ch, key
}
