// Package quota is the push-quota governor: a scheduled function that reads
// the channel's message quota and use for the month (GET
// /v2/bot/message/quota and /v2/bot/message/quota/consumption), publishes
// them as metrics, projects the month-end use from the pace so far, and
// pages the operators when use crosses the warning (80 %) and alarm (95 %)
// thresholds, with a card that says the projection. It also reminds them,
// with a "Resend held" button, when results are held in the HeldQueue
// while quota is available again.
//
// The governor keeps no state: a card's retry key is derived from the
// month, the threshold and the day, so LINE delivers it once a day however
// often the governor runs, and a threshold crossed again after the limit
// was raised pages again.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/held"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/telemetry"
)

// Metric names (docs/metrics.md). Each is recorded once per run; the
// dashboard charts them with the Sum over the schedule's period, which is
// the value of that run.
const (
	MetricUsed      = "QuotaMessagesUsed"      // messages sent this month
	MetricAllowed   = "QuotaMessagesAllowed"   // the month's target limit (only when limited)
	MetricProjected = "QuotaMessagesProjected" // projected use at the month's end
	MetricHeld      = "HeldResultsQueued"      // results waiting in the HeldQueue
	// MetricExhausted is 1 when the month's limit is reached (every push is
	// refused, alerts included), 0 otherwise: the quota-exhausted alarm
	// escalates it by email, outside LINE.
	MetricExhausted = "QuotaExhausted"
)

// quotaReader is the LINE call the governor makes (lineapi.Client).
type quotaReader interface {
	Quota(ctx context.Context) (lineapi.Quota, error)
}

// notifier pushes the governor's cards (alert.Notifier).
type notifier interface {
	Notify(ctx context.Context, notices ...alert.Notice) error
}

// HeldQueue is the SQS calls the governor makes on the HeldQueue: its
// depth, and the refresh that keeps held items past SQS's retention.
type HeldQueue interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	held.RefreshQueue
}

// refreshPerRun bounds how many held items one run looks at for refreshing.
const refreshPerRun = 500

// Governor checks the quota of one channel once per Run.
type Governor struct {
	// Channel is the channel whose quota Line reads ("" for the default
	// one): each official account has its own monthly limit. A named
	// channel's cards say which channel they are about.
	Channel string
	Line    quotaReader
	Cards   notifier
	Held    HeldQueue // nil: no HeldQueue
	HeldURL string
	// WarnPercent and AlarmPercent are the thresholds (80 and 95).
	WarnPercent, AlarmPercent int
	// Loc is the time zone the month is counted in.
	Loc     *time.Location
	Now     func() time.Time
	Log     *slog.Logger
	Metrics telemetry.Recorder
}

// Status is what one run found.
type Status struct {
	Quota     lineapi.Quota
	Percent   float64 // use as a share of the limit (0 when not limited)
	Projected int64   // projected month-end use at this month's pace
	Level     string  // "", "WARN" or "ALARM"
	Held      int     // results waiting in the HeldQueue
}

// Run reads the quota, records the metrics and sends the cards that are
// due. An error means the quota could not be read or a card not pushed;
// the scheduler runs the governor again at its next tick.
func (g *Governor) Run(ctx context.Context) (Status, error) {
	g.defaults()
	q, err := g.Line.Quota(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("quota: read: %w", err)
	}
	now := g.Now().In(g.Loc)
	st := Status{Quota: q, Projected: Project(q.Used, now)}
	g.Metrics.Count(MetricUsed, float64(q.Used))
	g.Metrics.Count(MetricProjected, float64(st.Projected))
	exhausted := 0.0
	if q.Limited && q.Used >= q.Limit {
		exhausted = 1
	}
	g.Metrics.Count(MetricExhausted, exhausted)
	if q.Limited {
		g.Metrics.Count(MetricAllowed, float64(q.Limit))
		if q.Limit > 0 {
			st.Percent = float64(q.Used) * 100 / float64(q.Limit)
		} else {
			st.Percent = 100
		}
		switch {
		case st.Percent >= float64(g.AlarmPercent):
			st.Level = "ALARM"
		case st.Percent >= float64(g.WarnPercent):
			st.Level = "WARN"
		}
	}
	if g.Held != nil && g.HeldURL != "" {
		// Held items older than a week are written anew: SQS keeps a
		// message 14 days, a spent quota can last a month.
		if n, err := held.Refresh(ctx, g.Held, g.HeldURL, held.RefreshAge, refreshPerRun, g.Now()); err != nil {
			g.Log.WarnContext(ctx, "quota: held results not refreshed", "error", err.Error())
		} else if n > 0 {
			g.Log.InfoContext(ctx, "quota: held results refreshed", "count", n)
		}
		n, err := g.depth(ctx)
		if err != nil {
			g.Log.WarnContext(ctx, "quota: held queue depth unknown", "error", err.Error())
		}
		st.Held = n
		g.Metrics.Count(MetricHeld, float64(n))
	}
	g.Log.InfoContext(ctx, "quota checked", "channel", channel.Label(g.Channel), "limited", q.Limited, "limit", q.Limit, "used", q.Used,
		"percent", st.Percent, "projected", st.Projected, "level", st.Level, "held", st.Held)

	var cards []alert.Notice
	day, month := now.Format("2006-01-02"), now.Format("2006-01")
	if st.Level != "" {
		cards = append(cards, g.quotaCard(st, month, day))
	}
	if st.Held > 0 && q.Remaining() != 0 {
		cards = append(cards, alert.Notice{
			ID: "held:" + day + ":" + strconv.FormatInt(q.Limit, 10), Level: "WARN", Badge: "HELD",
			Title:    "Held results can be sent",
			Headline: fmt.Sprintf("%d result(s) held for the monthly limit are waiting, and quota is available again.", st.Held),
			Detail:   "Tap Resend held, or run `linegate resend-held`.",
			Rows:     quotaRows(st), ResendHeld: true,
		})
	}
	if len(cards) == 0 {
		return st, nil
	}
	if err := g.Cards.Notify(ctx, cards...); err != nil {
		if exhausted == 1 && errors.Is(err, lineapi.ErrMonthlyLimit) {
			// LINE cannot carry the card while the quota is spent: the
			// quota-exhausted alarm takes it to the escalation email.
			g.Log.WarnContext(ctx, "quota: card not pushed: the monthly limit is reached (the quota-exhausted alarm escalates)")
			return st, nil
		}
		return st, fmt.Errorf("quota: notify: %w", err)
	}
	return st, nil
}

