// Package envelope is the contract between the webhook and the workers: the
// Detail every LINE event travels in on the bus, and the EventBridge event a
// rule target (an SQS queue) receives around it. It imports no AWS client,
// so the worker links no EventBridge SDK to read what the webhook wrote.
package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Detail is the Detail of every entry the webhook publishes. Its Event holds the
// LINE event's raw bytes exactly as LINE sent them: never a re-marshalled SDK
// struct, which would add fields and drop unknown ones.
type Detail struct {
	Destination string          `json:"destination"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	Event       json.RawMessage `json:"event"`
}

// Event is an EventBridge event as a rule target receives it: the SQS body of
// every record a worker reads.
type Event struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ErrMalformed marks a record body that is not an EventBridge event carrying
// a Detail. Such a record can never succeed: callers send it to the DLQ
// path rather than retrying forever.
var ErrMalformed = errors.New("malformed envelope")

// Decode parses an SQS record body into the EventBridge event and the
// envelope inside it. Every error wraps ErrMalformed.
func Decode(body []byte) (Event, Detail, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: eventbridge event: %v", ErrMalformed, err)
	}
	if len(ev.Detail) == 0 || ev.Detail[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail is not a JSON object", ErrMalformed)
	}
	var env Detail
	if err := json.Unmarshal(ev.Detail, &env); err != nil {
		return Event{}, Detail{}, fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	if len(env.Event) == 0 || env.Event[0] != '{' {
		return Event{}, Detail{}, fmt.Errorf("%w: detail.event is not a JSON object", ErrMalformed)
	}
	return ev, env, nil
}
