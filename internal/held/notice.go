package held

import (
	"fmt"
	"time"

	"github.com/linegate/linegate/internal/channel"
)

// KindHeld is the linegate-kind message attribute of a held notice on the
// ops topic. The notifier renders it as a card with a "Resend held" button;
// the AlertEmail subscription's filter policy lets exactly these notices
// through, because LINE itself cannot carry them while the quota is spent.
const KindHeld = "held-results"

// AttributeKind is the SNS message attribute naming an ops message's kind
// (the same attribute crash reports carry).
const AttributeKind = "linegate-kind"

// NoticeKey is the once-a-month marker of the held notice.
func NoticeKey(heldAt time.Time) string { return "held-notice#" + heldAt.UTC().Format("2006-01") }

// ChannelNoticeKey is the once-a-month marker of channel ch's held notice
// (NoticeKey for the default channel): each channel's quota is its own.
func ChannelNoticeKey(ch string, heldAt time.Time) string {
	return channel.Scope(ch, NoticeKey(heldAt))
}

// ChannelNoticeText is NoticeText naming channel ch (NoticeText for the
// default channel).
func ChannelNoticeText(ch string, first time.Time) string {
	if ch == channel.Default {
		return NoticeText(first)
	}
	return fmt.Sprintf("Channel %s: ", ch) + NoticeText(first)
}

// NoticeText is the held notice, readable as an email and parsed by the
// notifier only for its kind.
func NoticeText(first time.Time) string {
	return fmt.Sprintf("LINE refused a push at %s: the channel's monthly message limit is reached.\n"+
		"The bot's pushed results are being held in the HeldQueue, not lost; replies still work.\n"+
		"When quota returns (raise the limit in LINE Official Account Manager, or wait for the new month), "+
		"run `linegate resend-held --stack STACK` or tap \"Resend held\" on the card in LINE.",
		first.UTC().Format(time.RFC3339))
}
