package alert

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// signatureFrames is how many frames below the panic make a crash's stack
// signature: enough to tell two bugs apart, few enough that a panic reached
// through different callers of the same code still groups.
const signatureFrames = 5

// group is the ops messages that make one card: crash reports with one
// stack signature, or notifications of one alarm.
type group struct {
	msg     opsMessage // the card's content: the first crash, or the alarm's newest state
	ids     []string   // every member's identity (SNS MessageId), for the retry key
	records []string   // the queue records the members came in, for batch item failures
	count   int
	first   time.Time // the earliest and latest member time (zero when unknown)
	last    time.Time
}

// coalesce groups a batch's ops messages, in the order each group first
// appears: crash reports by stack signature (the crashed function and the
// first frames below the panic, with their file:line), alarms by alarm name.
// A crash card shows the first report of its group; an alarm card the
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
		if !ok {
			g = &group{msg: x.msg}
			byKey[key] = g
			groups = append(groups, g)
		} else if x.msg.crash == nil && !x.msg.when.Before(g.msg.when) {
			g.msg = x.msg
		}
		seen[x.msg.id] = g
		g.ids = append(g.ids, x.msg.id)
		if x.record != "" {
			g.records = append(g.records, x.record)
		}
		g.count++
		if w := x.msg.when; !w.IsZero() {
			if g.first.IsZero() || w.Before(g.first) {
				g.first = w
			}
			if w.After(g.last) {
				g.last = w
			}
		}
	}
	return groups
}

// groupKey is what members of one group share.
func groupKey(m opsMessage) string {
	switch {
	case m.alarm != nil:
		return "alarm\x00" + m.alarm.AlarmName
	case m.held != nil:
		return "held"
	}
	return "crash\x00" + crashSignature(m)
}

// crashSignature is the crashed function and the first signatureFrames
// frames below the panic (function and file:line); a stack that is not a Go
// stack signs with the error text instead.
func crashSignature(m opsMessage) string {
	r := m.crash
	var b strings.Builder
	b.WriteString(r.Function)
	frames := topFrames(r.Stack, signatureFrames)
	for _, f := range frames {
		b.WriteString("\n" + f.fn + " " + f.loc)
	}
	if len(frames) == 0 {
		b.WriteString("\n" + r.Error)
	}
	return b.String()
}

// withCount puts a group's size and time span on its card: the badge and
// the alt text (what the push notification shows) carry "×N", and rows
// say how many and between when. A group of one is left as it is.
func (n *Notifier) withCount(c card, g *group) card {
	if g == nil || g.count < 2 {
		return c
	}
	times := "×" + strconv.Itoa(g.count)
	c.alt = truncateUTF16(strings.Replace(c.alt, "["+c.badge+"]", "["+c.badge+" "+times+"]", 1), MaxAltText)
	c.badge += " " + times
	what := "crashes"
	if g.msg.alarm != nil {
		what = "notifications (newest shown)"
	}
	rows := []field{{"Count", fmt.Sprintf("%d %s", g.count, what)}}
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
