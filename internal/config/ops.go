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

// Quota configures functions/quota, the push-quota governor: its cards
// are the quota's and the held results' ("Resend held" button).
type Quota struct {
	Paging
	HeldQueueURL string // HELD_QUEUE_URL: the held results waiting for quota; optional
	WarnPercent  int    // QUOTA_WARN_PERCENT, default 80
	AlarmPercent int    // QUOTA_ALARM_PERCENT, default 95
	// Channels are the named channels (LINE_CHANNELS) beside the default
	// one: each has its own monthly quota, read with its own token, and
	// its cards go to its own operators (else to OPERATOR_LINE_IDS).
	Channels []Channel
}

// LoadQuota reads and validates the quota governor's configuration.
func LoadQuota(env Getenv) (Quota, error) {
	r := reader{env: env}
	c := Quota{
		Paging:       r.paging("the LINE user or group IDs that receive quota cards, comma-separated"),
		HeldQueueURL: r.str("HELD_QUEUE_URL", ""),
		WarnPercent:  int(r.int("QUOTA_WARN_PERCENT", 80, 1, 100)),
		AlarmPercent: int(r.int("QUOTA_ALARM_PERCENT", 95, 1, 100)),
	}
	c.Channels = r.channels(needs{token: true, operators: true}, c.Auth.Mode)
	if c.WarnPercent >= c.AlarmPercent {
		r.problem("QUOTA_WARN_PERCENT (%d) must be below QUOTA_ALARM_PERCENT (%d)", c.WarnPercent, c.AlarmPercent)
	}
	return c, r.err()
}
