package coldstart

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// The emulator's own "Init Duration" in its REPORT line is useless: it times
// only the call that starts initialisation, which returns at once (~0.05 ms).
// The real figure is rapid's INIT REPORT line, logged when the runtime first
// asks for work (or dies): from the start of the INIT phase, through exec of
// the bootstrap and the function's package init and main, to its first
// GET /runtime/invocation/next. That is the span Lambda bills as Init
// Duration.
const (
	initReportPrefix = "INIT REPORT(durationMs: "
	initDonePrefix   = "INIT RTDONE(status: "
)

// lineKind says what an emulator log line reported.
type lineKind int

const (
	lineOther      lineKind = iota
	lineInitReport          // INIT REPORT(durationMs: N)
	lineInitDone            // INIT RTDONE(status: S)
)

// logLine is what parseLine found in one emulator log line.
type logLine struct {
	kind     lineKind
	duration time.Duration // lineInitReport
	status   string        // lineInitDone: "success", "error", "timeout", ...
}

// parseLine reads one line of the emulator's output, for example
//
//	29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT REPORT(durationMs: 14.926000)
//	29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT RTDONE(status: success)
//
// and returns lineOther for anything it does not recognise, including
// function output that merely contains the words.
func parseLine(line string) logLine {
	const rapid = "(rapid) "
	i := strings.Index(line, rapid)
	if i < 0 {
		return logLine{}
	}
	rest := line[i+len(rapid):]
	switch {
	case strings.HasPrefix(rest, initReportPrefix):
		v, ok := strings.CutSuffix(rest[len(initReportPrefix):], ")")
		if !ok {
			return logLine{}
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		// A duration longer than a day is not an INIT (Lambda caps it at
		// 10 s); refusing it also keeps the conversion below in range.
		if err != nil || math.IsNaN(ms) || ms < 0 || ms > 24*60*60*1000 {
			return logLine{}
		}
		return logLine{kind: lineInitReport, duration: time.Duration(ms * float64(time.Millisecond))}
	case strings.HasPrefix(rest, initDonePrefix):
		v, ok := strings.CutSuffix(rest[len(initDonePrefix):], ")")
		if !ok {
			return logLine{}
		}
		// "success" or "error"; newer emulators may append ", errorType: X".
		status, _, _ := strings.Cut(v, ",")
		status = strings.TrimSpace(status)
		if status == "" || strings.IndexFunc(status, notStatusRune) >= 0 {
			return logLine{}
		}
		return logLine{kind: lineInitDone, status: status}
	}
	return logLine{}
}

// notStatusRune reports a rune that cannot be part of a status word such as
// "success", "error" or "timeout".
func notStatusRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// FunctionError is a handler's error as the Lambda runtime reports it: the
// invocation answered with {"errorMessage": ..., "errorType": ...} instead of
// the handler's result. Invoke returns it (with the body) so callers can tell
// a function that failed from an emulator that did.
type FunctionError struct {
	Type    string
	Message string
}

// Error reports the runtime's error type and message.
func (e *FunctionError) Error() string {
	return "function error " + e.Type + ": " + e.Message
}

// parseFunctionError reports whether body is the runtime's error document: a
// JSON object with string errorMessage and errorType and nothing else but an
// optional stackTrace. A handler result that happens to have other fields is
// not an error.
func parseFunctionError(body []byte) (*FunctionError, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, false
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, false
	}
	var fe FunctionError
	for k, v := range doc {
		switch k {
		case "errorMessage":
			if json.Unmarshal(v, &fe.Message) != nil {
				return nil, false
			}
		case "errorType":
			if json.Unmarshal(v, &fe.Type) != nil {
				return nil, false
			}
		case "stackTrace":
		default:
			return nil, false
		}
	}
	if _, ok := doc["errorType"]; !ok {
		return nil, false
	}
	if _, ok := doc["errorMessage"]; !ok {
		return nil, false
	}
	return &fe, true
}
