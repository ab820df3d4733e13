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
	lineStart               // START RequestId: ID Version: V
	lineEnd                 // END RequestId: ID
	lineReport              // REPORT RequestId: ID\t...Duration: N ms\t...
	lineInvokeDone          // INVOKE RTDONE(status: S, produced bytes: B, duration: Nms)
)

// The emulator's per-invocation lines, printed as Lambda prints them: START
// before it hands the event over, END and REPORT once the runtime answered.
// REPORT's Duration runs from the emulator taking the invoke to the answer:
// on a cold start it includes the INIT, which the emulator runs lazily
// inside the invoke. Lambda's Duration is rapid's INVOKE RTDONE line, its
// platform.runtimeDone event (durationMs: from handing the event to the
// runtime to its answer,
// https://docs.aws.amazon.com/lambda/latest/dg/telemetry-schema-reference.html#platform-runtimeDone).
const (
	invokeDonePrefix = "INVOKE RTDONE("
	startPrefix      = "START RequestId: "
	endPrefix        = "END RequestId: "
	reportPrefix     = "REPORT RequestId: "
	durationKey      = "Duration: "
)

// logLine is what parseLine found in one emulator log line.
type logLine struct {
	kind     lineKind
	duration time.Duration // lineInitReport
	status   string        // lineInitDone: "success", "error", "timeout", ...
	request  string        // lineStart, lineEnd, lineReport: the request id
}

// parseLine reads one line of the emulator's output, for example
//
//	29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT REPORT(durationMs: 14.926000)
//	29 Nov 2026 08:55:35,517 [INFO] (rapid) INIT RTDONE(status: success)
//	START RequestId: 7c1e Version: $LATEST
//	END RequestId: 7c1e
//	REPORT RequestId: 7c1e	Duration: 16.07 ms	Billed Duration: 17 ms	...
//
// and returns lineOther for anything it does not recognise, including
// function output that merely contains the words.
func parseLine(line string) logLine {
	if l, ok := parseRequestLine(line); ok {
		return l
	}
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
	case strings.HasPrefix(rest, invokeDonePrefix):
		v, ok := strings.CutSuffix(rest[len(invokeDonePrefix):], "ms)")
		if !ok {
			return logLine{}
		}
		_, d, ok := strings.Cut(v, "duration: ")
		if !ok {
			return logLine{}
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(d), 64)
		if err != nil || math.IsNaN(ms) || ms < 0 || ms > 24*60*60*1000 {
			return logLine{}
		}
		return logLine{kind: lineInvokeDone, duration: time.Duration(ms * float64(time.Millisecond))}
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

// parseRequestLine reads the emulator's START, END and REPORT lines, which
// begin the line (function output that quotes them does not).
func parseRequestLine(line string) (logLine, bool) {
	switch {
	case strings.HasPrefix(line, startPrefix):
		id, _, _ := strings.Cut(line[len(startPrefix):], " ")
		if !requestID(id) {
			return logLine{}, false
		}
		return logLine{kind: lineStart, request: id}, true
	case strings.HasPrefix(line, endPrefix):
		id := line[len(endPrefix):]
		if !requestID(id) {
			return logLine{}, false
		}
		return logLine{kind: lineEnd, request: id}, true
	case strings.HasPrefix(line, reportPrefix):
		fields := strings.Split(line[len(reportPrefix):], "\t")
		id := fields[0]
		if !requestID(id) {
			return logLine{}, false
		}
		for _, f := range fields[1:] {
			v, ok := strings.CutPrefix(strings.TrimSpace(f), durationKey)
			if !ok {
				continue // Init Duration, Billed Duration, Memory Size, ...
			}
			ms, err := strconv.ParseFloat(strings.TrimSuffix(v, " ms"), 64)
			if err != nil || math.IsNaN(ms) || ms < 0 || ms > 24*60*60*1000 || !strings.HasSuffix(v, " ms") {
				return logLine{}, false
			}
			return logLine{kind: lineReport, request: id, duration: time.Duration(ms * float64(time.Millisecond))}, true
		}
	}
	return logLine{}, false
}

// requestID reports whether s can be a request id: the emulator's are UUIDs,
// or what the invoke's X-Amzn-RequestId said (Run's are hex and dashes).
func requestID(s string) bool {
	return s != "" && len(s) <= 128 && strings.IndexFunc(s, notStatusRune) < 0
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
