package alert

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// LINE Messaging API limits the rendered messages respect. LINE counts text
// in UTF-16 code units, and action labels in characters.
const (
	// MaxMessagesPerPush is the most messages one push request may carry.
	MaxMessagesPerPush = 5
	// MaxAltText is the longest Flex altText (UTF-16 code units).
	MaxAltText = 1500
	// MaxTextMessage is the longest text message (UTF-16 code units).
	MaxTextMessage = 5000
	// MaxURI is the longest URI action uri.
	MaxURI = 1000
	// MaxLabel is the longest action label (characters).
	MaxLabel = 20
	// MaxFlexBytes caps the JSON of one Flex message. LINE allows 30 KB per
	// bubble; the whole message (wrapper and altText included) is measured
	// against 30,000 bytes, so the bubble alone is always below the limit.
	MaxFlexBytes = 30_000
)

// Field caps of our own: a card is read on a phone.
const (
	maxTitle       = 200 // alarm name (CloudWatch allows 255) or function
	maxReason      = 500 // NewStateReason
	maxDescription = 300 // AlarmDescription
	maxError       = 500 // crash error text
	maxValue       = 200 // one row value
	maxFrames      = 8   // stack frames on a crash card
	maxFrameLine   = 160 // one function or file:line of a frame
	maxDimensions  = 5   // dimension rows on an alarm card
)

const ellipsis = "…"

// truncateUTF16 shortens s to at most n UTF-16 code units, ending it with "…"
// when it cut, never splitting a character. Invalid UTF-8 becomes U+FFFD.
func truncateUTF16(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.ValidString(s) && utf16Len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf16Len(s) <= n {
		return s
	}
	var b strings.Builder
	units := 0
	for _, r := range s {
		w := utf16.RuneLen(r)
		if units+w > n-1 { // keep one unit for the ellipsis
			break
		}
		b.WriteRune(r)
		units += w
	}
	b.WriteString(ellipsis)
	return b.String()
}

// truncateRunes shortens s to at most n characters, ending it with "…" when
// it cut. Used for action labels, which LINE counts in characters.
func truncateRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	rs := []rune(s)
	return string(rs[:n-1]) + ellipsis
}

// utf16Len is the length of s in UTF-16 code units, as LINE counts it.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// oneLine folds line breaks and tabs into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
