package config

import (
	"strings"
	"time"
)

// ChatOps configures the buttons on alert cards: the notifier signs each
// button's postback data with Key, and the worker acts on an operator's tap
// only when the signature verifies, the data has not expired, and the tap
// comes from one of Operators in a one-to-one chat with the bot.
type ChatOps struct {
	Key       Secret        // CHATOPS_KEY_PARAM / CHATOPS_KEY: the HMAC key only the stack knows
	Operators []string      // OPERATOR_LINE_IDS: who may act (user IDs; groups and rooms never act)
	DLQs      []string      // CHATOPS_DLQS: the queue names Redrive may move messages out of
	TTL       time.Duration // CHATOPS_TTL_HOURS, default 24: how long a button stays valid
	// SilenceRoleARN (CHATOPS_SILENCE_ROLE_ARN) is the role EventBridge
	// Scheduler assumes to enable a silenced alarm's actions again;
	// SchedulePrefix (CHATOPS_SCHEDULE_PREFIX) names those schedules.
	SilenceRoleARN, SchedulePrefix string
}

// Enabled reports whether buttons can be signed (and verified).
func (c ChatOps) Enabled() bool { return c.Key.IsSet() }

// chatOps reads the ChatOps settings; all are optional (no key: no buttons).
func (r *reader) chatOps() ChatOps {
	c := ChatOps{
		Key:            r.secret("CHATOPS_KEY"),
		Operators:      r.operators(r.env("OPERATOR_LINE_IDS")),
		TTL:            time.Duration(r.int("CHATOPS_TTL_HOURS", 24, 1, 24*14)) * time.Hour,
		SilenceRoleARN: r.str("CHATOPS_SILENCE_ROLE_ARN", ""),
		SchedulePrefix: r.str("CHATOPS_SCHEDULE_PREFIX", "linegate-silence"),
	}
	for _, q := range strings.Split(r.env("CHATOPS_DLQS"), ",") {
		if q = strings.TrimSpace(q); q != "" {
			c.DLQs = append(c.DLQs, q)
		}
	}
	r.localOnly(c.Key, "CHATOPS_KEY")
	return c
}

// Quota configures functions/quota, the push-quota governor.
type Quota struct {
	Auth         LineAuth // the channel access token
	Operators    []string // OPERATOR_LINE_IDS: who gets the quota and held-results cards
	ChatOps      ChatOps  // signs the held-results card's "Resend held" button
	HeldQueueURL string   // HELD_QUEUE_URL: the held results waiting for quota; optional
	TimeZone     string   // OPERATOR_TIMEZONE, default Asia/Tokyo: the month's boundaries and card times
	WarnPercent  int      // QUOTA_WARN_PERCENT, default 80
	AlarmPercent int      // QUOTA_ALARM_PERCENT, default 95
	Metrics      string   // METRICS_NAMESPACE
}

// LoadQuota reads and validates the quota governor's configuration.
func LoadQuota(env Getenv) (Quota, error) {
	r := reader{env: env}
	c := Quota{
		Auth:         r.lineAuth(),
		ChatOps:      r.chatOps(),
		HeldQueueURL: r.str("HELD_QUEUE_URL", ""),
		TimeZone:     r.str("OPERATOR_TIMEZONE", "Asia/Tokyo"),
		WarnPercent:  int(r.int("QUOTA_WARN_PERCENT", 80, 1, 100)),
		AlarmPercent: int(r.int("QUOTA_ALARM_PERCENT", 95, 1, 100)),
		Metrics:      r.str("METRICS_NAMESPACE", "linegate"),
	}
	c.Operators = r.operators(r.required("OPERATOR_LINE_IDS", "the LINE user or group IDs that receive quota cards, comma-separated"))
	if c.WarnPercent >= c.AlarmPercent {
		r.problem("QUOTA_WARN_PERCENT (%d) must be below QUOTA_ALARM_PERCENT (%d)", c.WarnPercent, c.AlarmPercent)
	}
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		r.problem("OPERATOR_TIMEZONE %q is not a time zone (use an IANA name such as Asia/Tokyo): %v", c.TimeZone, err)
	}
	return c, r.err()
}

// MetricsNamespace is the CloudWatch namespace of the quota governor's
// metrics.
func (c Quota) MetricsNamespace() string { return c.Metrics }
