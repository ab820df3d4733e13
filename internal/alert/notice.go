package alert

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/postback"
)

// Notice is a card the stack raises itself rather than from the ops topic:
// the quota governor's quota warning and its held-results reminder.
type Notice struct {
	// ID identifies the notice in retry keys: a notice with the same ID is
	// delivered to an operator once (LINE refuses a repeated retry key for
	// 24 h), so a governor that runs every few minutes pages once.
	ID string
	// Level colours the header: "ALARM", "WARN" or "OK".
	Level    string
	Badge    string
	Title    string
	Headline string
	Detail   string
	Rows     []Row
	// ResendHeld adds the signed "Resend held" button.
	ResendHeld bool
}

// Row is one label and value on a card.
type Row struct{ Label, Value string }

// Notify renders each notice and pushes it to every operator (up to five
// per push), with retry keys derived from the notices' IDs. A failed push
// is returned (joined), the others are still attempted.
func (n *Notifier) Notify(ctx context.Context, notices ...Notice) error {
	var msgs []rendered
	for _, nt := range notices {
		if nt.ID == "" {
			return errors.New("alert: a notice needs an ID")
		}
		c := card{
			badge: truncateUTF16(oneLine(nt.Badge), 40), color: levelColor(nt.Level),
			title: truncateUTF16(oneLine(nt.Title), maxTitle), headline: truncateUTF16(nt.Headline, maxError),
			detail: truncateUTF16(nt.Detail, maxReason),
			alt:    truncateUTF16(oneLine(fmt.Sprintf("[%s] %s: %s", nt.Badge, nt.Title, nt.Headline)), MaxAltText),
		}
		for _, r := range nt.Rows {
			c.rows = append(c.rows, field{truncateUTF16(r.Label, 30), truncateUTF16(oneLine(r.Value), maxValue)})
		}
		c.rows = append(c.rows, field{"Time", n.formatTime(time.Now())})
		if nt.ResendHeld {
			c.buttons = n.sign(c.buttons, "Resend held", postback.ResendHeld, "held")
		}
		m, _ := n.lay(c)
		msgs = append(msgs, rendered{id: "notice:" + nt.ID, msg: m})
	}
	_, err := n.send(ctx, msgs, false, len(notices))
	return err
}

func levelColor(level string) string {
	switch level {
	case "ALARM":
		return colorAlarm
	case "WARN":
		return colorHeld
	case "OK":
		return colorOK
	}
	return colorInsufficient
}
