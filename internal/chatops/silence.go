package chatops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// alarmActions is the CloudWatch call Silence makes.
type alarmActions interface {
	DisableAlarmActions(ctx context.Context, in *cloudwatch.DisableAlarmActionsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.DisableAlarmActionsOutput, error)
}

// schedules is the EventBridge Scheduler call Silence makes.
type schedules interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
}

// enableAlarmActions is Scheduler's universal target for CloudWatch's
// EnableAlarmActions.
const enableAlarmActions = "arn:aws:scheduler:::aws-sdk:cloudwatch:enableAlarmActions"

// CloudWatchSilencer silences an alarm in AWS: a one-time EventBridge
// Scheduler schedule (deleted after it ran) that calls EnableAlarmActions
// at the end of the silence with RoleARN, a role allowed exactly that on
// the stack's alarms, and then DisableAlarmActions. The schedule comes
// first: when it cannot be created nothing is muted, whereas actions
// disabled without it would stay disabled for good.
type CloudWatchSilencer struct {
	Alarms    alarmActions
	Schedules schedules
	// RoleARN is the role Scheduler assumes to enable the alarm's actions.
	RoleARN string
	// Prefix names the schedules (the template's "lgs-<the stack's UUID>");
	// the worker may create schedules under this prefix only.
	Prefix string
}

// Silence mutes alarm's notifications until until.
func (s CloudWatchSilencer) Silence(ctx context.Context, alarm string, until time.Time) error {
	input, _ := json.Marshal(map[string][]string{"AlarmNames": {alarm}})
	_, err := s.Schedules.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                       aws.String(ScheduleName(s.Prefix, alarm, until)),
		ScheduleExpression:         aws.String("at(" + until.UTC().Format("2006-01-02T15:04:05") + ")"),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      schedtypes.ActionAfterCompletionDelete,
		Target: &schedtypes.Target{
			Arn: aws.String(enableAlarmActions), RoleArn: aws.String(s.RoleARN), Input: aws.String(string(input)),
		},
	})
	if err != nil {
		return fmt.Errorf("schedule the end of the silence of %s (nothing was silenced): %w", alarm, err)
	}
	if _, err := s.Alarms.DisableAlarmActions(ctx, &cloudwatch.DisableAlarmActionsInput{AlarmNames: []string{alarm}}); err != nil {
		return fmt.Errorf("disable the actions of %s (nothing was silenced; the schedule that would end it enables what is enabled): %w", alarm, err)
	}
	return nil
}

// MaxScheduleName is EventBridge Scheduler's limit on a schedule's name
// (https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html:
// 1 to 64 characters of [0-9a-zA-Z-_.]).
const MaxScheduleName = 64

// maxSchedulePrefix leaves room for "-<12 hex of the alarm>-<unix time>".
const maxSchedulePrefix = MaxScheduleName - 1 - 12 - 1 - 10

var notScheduleChars = regexp.MustCompile(`[^0-9A-Za-z_.-]`)

// ScheduleName names the schedule that ends alarm's silence at until:
// prefix, 12 hex digits of the alarm name's SHA-256 (unique per alarm) and
// the end's Unix time, within Scheduler's 64 characters for every legal
// stack name. A prefix over 40 characters (the template's is 40: "lgs-"
// and the stack's UUID) is cut and given a digest of itself, so that it
// still tells stacks apart; the worker's grant then no longer matches,
// which is why the template derives the prefix from the stack's UUID and
// not from its name (up to 128 characters).
func ScheduleName(prefix, alarm string, until time.Time) string {
	prefix = notScheduleChars.ReplaceAllString(prefix, "-")
	if len(prefix) > maxSchedulePrefix {
		sum := sha256.Sum256([]byte(prefix))
		prefix = prefix[:maxSchedulePrefix-13] + "-" + hex.EncodeToString(sum[:6])
	}
	sum := sha256.Sum256([]byte(alarm))
	return prefix + "-" + hex.EncodeToString(sum[:6]) + "-" + strconv.FormatInt(until.Unix(), 10)
}
