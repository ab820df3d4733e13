package samcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Verdicts ParseInvocation gives an invocation that did not answer normally.
var (
	// ErrInitFailed means the Lambda runtime reported that the function
	// failed at INIT ("(rapid) Init failed" in sam's log): it refused its
	// configuration or crashed while starting. sam still exits 0.
	ErrInitFailed = errors.New("the function failed at INIT")
	// ErrInvokeFailed means the invocation itself failed after a successful
	// INIT: the runtime said so ("(rapid) Invoke DONE failed": the function
	// crashed), or sam stopped it at the function's Timeout ("Function 'X'
	// timed out after N seconds"; sam then prints no response and exits 0).
	ErrInvokeFailed = errors.New("the invocation failed")
	// ErrNoResponse means sam printed no JSON response on stdout.
	ErrNoResponse = errors.New("no response from the function")
)

// FunctionError is a handler's error as Lambda returns it: the response is
// {"errorMessage": ..., "errorType": ...} instead of the handler's output.
type FunctionError struct {
	Type    string
	Message string
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("the function returned an error: %s: %s", e.Type, e.Message)
}

// Invocation is one `sam local invoke`'s output.
type Invocation struct {
	// Response is the function's response: what sam printed on stdout, a
	// JSON value (whitespace trimmed).
	Response []byte
	// Log is what sam printed on stderr: its own progress lines, the
	// container's (the runtime's and the function's) log lines and the
	// REPORT line.
	Log string
}

// Markers of the Lambda runtime (the Runtime Interface Emulator inside the
// container) in sam's log.
const (
	markInitFailed   = "(rapid) Init failed"
	markInvokeFailed = "(rapid) Invoke DONE failed"
	// markTimedOut is sam's own line when it stops a function at its
	// Timeout: "Function 'WorkerFunction' timed out after 3 seconds".
	markTimedOut = "timed out after"
)

// ParseInvocation judges one `sam local invoke` by its output: stdout (the
// response) and stderr (the log). It returns the Invocation and, when the
// function did not answer normally, an error wrapping ErrInitFailed,
// ErrInvokeFailed or ErrNoResponse, or a *FunctionError. An INIT failure
// carries the function's last ERROR log line (its message and error fields),
// which says why it refused to start.
func ParseInvocation(stdout, stderr []byte) (Invocation, error) {
	inv := Invocation{Response: bytes.TrimSpace(stdout), Log: string(stderr)}
	if reason, ok := runtimeVerdict(inv.Log, markInitFailed); ok {
		if why := lastErrorLog(inv.Log, markInitFailed); why != "" {
			reason = why + " (" + reason + ")"
		}
		return inv, fmt.Errorf("%w: %s", ErrInitFailed, reason)
	}
	if reason, ok := runtimeVerdict(inv.Log, markInvokeFailed); ok {
		return inv, fmt.Errorf("%w: %s", ErrInvokeFailed, reason)
	}
	if line, ok := lineWith(inv.Log, markTimedOut); ok && len(inv.Response) == 0 {
		return inv, fmt.Errorf("%w: %s", ErrInvokeFailed, line)
	}
	if len(inv.Response) == 0 {
		return inv, fmt.Errorf("%w: sam printed nothing on stdout", ErrNoResponse)
	}
	if !json.Valid(inv.Response) {
		return inv, fmt.Errorf("%w: stdout is not JSON: %s", ErrNoResponse, snippet(inv.Response))
	}
	if fe := functionError(inv.Response); fe != nil {
		return inv, fe
	}
	return inv, nil
}

// runtimeVerdict finds the first log line carrying mark and returns what
// follows it.
func runtimeVerdict(log, mark string) (string, bool) {
	for line := range strings.Lines(log) {
		if _, after, ok := strings.Cut(line, mark); ok {
			return strings.TrimSpace(strings.TrimLeft(after, ": ")), true
		}
	}
	return "", false
}

// lineWith is the first log line containing s, trimmed.
func lineWith(log, s string) (string, bool) {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line), true
		}
	}
	return "", false
}

// lastErrorLog is the message and error of the last JSON log line at level
// ERROR before the first line carrying mark, or "".
func lastErrorLog(log, mark string) string {
	last := ""
	for line := range strings.Lines(log) {
		if strings.Contains(line, mark) {
			break
		}
		var l struct {
			Level, Message, Error string
		}
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &l) != nil || l.Level != "ERROR" {
			continue
		}
		last = l.Message
		if l.Error != "" {
			last += ": " + l.Error
		}
	}
	return last
}

// functionError reads a Lambda error response: a JSON object whose keys are
// errorMessage and errorType (and optionally stackTrace), nothing else.
func functionError(resp []byte) *FunctionError {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) != nil {
		return nil
	}
	typ, hasType := m["errorType"]
	msg, hasMsg := m["errorMessage"]
	if !hasType || !hasMsg {
		return nil
	}
	for k := range m {
		if k != "errorType" && k != "errorMessage" && k != "stackTrace" {
			return nil
		}
	}
	fe := &FunctionError{}
	if json.Unmarshal(typ, &fe.Type) != nil || json.Unmarshal(msg, &fe.Message) != nil {
		return nil
	}
	return fe
}

// snippet is b, cut to 200 bytes for an error message.
func snippet(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
