package alert

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// group is the ops messages that make one card: crash reports with one
// stack signature (and the dead-letter notices of the events that crashed
// so), dead-letter notices of one DLQ, or notifications of one alarm.
type group struct {
	msg     opsMessage // the card's content: the first crash or dead letter, or the alarm's newest state
	ids     []string   // every member's identity (SNS MessageId), for the retry key
	records []string   // the queue records the members came in, for batch item failures
	count   int        // members, and reports carried from the ledger (held since the last card)
	first   time.Time  // the earliest and latest member time (zero when unknown)
	last    time.Time
	// crashes and deadLetters count the members (and carried reports) by
	// kind; a dead letter of an event that crashed counts in both the
	// group of its crash and in deadLetters.
	crashes, deadLetters int
	// since is the time of the signature's previous card, when this card
	// carries reports held since then (zero otherwise).
	since time.Time
	// digest marks a card the sweep sends for reports held in the window.
	digest bool
	// key is the group's key in the paging ledger (ledgerKey).
	key string
	// dlqs counts the members that are dead-letter notices, by DLQ name.
	dlqs map[string]int
}

// coalesce groups a batch's ops messages, in the order each group first
// appears: crash reports by stack signature (the crashed function and the
// first frames below the panic, with their file:line) together with the
// dead-letter notices that carry that signature; other dead-letter notices
// by DLQ; alarms by alarm name. A crash card shows the first crash report
// of its group (the first notice when there is none); an alarm card the
// group's newest state (by state change time; the later record on a tie).
// A message delivered twice in one batch (SQS and SNS deliver at least
// once) counts once; both of its records share the card's fate.
func coalesce(in []inbound) []*group {
	var groups []*group
	byKey := map[string]*group{}
	seen := map[string]*group{}
	for _, x := range in {
		if g, dup := seen[x.msg.id]; dup {
			if x.record != "" {
				g.records = append(g.records, x.record)
			}
			continue
		}
		key := groupKey(x.msg)
		g, ok := byKey[key]
		switch {
		case !ok:
			g = &group{msg: x.msg, key: ledgerKey(x.msg), dlqs: map[string]int{}}
			byKey[key] = g
			groups = append(groups, g)
		case x.msg.alarm != nil && !x.msg.when.Before(g.msg.when):
			g.msg = x.msg
		case x.msg.crash != nil && g.msg.crash == nil:
			g.msg = x.msg // a crash report says more than a dead-letter notice
		}
		seen[x.msg.id] = g
		g.ids = append(g.ids, x.msg.id)
		if x.record != "" {
			g.records = append(g.records, x.record)
		}
		g.add(x.msg, 1)
	}
	return groups
}

// add counts n reports like m in g, and widens its time span.
func (g *group) add(m opsMessage, n int) {
	g.count += n
	switch {
	case m.crash != nil:
		g.crashes += n
	case m.deadLetter != nil:
		g.deadLetters += n
		g.dlqs[m.deadLetter.Queue] += n
	case m.unannounced != nil:
		g.deadLetters += n
	}
	g.span(m.when, m.when)
}

// span widens g's time span to [from, to] (zero times are unknown).
func (g *group) span(from, to time.Time) {
	if !from.IsZero() && (g.first.IsZero() || from.Before(g.first)) {
		g.first = from
	}
	if to.After(g.last) {
		g.last = to
	}
}

// foldOnly reports whether every member is a dead-letter notice of an
// event that crashed: with its crash already carded in the window, such a
// group adds to that card's count and sends nothing of its own.
func (g *group) foldOnly() bool {
	return g.crashes == 0 && g.msg.deadLetter != nil && g.msg.deadLetter.Signature != ""
}

// groupKey is what members of one group share.
func groupKey(m opsMessage) string {
	switch {
	case m.alarm != nil:
		return "alarm\x00" + m.alarm.AlarmName
	case m.held != nil:
		return "held"
	case m.deadLetter != nil && m.deadLetter.Signature != "":
		return "crash\x00" + m.deadLetter.Signature
	case m.deadLetter != nil:
		return "dlq\x00" + m.deadLetter.Queue
	case m.unannounced != nil:
		return "dlq\x00" + m.unannounced.Queue
	}
	return "crash\x00" + crashSignature(m)
}

// ledgerKey is a group's key in the paging ledger: groupKey, with a stack
// signature (up to a few kilobytes) replaced by its digest.
func ledgerKey(m opsMessage) string {
	k := groupKey(m)
	if sig, ok := strings.CutPrefix(k, "crash\x00"); ok {
		sum := sha256.Sum256([]byte(sig))
		return "crash:" + hex.EncodeToString(sum[:12])
	}
	return strings.ReplaceAll(k, "\x00", ":")
}

// crashSignature is the crash report's stack signature (crash.Signature).
func crashSignature(m opsMessage) string { return m.crash.Signature() }

// withCount puts a group's size and time span on its card: the badge and
// the alt text (what the push notification shows) carry "×N", and rows
// say how many, of what, and between when. A group of one is left as it
// is, unless it carries a count since an earlier card.
func (n *Notifier) withCount(c card, g *group) card {
	if g == nil || (g.count < 2 && g.since.IsZero()) {
		return c
	}
	// The badge counts what the card is about: crashes on a crash card,
	// dead letters on a dead-letter card (the Count row says both).
	shown := g.count
	switch {
	case g.msg.crash != nil && g.crashes > 0:
		shown = g.crashes
	case (g.msg.deadLetter != nil || g.msg.unannounced != nil) && g.crashes == 0 && g.deadLetters > 0:
		shown = g.deadLetters
	}
	times := "×" + strconv.Itoa(shown)
	c.alt = truncateUTF16(strings.Replace(c.alt, "["+c.badge+"]", "["+c.badge+" "+times+"]", 1), MaxAltText)
	c.badge += " " + times
	var what string
	switch {
	case g.msg.alarm != nil:
		what = fmt.Sprintf("%d notifications (newest shown)", g.count)
	case g.crashes > 0 && g.deadLetters > 0:
		what = fmt.Sprintf("%d crashes, %d dead-lettered", g.crashes, g.deadLetters)
	case g.crashes > 0:
		what = fmt.Sprintf("%d crashes", g.crashes)
	case g.deadLetters > 0:
		what = fmt.Sprintf("%d dead letters", g.deadLetters)
	default:
		what = fmt.Sprintf("%d notices", g.count)
	}
	if !g.since.IsZero() {
		what += " since the card of " + n.formatTime(g.since)
	}
	rows := []field{{"Count", what}}
	if !g.first.IsZero() {
		rows = append(rows, field{"Span", n.span(g.first, g.last)})
	}
	c.rows = append(rows, c.rows...)
	return c
}

// span shows a time range, the second time without its date when both fall
// on the same day.
func (n *Notifier) span(from, to time.Time) string {
	a, b := from.In(n.loc), to.In(n.loc)
	if a.Format("2006-01-02") == b.Format("2006-01-02") {
		return a.Format("2006-01-02 15:04:05") + " – " + b.Format("15:04:05 MST")
	}
	return n.formatTime(a) + " – " + n.formatTime(b)
}
