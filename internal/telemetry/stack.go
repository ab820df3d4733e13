package telemetry

import (
	"strconv"
	"strings"
)

// MaxStackFrames bounds the frames recorded for a panic (the X-Ray SDK's own
// cap).
const MaxStackFrames = 32

// Frame is one frame of a recovered panic's stack: the function and where
// its code is. Argument values are not kept: a trace is no place for data.
type Frame struct {
	Function string
	File     string
	Line     int
}

// StackFrames turns runtime/debug.Stack output into frames: pairs of
// "pkg.Func(args)" and "\t/path/file.go:123 +0x1d" lines. Lines that do not
// fit the pattern are skipped; at most limit frames are returned.
func StackFrames(stack []byte, limit int) []Frame {
	lines := strings.Split(string(stack), "\n")
	var out []Frame
	for i := 0; i+1 < len(lines) && len(out) < limit; i++ {
		fn := lines[i]
		loc := lines[i+1]
		if fn == "" || strings.HasPrefix(fn, "\t") || !strings.HasPrefix(loc, "\t") {
			continue
		}
		loc = strings.TrimPrefix(loc, "\t")
		if sp := strings.LastIndexByte(loc, ' '); sp > 0 {
			loc = loc[:sp]
		}
		colon := strings.LastIndexByte(loc, ':')
		if colon <= 0 {
			continue
		}
		line, err := strconv.Atoi(loc[colon+1:])
		if err != nil {
			continue
		}
		if p := strings.LastIndexByte(fn, '('); p > 0 {
			fn = fn[:p]
		}
		out = append(out, Frame{Function: fn, File: loc[:colon], Line: line})
		i++
	}
	return out
}