// quotaCard says how much of the month's quota is used and where this
// month's pace leads. Its ID changes with the limit, so raising the limit
// and crossing a threshold again pages again.
func (g *Governor) quotaCard(st Status, month, day string) alert.Notice {
	threshold := g.WarnPercent
	if st.Level == "ALARM" {
		threshold = g.AlarmPercent
	}
	q := st.Quota
	title := fmt.Sprintf("Push quota over %d%%", threshold)
	if g.Channel != channel.Default {
		title += " (channel " + g.Channel + ")"
	}
	return alert.Notice{
		// A named channel's card is its own: its retry key never meets the
		// default channel's card of the same day (its cards may go out
		// through the default channel).
		ID:    channel.Scope(g.Channel, fmt.Sprintf("quota:%s:%s:%d:%s", month, st.Level, q.Limit, day)),
		Level: st.Level, Badge: "QUOTA " + st.Level,
		Title:    title,
		Headline: fmt.Sprintf("%.0f%% of this month's %s messages used (%s).", st.Percent, thousands(q.Limit), thousands(q.Used)),
		Detail: fmt.Sprintf("At this month's pace: %s by the month's end (%.0f%% of the limit). "+
			"Replies are free; pushes beyond the limit are held, not lost. Raise the limit in LINE Official Account Manager if needed.",
			thousands(st.Projected), float64(st.Projected)*100/float64(max(q.Limit, 1))),
		Rows: quotaRows(st),
	}
}

func quotaRows(st Status) []alert.Row {
	rows := []alert.Row{{Label: "Used", Value: thousands(st.Quota.Used)}}
	if st.Quota.Limited {
		rows = append(rows, alert.Row{Label: "Limit", Value: thousands(st.Quota.Limit)})
	}
	rows = append(rows, alert.Row{Label: "Projected", Value: thousands(st.Projected)})
	if st.Held > 0 {
		rows = append(rows, alert.Row{Label: "Held", Value: strconv.Itoa(st.Held)})
	}
	return rows
}

func (g *Governor) depth(ctx context.Context) (int, error) {
	out, err := g.Held.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(g.HeldURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	v, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	f, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return v + f, nil
}

func (g *Governor) defaults() {
	if g.Loc == nil {
		g.Loc = time.UTC
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.Log == nil {
		g.Log = slog.Default()
	}
	if g.Metrics == nil {
		g.Metrics = telemetry.Discard
	}
	if g.WarnPercent == 0 {
		g.WarnPercent = 80
	}
	if g.AlarmPercent == 0 {
		g.AlarmPercent = 95
	}
}

// Project extrapolates used, counted since the start of now's month, to the
// month's end at the same pace. In the month's first hour the pace means
// little, and used itself is returned.
func Project(used int64, now time.Time) int64 {
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	end := start.AddDate(0, 1, 0)
	elapsed := now.Sub(start)
	if elapsed < time.Hour {
		return used
	}
	return int64(float64(used) * float64(end.Sub(start)) / float64(elapsed))
}

// thousands formats n with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// Governors are the governors of every channel of a stack: the default
// channel's (which also keeps the HeldQueue: held items of every channel
// wait there) and one per named channel, each reading its own channel's
// quota with its own token and paging its own operators.
type Governors struct {
	Default *Governor
	Named   []*Governor
}

// Run runs every channel's governor and returns the default channel's
// status; every governor runs whatever the others did, and their errors
// are joined, each named channel's naming it.
func (gs *Governors) Run(ctx context.Context) (Status, error) {
	st, err := gs.Default.Run(ctx)
	for _, g := range gs.Named {
		if _, gerr := g.Run(ctx); gerr != nil {
			err = errors.Join(err, fmt.Errorf("channel %s: %w", g.Channel, gerr))
		}
	}
	return st, err
}
