// Package postback signs and verifies the data of the buttons linegate puts
// on its own alert cards (Redrive, Silence 1 h, Acknowledge, Resend held).
// The data names an action and its target, carries an expiry, and ends in
// an HMAC-SHA256 over all of it with a key only the stack knows (a Secrets
// Manager secret the stack generated; a random key in `linegate local`).
// The notifier signs; the worker verifies before acting, so a postback that
// was forged, altered, or is past its expiry does nothing. Data that does
// not start with Prefix is not linegate's and is left to the bot.
package postback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every data string linegate signs ("lg1", version 1).
const Prefix = "lg1."

// MaxData is LINE's limit on a postback action's data (characters).
const MaxData = 300

// Actions the cards offer.
const (
	Redrive    = "redrive"     // move a DLQ's messages back to their source queue; target: the DLQ's name
	Silence    = "silence"     // mute an alarm's notifications for an hour; target: the alarm's name
	Ack        = "ack"         // acknowledge an alarm; target: the alarm's name
	ResendHeld = "resend-held" // send the results held for the monthly limit; target: "held"
)

// macLen is how many bytes of the HMAC the data keeps (128 bits).
const macLen = 16

// Errors Verify returns; callers branch on them to log why a postback was
// refused.
var (
	// ErrNotOurs: the data does not start with Prefix (the bot's own postback).
	ErrNotOurs = errors.New("postback: not linegate's data")
	// ErrMalformed: the data starts with Prefix but is not well formed.
	ErrMalformed = errors.New("postback: malformed data")
	// ErrForged: the signature does not match (forged or altered data).
	ErrForged = errors.New("postback: signature does not verify")
	// ErrExpired: the data was signed for a time that has passed.
	ErrExpired = errors.New("postback: expired")
	// ErrTooLong: signed data would exceed LINE's 300 characters.
	ErrTooLong = errors.New("postback: data over LINE's 300 characters")
)

// Command is what a verified postback asks for.
type Command struct {
	Action  string
	Target  string
	Expires time.Time
	// ID identifies this signed data (its MAC): a command is carried out
	// once per ID.
	ID string
}

// Signer signs and verifies with one key.
type Signer struct {
	key []byte
	now func() time.Time
}

// NewSigner returns a Signer for key (at least 16 bytes); now is the clock
// (nil: time.Now).
func NewSigner(key []byte, now func() time.Time) (*Signer, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("postback: key of %d bytes, want at least 16", len(key))
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{key: append([]byte(nil), key...), now: now}, nil
}

// Sign returns the data of a button asking for action on target, valid for
// ttl: "lg1.<action>.<base64url target>.<unix expiry>.<base64url MAC>".
func (s *Signer) Sign(action, target string, ttl time.Duration) (string, error) {
	if action == "" || strings.ContainsAny(action, ".") {
		return "", fmt.Errorf("postback: bad action %q", action)
	}
	body := Prefix + action + "." + base64.RawURLEncoding.EncodeToString([]byte(target)) + "." +
		strconv.FormatInt(s.now().Add(ttl).Unix(), 10)
	data := body + "." + s.mac(body)
	if len(data) > MaxData {
		return "", fmt.Errorf("%w: %d", ErrTooLong, len(data))
	}
	return data, nil
}

// Verify checks data and returns its command. The MAC is compared in
// constant time before anything else of the data is trusted.
func (s *Signer) Verify(data string) (Command, error) {
	if !strings.HasPrefix(data, Prefix) {
		return Command{}, ErrNotOurs
	}
	i := strings.LastIndexByte(data, '.')
	if i < len(Prefix) || len(data) > MaxData {
		return Command{}, ErrMalformed
	}
	body, mac := data[:i], data[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac(body))) {
		return Command{}, ErrForged
	}
	parts := strings.Split(strings.TrimPrefix(body, Prefix), ".")
	if len(parts) != 3 {
		return Command{}, ErrMalformed
	}
	target, err := base64.RawURLEncoding.DecodeString(parts[1])
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || err2 != nil {
		return Command{}, ErrMalformed
	}
	c := Command{Action: parts[0], Target: string(target), Expires: time.Unix(exp, 0), ID: mac}
	if !s.now().Before(c.Expires) {
		return c, ErrExpired
	}
	return c, nil
}

func (s *Signer) mac(body string) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:macLen])
}
