package chatops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// CloudWatchSilencer silences an alarm in AWS: DisableAlarmActions now,
// and a one-time EventBridge Scheduler schedule (deleted after it ran) that
// calls EnableAlarmActions at the end of the silence with RoleARN, a role
// allowed exactly that on the stack's alarms.
type CloudWatchSilencer struct {
	Alarms    alarmActions
	Schedules schedules
	// RoleARN is the role Scheduler assumes to enable the alarm's actions.
	RoleARN string
	// Prefix names the schedules ("<stack>-silence"); the worker may create
	// schedules under this prefix only.
	Prefix string
}

// Silence mutes alarm's notifications until until.
func (s CloudWatchSilencer) Silence(ctx context.Context, alarm string, until time.Time) error {
	if _, err := s.Alarms.DisableAlarmActions(ctx, &cloudwatch.DisableAlarmActionsInput{AlarmNames: []string{alarm}}); err != nil {
		return fmt.Errorf("disable the actions of %s: %w", alarm, err)
	}
	input, _ := json.Marshal(map[string][]string{"AlarmNames": {alarm}})
	sum := sha256.Sum256([]byte(alarm))
	name := fmt.Sprintf("%s-%s-%d", s.Prefix, hex.EncodeToString(sum[:6]), until.Unix())
	_, err := s.Schedules.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                       aws.String(name),
		ScheduleExpression:         aws.String("at(" + until.UTC().Format("2006-01-02T15:04:05") + ")"),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      schedtypes.ActionAfterCompletionDelete,
		Target: &schedtypes.Target{
			Arn: aws.String(enableAlarmActions), RoleArn: aws.String(s.RoleARN), Input: aws.String(string(input)),
		},
	})
	if err != nil {
		return fmt.Errorf("schedule the end of the silence of %s (its actions stay disabled: enable them in the console): %w", alarm, err)
	}
	return nil
}
