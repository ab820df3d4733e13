package awswire

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/schemas"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// EventBridge is the EventBridge calls the server serves: the webhook's
// PutEvents, and what provisioning and the conformance suite call.
type EventBridge interface {
	CreateEventBus(ctx context.Context, in *eventbridge.CreateEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.CreateEventBusOutput, error)
	PutRule(ctx context.Context, in *eventbridge.PutRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error)
	DescribeRule(ctx context.Context, in *eventbridge.DescribeRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error)
	PutTargets(ctx context.Context, in *eventbridge.PutTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error)
	ListTargetsByRule(ctx context.Context, in *eventbridge.ListTargetsByRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error)
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

func (s *Server) addEventBridge() {
	e := s.events
	ops := map[string]func(context.Context, []byte) (any, error){
		"CreateEventBus":    sdkCall(e.CreateEventBus),
		"PutRule":           sdkCall(e.PutRule),
		"DescribeRule":      sdkCall(e.DescribeRule),
		"PutTargets":        sdkCall(e.PutTargets),
		"ListTargetsByRule": sdkCall(e.ListTargetsByRule),
		"PutEvents":         s.putEvents,
	}
	encode := sdkEncoder(awsjson.New11(schemas.AWSEvents))
	for name, call := range ops {
		s.json["AWSEvents."+name] = jsonOp{service: "EventBridge", namespace: "com.amazonaws.eventbridge", version: "1.1", call: call, encode: encode}
	}
}

// putEvents decodes PutEvents by hand for one member: an entry's Time is an
// epoch-seconds number on the wire, which the SDK's time.Time field cannot
// take from encoding/json.
func (s *Server) putEvents(ctx context.Context, body []byte) (any, error) {
	var raw struct {
		EndpointId *string
		Entries    []json.RawMessage
	}
	if err := decodeInto(body, &raw); err != nil {
		return nil, err
	}
	in := &eventbridge.PutEventsInput{EndpointId: raw.EndpointId}
	for _, r := range raw.Entries {
		var at struct{ Time *float64 }
		if err := decodeInto(r, &at); err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := decodeInto(r, &fields); err != nil {
			return nil, err
		}
		delete(fields, "Time")
		rest, _ := json.Marshal(fields)
		var entry ebtypes.PutEventsRequestEntry
		if err := decodeInto(rest, &entry); err != nil {
			return nil, err
		}
		if at.Time != nil && !math.IsNaN(*at.Time) && !math.IsInf(*at.Time, 0) {
			sec, frac := math.Modf(*at.Time)
			t := time.Unix(int64(sec), int64(frac*1e9)).UTC()
			entry.Time = &t
		}
		in.Entries = append(in.Entries, entry)
	}
	return s.events.PutEvents(ctx, in)
}
